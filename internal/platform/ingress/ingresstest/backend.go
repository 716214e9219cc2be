// Package ingresstest is the backend the ingress tests put behind the proxy: a page that opens a
// WebSocket and reads a streamed response, a WebSocket echo, a streamed response, a download of
// any size and a small answer. The unit tests serve it with httptest; the cluster tests run it as
// a pod (./echoserver, pushed to the local registry as an image without any builder).
package ingresstest

import (
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"strconv"
	"time"

	"github.com/gorilla/websocket"
)

// Request is what /echo answers: the request as the backend saw it.
type Request struct {
	Name    string              `json:"name"`
	Method  string              `json:"method"`
	Host    string              `json:"host"`
	Path    string              `json:"path"`
	Query   string              `json:"query"`
	Headers map[string][]string `json:"headers"`
}

// MaxBytes bounds /bytes.
const MaxBytes = 1 << 30

var page = template.Must(template.New("page").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>ingress test: {{.}}</title></head>
<body>
<h1 id="name">{{.}}</h1>
<p>WebSocket: <output id="ws">waiting</output></p>
<p>Stream: <output id="stream">waiting</output></p>
<script>
(function () {
  var ws = new WebSocket((location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/ws");
  ws.onopen = function () { ws.send("ping from the page"); };
  ws.onmessage = function (e) { document.getElementById("ws").textContent = "echo: " + e.data; ws.close(); };
  ws.onerror = function () { document.getElementById("ws").textContent = "error"; };
  // 500 ms apart: Chromium hands a fetch's reader bytes that arrive ~100 ms apart as one chunk
  fetch("/stream?n=3&interval=500ms").then(function (resp) {
    var reader = resp.body.getReader(), dec = new TextDecoder(), text = "", chunks = 0;
    function pump() {
      return reader.read().then(function (r) {
        if (r.done) { document.getElementById("stream").textContent = "done after " + chunks + " chunks: " + text.trim().split("\n").join(", "); return; }
        chunks++; text += dec.decode(r.value, {stream: true}); return pump();
      });
    }
    return pump();
  }).catch(function (e) { document.getElementById("stream").textContent = "error " + e; });
})();
</script>
</body></html>
`))

// Handler serves the test routes; name tells replicas apart (a pod's name).
func Handler(name string) http.Handler {
	mux := http.NewServeMux()
	up := websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_ = page.Execute(w, name)
	})
	mux.HandleFunc("/small", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprintln(w, "ok", name)
	})
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(Request{Name: name, Method: r.Method, Host: r.Host, Path: r.URL.Path, Query: r.URL.RawQuery, Headers: r.Header})
	})
	mux.HandleFunc("/ws", func(w http.ResponseWriter, r *http.Request) {
		c, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer c.Close()
		for {
			t, msg, err := c.ReadMessage()
			if err != nil {
				return
			}
			if err := c.WriteMessage(t, msg); err != nil {
				return
			}
		}
	})
	// /stream?n=N&interval=D writes N lines, flushing each, D apart.
	mux.HandleFunc("/stream", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		if n <= 0 || n > 1000 {
			n = 3
		}
		d, err := time.ParseDuration(r.URL.Query().Get("interval"))
		if err != nil || d < 0 || d > 10*time.Second {
			d = 100 * time.Millisecond
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		rc := http.NewResponseController(w)
		for i := 1; i <= n; i++ {
			if i > 1 {
				select {
				case <-r.Context().Done():
					return
				case <-time.After(d):
				}
			}
			fmt.Fprintf(w, "line %d of %d from %s\n", i, n, name)
			if err := rc.Flush(); err != nil {
				return
			}
		}
	})
	// /bytes?n=N sends N bytes (Content-Length set).
	chunk := make([]byte, 64<<10)
	for i := range chunk {
		chunk[i] = byte('a' + i%26)
	}
	mux.HandleFunc("/bytes", func(w http.ResponseWriter, r *http.Request) {
		n, err := strconv.ParseInt(r.URL.Query().Get("n"), 10, 64)
		if err != nil || n < 0 || n > MaxBytes {
			http.Error(w, "n: a byte count up to 1 GiB", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
		for n > 0 {
			k := min(n, int64(len(chunk)))
			if _, err := w.Write(chunk[:k]); err != nil {
				return
			}
			n -= k
		}
	})
	return mux
}

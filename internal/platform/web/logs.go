package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/devtool/devtool/internal/logs"
)

// Logs pages select pods as `devtool logs` does (internal/logs: the environment's pods or the whole
// namespace, services matched as prefixes, --exclude, --since, --tail), and come in three forms: a
// page with the last lines (server-rendered: readable without script), a text/plain answer
// (?follow=1 keeps it open and appends lines: following without script), and a server-sent event
// stream the page's script follows.

// Limits of the logs pages.
const (
	maxTail         = 5000
	defaultTail     = 100
	defaultSince    = 48 * time.Hour
	tailTimeout     = 15 * time.Second
	streamLifetime  = 30 * time.Minute // a stream ends then; the page's script opens a new one
	streamKeepalive = 15 * time.Second
)

// logQuery is a logs page's selection (its form's fields).
type logQuery struct {
	Service, Exclude string
	Tail             string
	Since            string
	All              bool
	Timestamps       bool

	tail   int64
	since  time.Duration
	filter logs.Filter
}

// values is the query string of the selection (for the stream and text links).
func (q logQuery) values() url.Values {
	v := url.Values{}
	set := func(k, s string) {
		if s != "" {
			v.Set(k, s)
		}
	}
	set("service", q.Service)
	set("exclude", q.Exclude)
	set("tail", q.Tail)
	set("since", q.Since)
	if q.All {
		v.Set("all", "1")
	}
	if q.Timestamps {
		v.Set("timestamps", "1")
	}
	return v
}

// parseLogQuery reads and checks the selection; problems are by field, in the CLI's words.
func parseLogQuery(v url.Values, envless bool) (logQuery, map[string]string) {
	q := logQuery{Service: v.Get("service"), Exclude: v.Get("exclude"), Tail: v.Get("tail"), Since: v.Get("since"),
		All: envless || v.Get("all") != "", Timestamps: v.Get("timestamps") != ""}
	problems := map[string]string{}
	var err error
	if q.filter.Include, err = logs.CompilePrefix(q.Service); err != nil {
		problems["service"] = fmt.Sprintf("not a valid regular expression: %v", err)
	}
	if q.filter.Exclude, err = logs.CompilePrefix(q.Exclude); err != nil {
		problems["exclude"] = fmt.Sprintf("not a valid regular expression: %v", err)
	}
	q.tail = defaultTail
	if q.Tail != "" {
		n, err := strconv.ParseInt(q.Tail, 10, 64)
		if err != nil || n < 0 || n > maxTail {
			problems["tail"] = fmt.Sprintf("a number of lines from 0 to %d", maxTail)
		} else {
			q.tail = n
		}
	}
	q.since = defaultSince
	if q.Since != "" {
		d, err := time.ParseDuration(q.Since)
		if q.Since == "0" {
			d, err = 0, nil
		}
		if err != nil || d < 0 {
			problems["since"] = "a duration such as 10m, 2h or 0 for no limit"
		} else {
			q.since = d
		}
	}
	return q, problems
}

// logScope is where a logs page reads: the client, namespace and environment ("" with All), and
// the page's links.
type logScope struct {
	kube      kubernetes.Interface
	namespace string
	env       string
	self      string // the logs page's path
	back      string // the environment's (or namespace's) page
	backName  string
}

// logLine is a line as the page and the stream show it.
type logLine struct {
	Time   string `json:"t,omitempty"` // RFC 3339 (from the API's timestamp)
	Prefix string `json:"p"`           // pod/container
	Color  int    `json:"c"`
	Text   string `json:"x"`
}

func toLogLine(l logs.Line) logLine {
	return logLine{Time: l.RawTime, Prefix: l.Prefix, Color: logs.ColorCode(l.Prefix) % 12, Text: l.Text}
}

type logsData struct {
	Namespace, Env string
	Query          logQuery
	Problems       map[string]string
	Lines          []logLine
	Notes          []string
	Self, Back     string
	BackName       string
	Stream, Text   string // links with the selection
	FollowText     string
}

// logsData reads the page's tail (bounded in time: a namespace with a slow API server still
// answers).
func readLogs(ctx context.Context, s logScope, v url.Values) (logsData, int) {
	q, problems := parseLogQuery(v, s.env == "")
	d := logsData{Namespace: s.namespace, Env: s.env, Query: q, Problems: problems, Self: s.self, Back: s.back, BackName: s.backName}
	qs := q.values()
	d.Stream = s.self + "/stream?" + qs.Encode()
	d.Text = s.self + ".txt?" + qs.Encode()
	qs.Set("follow", "1")
	d.FollowText = s.self + ".txt?" + qs.Encode()
	if len(problems) > 0 {
		return d, http.StatusBadRequest
	}
	ctx, cancel := context.WithTimeout(ctx, tailTimeout)
	defer cancel()
	var mu sync.Mutex
	lines, err := logs.TailLines(ctx, logOptions(s, q, func(msg string) { mu.Lock(); d.Notes = append(d.Notes, msg); mu.Unlock() }))
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		d.Notes = append(d.Notes, "The logs took too long to read; showing none. Try fewer lines or a narrower selection.")
	case err != nil:
		d.Notes = append(d.Notes, "The logs could not be read: "+err.Error())
	}
	for _, l := range lines {
		d.Lines = append(d.Lines, toLogLine(l))
	}
	return d, http.StatusOK
}

func logOptions(s logScope, q logQuery, notify func(string)) logs.Options {
	return logs.Options{Client: s.kube, Namespace: s.namespace, Environment: s.env, All: q.All, Filter: q.filter,
		Since: q.since, Tail: q.tail, Notify: notify}
}

// streamWriter sends whole events (or text lines) to the browser and flushes each; a keepalive
// shares its lock.
type streamWriter struct {
	mu sync.Mutex
	w  http.ResponseWriter
	rc *http.ResponseController
}

func (s *streamWriter) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, err := s.w.Write(b)
	if err == nil {
		err = s.rc.Flush()
	}
	return n, err
}

// sseFormatter turns a line into one server-sent event.
type sseFormatter struct{}

func (sseFormatter) Format(l logs.Line) []byte {
	b, _ := json.Marshal(toLogLine(l))
	return append(append([]byte("data: "), b...), '\n', '\n')
}

// startStream prepares a long answer: no write deadline (the server's would cut it), headers out.
func startStream(w http.ResponseWriter, contentType string) *streamWriter {
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Time{})
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	_ = rc.Flush()
	return &streamWriter{w: w, rc: rc}
}

// followLogs streams the selection until ctx ends, the lifetime passes or stillOK says the viewer
// may no longer see it (checked every minute). sse selects event-stream framing, else text lines.
func followLogs(ctx context.Context, w http.ResponseWriter, s logScope, q logQuery, sse bool, stillOK func(context.Context) bool, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(ctx, streamLifetime)
	defer cancel()
	var sw *streamWriter
	var f logs.Formatter
	if sse {
		sw = startStream(w, "text/event-stream; charset=utf-8")
		f = sseFormatter{}
		_, _ = sw.Write([]byte("retry: 3000\n\n"))
	} else {
		sw = startStream(w, "text/plain; charset=utf-8")
		f = logs.TextFormatter{Timestamps: q.Timestamps}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // keepalives, and the viewer's right to go on
		defer wg.Done()
		ka := time.NewTicker(streamKeepalive)
		defer ka.Stop()
		check := time.NewTicker(time.Minute)
		defer check.Stop()
		for {
			select {
			case <-done:
				return
			case <-ka.C:
				if !sse {
					continue // a text answer gets no filler lines
				}
				if _, err := sw.Write([]byte(": keepalive\n\n")); err != nil {
					cancel()
					return
				}
			case <-check.C:
				if stillOK != nil && !stillOK(ctx) {
					cancel()
					return
				}
			}
		}
	}()
	notify := func(msg string) {
		if sse {
			b, _ := json.Marshal(msg)
			_, _ = sw.Write([]byte("event: notice\ndata: " + string(b) + "\n\n"))
		}
	}
	o := logOptions(s, q, notify)
	o.Out, o.Formatter = sw, f
	err := logs.Follow(ctx, o)
	close(done)
	wg.Wait()
	if err != nil && ctx.Err() == nil {
		log.Warn("log stream ended", "namespace", s.namespace, "env", s.env, "err", err)
		if sse {
			notify("The log stream ended: " + err.Error())
		}
	}
}

// --- the platform's handlers

func (u *UI) logScope(r *http.Request, c *caller) (logScope, error) {
	kc, err := u.clients.get(c.user.Name)
	if err != nil {
		return logScope{}, err
	}
	ns, env := r.PathValue("ns"), r.PathValue("env")
	s := logScope{kube: kc, namespace: ns, env: env, back: "/namespaces/" + ns, backName: "namespace " + ns}
	if env != "" {
		s.self = "/namespaces/" + ns + "/environments/" + env + "/logs"
		s.back, s.backName = "/namespaces/"+ns+"/environments/"+env, "environment "+env
	} else {
		s.self = "/namespaces/" + ns + "/logs"
	}
	return s, nil
}

func (u *UI) logsPage(w http.ResponseWriter, r *http.Request, c *caller) {
	s, err := u.logScope(r, c)
	if err != nil {
		u.internal(w, r, c, err)
		return
	}
	d, status := readLogs(r.Context(), s, r.URL.Query())
	title := "Logs of namespace " + s.namespace
	if s.env != "" {
		title = "Logs of " + s.env
	}
	u.render(w, r, status, "logs", c, title, d)
}

func (u *UI) logsStream(w http.ResponseWriter, r *http.Request, c *caller) {
	u.follow(w, r, c, true)
}

func (u *UI) logsText(w http.ResponseWriter, r *http.Request, c *caller) {
	if r.URL.Query().Get("follow") != "" {
		u.follow(w, r, c, false)
		return
	}
	s, err := u.logScope(r, c)
	if err != nil {
		u.internal(w, r, c, err)
		return
	}
	writeLogText(w, r, s)
}

func (u *UI) follow(w http.ResponseWriter, r *http.Request, c *caller, sse bool) {
	s, err := u.logScope(r, c)
	if err != nil {
		u.internal(w, r, c, err)
		return
	}
	q, problems := parseLogQuery(r.URL.Query(), s.env == "")
	if len(problems) > 0 {
		http.Error(w, "bad selection: "+fmt.Sprint(problems), http.StatusBadRequest)
		return
	}
	if u.closing.Err() != nil {
		w.Header().Set("Retry-After", "1")
		http.Error(w, "the platform is restarting: try again", http.StatusServiceUnavailable)
		return
	}
	if !u.openStream(c.user.Name) {
		w.Header().Set("Retry-After", "10")
		http.Error(w, fmt.Sprintf("you have %d log streams open already: close one", u.o.Streams), http.StatusTooManyRequests)
		return
	}
	defer u.streamClosed(c.user.Name)
	name := c.user.Name
	stillOK := func(ctx context.Context) bool {
		cc, err := u.caller(r)
		return err == nil && cc != nil && cc.user.Name == name && u.o.Store.RoleIn(name, s.namespace) != ""
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	defer context.AfterFunc(u.closing, cancel)()
	followLogs(ctx, w, s, q, sse, stillOK, u.o.Log)
}

// writeLogText answers the tail as text/plain.
func writeLogText(w http.ResponseWriter, r *http.Request, s logScope) {
	q, problems := parseLogQuery(r.URL.Query(), s.env == "")
	if len(problems) > 0 {
		http.Error(w, "bad selection: "+fmt.Sprint(problems), http.StatusBadRequest)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), tailTimeout)
	defer cancel()
	lines, err := logs.TailLines(ctx, logOptions(s, q, nil))
	if err != nil {
		http.Error(w, "the logs could not be read: "+err.Error(), http.StatusBadGateway)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	f := logs.TextFormatter{Timestamps: q.Timestamps}
	for _, l := range lines {
		if _, err := w.Write(f.Format(l)); err != nil {
			return
		}
	}
}

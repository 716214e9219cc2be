//go:build integration

package kube_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/devtool/devtool/internal/testcluster"
)

// TestDialPod reaches a server that listens only on the pod's loopback through one
// port-forward stream, twice at once, reports a closed port as an error, and leaves no
// goroutine behind.
func TestDialPod(t *testing.T) {
	c := testcluster.Connect(t)
	ns := c.Namespace(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	startPod(t, ctx, c.Clientset, ns, "lo", "sh", "-c", "mkdir -p /www && echo loopback-only > /www/index.html && exec httpd -f -p 127.0.0.1:8080 -h /www")
	before := runtime.NumGoroutine()

	get := func() (string, error) {
		conn, err := c.DialPod(ctx, ns, "lo", 8080)
		if err != nil {
			return "", err
		}
		defer conn.Close()
		if _, err := fmt.Fprintf(conn, "GET / HTTP/1.0\r\nHost: x\r\n\r\n"); err != nil {
			return "", err
		}
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}
	results := make(chan string, 2)
	for range 2 {
		go func() {
			body, err := get()
			if err != nil {
				body = "error: " + err.Error()
			}
			results <- body
		}()
	}
	for range 2 {
		if got := <-results; strings.TrimSpace(got) != "loopback-only" {
			t.Errorf("body %q", got)
		}
	}

	conn, err := c.DialPod(ctx, ns, "lo", 9999)
	if err == nil {
		_, _ = conn.Write([]byte("x"))
		_, err = io.ReadAll(conn)
		conn.Close()
	}
	if err == nil || !strings.Contains(err.Error(), "9999") {
		t.Errorf("closed port: want an error naming the port, got %v", err)
	}
	if _, err := c.DialPod(ctx, ns, "nope", 8080); err == nil {
		t.Error("missing pod: want an error")
	}

	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before+2 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before+2 {
		t.Errorf("goroutines: %d before, %d after", before, n)
	}
}

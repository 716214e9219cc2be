package web

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"net/http/cookiejar"
	"runtime"
	"strings"
	"testing"
	"time"

	kfake "k8s.io/client-go/kubernetes/fake"
)

// TestServeLocalStopsWithOpenStream: ServeLocal serves on loopback and, when its context ends,
// returns promptly even while a log stream is open, leaving no goroutine behind.
func TestServeLocalStopsWithOpenStream(t *testing.T) {
	before := runtime.NumGoroutine()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tok := strings.Repeat("ab", 16)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- ServeLocal(ctx, ln, LocalOptions{Kube: kfake.NewClientset(), Namespace: "ns", Environment: "hello", Token: tok})
	}()
	tr := &http.Transport{}
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Transport: tr, Jar: jar}
	resp, err := c.Get("http://" + ln.Addr().String() + "/?token=" + tok)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET with the token: %d", resp.StatusCode)
	}
	req, _ := http.NewRequest("GET", "http://"+ln.Addr().String()+"/logs/stream", nil)
	stream, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if stream.StatusCode != 200 {
		t.Fatalf("stream: %d", stream.StatusCode)
	}
	first, _ := bufio.NewReader(stream.Body).ReadString('\n')
	if !strings.HasPrefix(first, "retry:") {
		t.Errorf("stream's first line %q", first)
	}
	start := time.Now()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("ServeLocal: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("ServeLocal did not return within 10 s of its context ending")
	}
	if took := time.Since(start); took > 4*time.Second {
		t.Errorf("ServeLocal took %s to stop: the open stream held it until the shutdown deadline", took)
	}
	stream.Body.Close()
	tr.CloseIdleConnections()
	if _, err := net.DialTimeout("tcp", ln.Addr().String(), time.Second); err == nil {
		t.Error("the port still accepts connections")
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before+1 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before+1 {
		buf := make([]byte, 1<<20)
		t.Errorf("%d goroutines before, %d after:\n%s", before, n, buf[:runtime.Stack(buf, true)])
	}
}

func TestServeLocalRefusesOtherAddresses(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// A listener whose address is not loopback is refused (and closed).
	err = ServeLocal(context.Background(), fakeAddrListener{ln}, LocalOptions{Token: strings.Repeat("x", 32)})
	if err == nil || !strings.Contains(err.Error(), "loopback only") {
		t.Errorf("ServeLocal on a non-loopback address: %v", err)
	}
	if _, err := ln.Accept(); err == nil {
		t.Error("the refused listener was left open")
	}
}

type fakeAddrListener struct{ net.Listener }

func (fakeAddrListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(10, 0, 0, 1), Port: 80} }

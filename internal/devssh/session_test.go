package devssh

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func get(addr string) (string, error) {
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get("http://" + addr + "/")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

type eventLog struct {
	mu     sync.Mutex
	events []Event
	ch     chan Event
}

func newEventLog() *eventLog { return &eventLog{ch: make(chan Event, 100)} }

func (l *eventLog) add(e Event) {
	l.mu.Lock()
	l.events = append(l.events, e)
	l.mu.Unlock()
	l.ch <- e
}

func (l *eventLog) next(t *testing.T, kind EventKind) Event {
	t.Helper()
	return l.nextWithin(t, kind, 15*time.Second)
}

func (l *eventLog) nextWithin(t *testing.T, kind EventKind, within time.Duration) Event {
	t.Helper()
	for {
		select {
		case e := <-l.ch:
			if e.Kind == kind {
				return e
			}
		case <-time.After(within):
			l.mu.Lock()
			seen := fmt.Sprint(l.events)
			l.mu.Unlock()
			t.Fatalf("no %s event within %s (events so far: %s)", kind, within, seen)
		}
	}
}

// TestSessionForwardsAndReconnect: a local forward and a reverse forward work, keep
// working on the SAME local port after the TCP connection is cut and after the agent
// restarts, and everything is closed when Run ends.
func TestSessionForwardsAndReconnect(t *testing.T) {
	base := runtime.NumGoroutine()
	f := newFixture(t)
	remote := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "remote app") }))
	defer remote.Close()
	local := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "local app") }))
	defer local.Close()
	_, remotePort, _ := net.SplitHostPort(remote.Listener.Addr().String())
	rp, _ := strconv.Atoi(remotePort)

	tr := &tracker{addr: f.agent.addr}
	events := newEventLog()
	cfg := f.config()
	cfg.OnEvent = events.add
	sess := NewSession(tr.dial, cfg)
	localPort := freePort(t)
	if err := sess.Forward(localPort, "127.0.0.1", rp); err != nil {
		t.Fatal(err)
	}
	reversePort := freePort(t)
	if err := sess.Reverse(reversePort, local.Listener.Addr().String()); err != nil {
		t.Fatal(err)
	}
	fwd := "127.0.0.1:" + strconv.Itoa(localPort)
	rev := "127.0.0.1:" + strconv.Itoa(reversePort)
	if got := sess.ForwardAddrs(); len(got) != 1 || got[0].String() != fwd {
		t.Fatalf("ForwardAddrs %v", got)
	}

	ctx, cancel := context.WithCancel(context.Background())
	runDone := make(chan error, 1)
	go func() { runDone <- sess.Run(ctx) }()
	ev := events.next(t, Connected)
	if ev.Client == nil {
		t.Fatal("Connected without a client")
	}
	if body, err := get(fwd); err != nil || body != "remote app" {
		t.Fatalf("forward: %q %v", body, err)
	}
	waitFor(t, func() bool { return listening(rev) }, "reverse listener in the agent")
	if body, err := get(rev); err != nil || body != "local app" {
		t.Fatalf("reverse: %q %v", body, err)
	}

	// 1. Cut the TCP connection under SSH.
	cutAt := time.Now()
	tr.cut()
	events.next(t, Lost)
	body, err := get(fwd) // waits for the reconnect instead of being refused
	if err != nil || body != "remote app" {
		t.Fatalf("forward after cut: %q %v", body, err)
	}
	t.Logf("connection cut: forward answered again on the same port after %s", time.Since(cutAt))
	re := events.next(t, Reconnected)
	t.Logf("reconnected event: %s after the loss, %d dial(s)", re.Duration, re.Attempts)
	// The agent may still hold the old connection's listener for a moment (it learns of the
	// cut only when its side of the TCP connection fails), so a request can land on it and see
	// EOF: what must hold is that the reverse forward answers again, through the new connection.
	waitFor(t, func() bool {
		body, err := get(rev)
		return err == nil && body == "local app"
	}, "reverse forward answering again after the cut")

	// 2. Restart the agent (same home, so the same host key) on the same address.
	addr := f.agent.addr
	f.agent.stop()
	events.next(t, Lost)
	down := time.Now()
	time.Sleep(300 * time.Millisecond) // a pod takes a while to come back
	restarted := time.Now()
	f.agent = startAgent(t, f.agent.home, addr, f.signer)
	body, err = get(fwd)
	if err != nil || body != "remote app" {
		t.Fatalf("forward after restart: %q %v", body, err)
	}
	t.Logf("agent restarted: forward answered %s after the agent listened again (down %s)", time.Since(restarted), restarted.Sub(down))
	re = events.next(t, Reconnected)
	t.Logf("reconnected event: %s after the loss, %d dial(s)", re.Duration, re.Attempts)

	// A connection opened before the cut does not survive it, but new ones work; an
	// open forward connection is closed when Run ends.
	open, err := net.Dial("tcp", fwd)
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	cancel()
	if err := <-runDone; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if listening(fwd) {
		t.Fatal("forward listener still open after Run")
	}
	open.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := open.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("forwarded connection not closed: %v", err)
	}
	waitFor(t, func() bool { return !listening(rev) }, "reverse listener closed in the agent")
	f.agent.stop()
	remote.Close()
	local.Close()
	http.DefaultTransport.(*http.Transport).CloseIdleConnections()
	goroutinesSettle(t, base)
}

// TestSessionForwardWaitsBounded: with no agent reachable, a connection to a forward
// waits ForwardWait and is then closed; Run ends on cancel with no goroutine left.
func TestSessionForwardWaitsBounded(t *testing.T) {
	base := runtime.NumGoroutine()
	dir := t.TempDir()
	s, err := LoadOrCreateKey(filepath.Join(dir, "id"))
	if err != nil {
		t.Fatal(err)
	}
	dead := &tracker{addr: "127.0.0.1:" + strconv.Itoa(freePort(t))}
	sess := NewSession(dead.dial, ClientConfig{Signer: s, KnownHostsFile: filepath.Join(dir, "kh")})
	sess.ForwardWait = 300 * time.Millisecond
	if err := sess.Forward(0, "127.0.0.1", 80); err != nil {
		t.Fatal(err)
	}
	fwd := sess.ForwardAddrs()[0].String()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sess.Run(ctx) }()
	c, err := net.Dial("tcp", fwd)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = c.Read(make([]byte, 1))
	c.Close()
	if err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("waiting connection: %v", err)
	}
	t.Logf("closed after %s with no agent (ForwardWait 300ms); %d dials meanwhile", time.Since(start), dead.dialCount())
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	goroutinesSettle(t, base)
}

func TestHostKeyPinning(t *testing.T) {
	f := newFixture(t)
	f.dial(t).Close()
	data, err := os.ReadFile(f.knownHosts)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(data), "devtool-agent ssh-ed25519 ") {
		t.Fatalf("known_hosts: %q", data)
	}
	f.dial(t).Close() // same key: accepted

	// Another agent (another host key) behind the same pinned file.
	other := startAgent(t, t.TempDir(), "127.0.0.1:0", f.signer)
	conn, err := net.Dial("tcp", other.addr)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Dial(context.Background(), conn, f.config())
	var hk *HostKeyChangedError
	if !errors.As(err, &hk) || !strings.Contains(err.Error(), "delete "+f.knownHosts) {
		t.Fatalf("host key change: %v", err)
	}
	// A Session stops at once on it (retrying cannot help).
	sess := NewSession((&tracker{addr: other.addr}).dial, f.config())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := sess.Run(ctx); !errors.As(err, &hk) {
		t.Fatalf("Session.Run: %v", err)
	}
}

func TestUnknownKeyRefused(t *testing.T) {
	f := newFixture(t)
	stranger, err := LoadOrCreateKey(filepath.Join(t.TempDir(), "id"))
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", f.agent.addr)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Dial(context.Background(), conn, ClientConfig{Signer: stranger, KnownHostsFile: f.knownHosts})
	if err == nil || !strings.Contains(err.Error(), "refused this machine's key") {
		t.Fatalf("stranger: %v", err)
	}
}

func TestKeyFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state", "dev")
	key := filepath.Join(dir, "id_ed25519")
	s1, err := LoadOrCreateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	s2, err := LoadOrCreateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	if string(s1.PublicKey().Marshal()) != string(s2.PublicKey().Marshal()) {
		t.Fatal("key not reused")
	}
	for path, mode := range map[string]os.FileMode{key: 0o600, dir: 0o700} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != mode {
			t.Errorf("%s: mode %v, want %v", path, fi.Mode().Perm(), mode)
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("temporary files left: %v", entries)
	}
	// known_hosts is 0600 too.
	f := newFixture(t)
	f.dial(t).Close()
	if fi, err := os.Stat(f.knownHosts); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("known_hosts: %v %v", fi.Mode(), err)
	}
	// A key others can read is refused, naming the fix.
	os.Chmod(key, 0o644)
	if _, err := LoadOrCreateKey(key); err == nil || !strings.Contains(err.Error(), "chmod 600 "+key) {
		t.Fatalf("0644 key: %v", err)
	}
	if err := os.WriteFile(key, []byte("junk"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadOrCreateKey(key); err == nil || !strings.Contains(err.Error(), key) {
		t.Fatalf("junk key: %v", err)
	}
}

func TestKeepaliveDetectsSilentPeer(t *testing.T) {
	// A peer that completes the handshake and then stops answering: a proxy that
	// stops forwarding after the handshake.
	f := newFixture(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var mu sync.Mutex
	frozen := false
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		up, err := net.Dial("tcp", f.agent.addr)
		if err != nil {
			return
		}
		defer up.Close()
		go func() {
			buf := make([]byte, 32<<10)
			for {
				n, err := up.Read(buf)
				if err != nil {
					return
				}
				mu.Lock()
				fz := frozen
				mu.Unlock()
				if !fz {
					c.Write(buf[:n])
				}
			}
		}()
		io.Copy(up, c)
	}()
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	cfg := f.config()
	cfg.KeepaliveInterval = 100 * time.Millisecond
	cfg.KeepaliveMax = 2
	c, err := Dial(context.Background(), conn, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	mu.Lock()
	frozen = true
	mu.Unlock()
	select {
	case <-c.Done():
		if !strings.Contains(c.Err().Error(), "keepalive") {
			t.Fatalf("reason: %v", c.Err())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("silent peer not detected")
	}
}

// An agent whose connections keep ending right away is dialled again after a wait that grows
// per short-lived connection, bounded; the first loss reconnects at once.
func TestLostBackoffGrowsBounded(t *testing.T) {
	want := []time.Duration{0, 0, backoffMin, 2 * backoffMin, 4 * backoffMin}
	for flaps, w := range want {
		if got := lostBackoff(flaps); got != w {
			t.Errorf("lostBackoff(%d) = %s, want %s", flaps, got, w)
		}
	}
	prev := time.Duration(0)
	for flaps := 1; flaps < 100; flaps++ {
		got := lostBackoff(flaps)
		if got < prev || got > flapMax {
			t.Fatalf("lostBackoff(%d) = %s after %s: not growing within %s", flaps, got, prev, flapMax)
		}
		prev = got
	}
	if prev != flapMax {
		t.Errorf("the wait stops growing at %s, want %s", prev, flapMax)
	}
}

// noDeadlineConn is a stream without deadlines, as a Kubernetes port-forward stream is.
type noDeadlineConn struct{ net.Conn }

func (noDeadlineConn) SetDeadline(time.Time) error      { return errors.New("no deadlines") }
func (noDeadlineConn) SetReadDeadline(time.Time) error  { return errors.New("no deadlines") }
func (noDeadlineConn) SetWriteDeadline(time.Time) error { return errors.New("no deadlines") }

// An agent that takes the connection and never answers ends the handshake after
// HandshakeTimeout even on a stream without deadlines (it hung for ever before).
func TestHandshakeTimeoutWithoutDeadlines(t *testing.T) {
	dir := t.TempDir()
	signer, err := LoadOrCreateKey(filepath.Join(dir, "id_ed25519"))
	if err != nil {
		t.Fatal(err)
	}
	client, server := net.Pipe()
	defer server.Close()
	go func() { _, _ = io.Copy(io.Discard, server) }() // reads the client's banner, answers nothing
	cfg := ClientConfig{Signer: signer, KnownHostsFile: filepath.Join(dir, "known_hosts"), HandshakeTimeout: 100 * time.Millisecond}
	c, err := Dial(context.Background(), noDeadlineConn{client}, cfg)
	if err == nil {
		c.Close()
		t.Fatal("the handshake with a silent peer succeeded")
	}
	if !strings.Contains(err.Error(), "no answer within 100ms") {
		t.Errorf("error %q does not say the handshake timed out", err)
	}
}

// testWriter sends a logger's lines to the test's log (shown when it fails or with -v),
// and drops them once the test has ended (a goroutine still stopping after a t.Fatal must
// not log into a finished test: that panics).
type testWriter struct {
	t    *testing.T
	mu   *sync.Mutex
	done *bool
}

func newTestWriter(t *testing.T) testWriter {
	w := testWriter{t: t, mu: new(sync.Mutex), done: new(bool)}
	t.Cleanup(func() {
		w.mu.Lock()
		*w.done = true
		w.mu.Unlock()
	})
	return w
}

func (w testWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !*w.done {
		w.t.Log(strings.TrimRight(string(b), "\n"))
	}
	return len(b), nil
}

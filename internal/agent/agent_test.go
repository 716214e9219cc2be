package agent

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"io"
	"log/slog"
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

	"golang.org/x/crypto/ssh"
)

type testServer struct {
	addr   string
	home   string
	cfg    Config
	cancel context.CancelFunc
	done   chan error
	logBuf *syncBuffer
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func newKey(t *testing.T) ssh.Signer {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func authorize(t *testing.T, home string, keys ...ssh.Signer) {
	t.Helper()
	var b []byte
	for _, k := range keys {
		b = append(b, ssh.MarshalAuthorizedKey(k.PublicKey())...)
	}
	if err := os.MkdirAll(filepath.Join(home, "ssh"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, "ssh", "authorized_keys"), b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func startServer(t *testing.T, home string, sync func(context.Context, io.ReadWriteCloser) error) *testServer {
	t.Helper()
	return startServerCfg(t, Config{
		HostKeyFile:        filepath.Join(home, "ssh", "host_ed25519"),
		AuthorizedKeysFile: filepath.Join(home, "ssh", "authorized_keys"),
		Sync:               sync,
	})
}

func startServerCfg(t *testing.T, cfg Config) *testServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lb := &syncBuffer{}
	cfg.Logger = slog.New(slog.NewTextHandler(lb, nil))
	ctx, cancel := context.WithCancel(context.Background())
	ts := &testServer{addr: ln.Addr().String(), home: filepath.Dir(filepath.Dir(cfg.HostKeyFile)), cfg: cfg, cancel: cancel, done: make(chan error, 1), logBuf: lb}
	go func() { ts.done <- Serve(ctx, ln, cfg) }()
	t.Cleanup(ts.stop)
	return ts
}

func (ts *testServer) stop() {
	ts.cancel()
	<-ts.done
	ts.done <- nil // stop is idempotent
}

func clientConfig(auth ...ssh.AuthMethod) *ssh.ClientConfig {
	return &ssh.ClientConfig{User: "dev", Auth: auth, HostKeyCallback: ssh.InsecureIgnoreHostKey(), Timeout: 10 * time.Second}
}

func dial(t *testing.T, ts *testServer, k ssh.Signer) *ssh.Client {
	t.Helper()
	c, err := ssh.Dial("tcp", ts.addr, clientConfig(ssh.PublicKeys(k)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestOnlyAuthorizedPublicKeys(t *testing.T) {
	home := t.TempDir()
	good, other := newKey(t), newKey(t)
	authorize(t, home, good)
	ts := startServer(t, home, nil)

	if _, err := ssh.Dial("tcp", ts.addr, clientConfig(ssh.PublicKeys(other))); err == nil {
		t.Fatal("unknown key accepted")
	}
	if _, err := ssh.Dial("tcp", ts.addr, clientConfig(ssh.Password("secret"))); err == nil {
		t.Fatal("password accepted")
	}
	ki := ssh.KeyboardInteractive(func(name, instruction string, questions []string, echos []bool) ([]string, error) {
		return make([]string, len(questions)), nil
	})
	if _, err := ssh.Dial("tcp", ts.addr, clientConfig(ki)); err == nil {
		t.Fatal("keyboard-interactive accepted")
	}
	// No method at all: only "none" is tried.
	_, err := ssh.Dial("tcp", ts.addr, clientConfig())
	if err == nil {
		t.Fatal("none accepted")
	}
	if !strings.Contains(err.Error(), "[none]") {
		t.Logf("none refused: %v", err)
	}
	// The server offers publickey only: a client holding just a password is not even
	// allowed to try it.
	_, err = ssh.Dial("tcp", ts.addr, clientConfig(ssh.Password("secret")))
	if err == nil || !strings.Contains(err.Error(), "attempted methods [none], no supported methods remain") {
		t.Fatalf("password: %v", err)
	}
	c := dial(t, ts, good)
	out := run(t, c, "echo ok")
	if out != "ok\n" {
		t.Fatalf("got %q", out)
	}
	// A key added later is accepted without a restart (authorized_keys is re-read).
	authorize(t, home, good, other)
	dial(t, ts, other).Close()
	if strings.Contains(ts.logBuf.String(), "PRIVATE KEY") {
		t.Fatal("key material in the log")
	}
}

func run(t *testing.T, c *ssh.Client, cmd string) string {
	t.Helper()
	s, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	out, err := s.CombinedOutput(cmd)
	if err != nil {
		t.Fatalf("%s: %v: %s", cmd, err, out)
	}
	return string(out)
}

func TestHostKeyCreatedOnceAndPrivate(t *testing.T) {
	home := t.TempDir()
	k := newKey(t)
	authorize(t, home, k)
	file := filepath.Join(home, "ssh", "host_ed25519")
	var keys []string
	for i := 0; i < 2; i++ {
		ts := startServer(t, home, nil)
		var got ssh.PublicKey
		cfg := clientConfig(ssh.PublicKeys(k))
		cfg.HostKeyCallback = func(_ string, _ net.Addr, key ssh.PublicKey) error { got = key; return nil }
		c, err := ssh.Dial("tcp", ts.addr, cfg)
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
		ts.stop()
		if got.Type() != ssh.KeyAlgoED25519 {
			t.Fatalf("host key type %s", got.Type())
		}
		keys = append(keys, string(got.Marshal()))
		fi, err := os.Stat(file)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Fatalf("host key mode %v", fi.Mode())
		}
	}
	if keys[0] != keys[1] {
		t.Fatal("host key changed across restarts")
	}
	if err := os.WriteFile(file, []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	err := Serve(context.Background(), ln, Config{HostKeyFile: file})
	if err == nil || !strings.Contains(err.Error(), file) {
		t.Fatalf("bad host key: %v", err)
	}
}

func TestDirectTCPIPAndReverseOnLoopbackOnly(t *testing.T) {
	home := t.TempDir()
	k := newKey(t)
	authorize(t, home, k)
	ts := startServer(t, home, nil)
	c := dial(t, ts, k)

	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello") }))
	defer web.Close()
	// Local forward: the agent dials the requested address.
	conn, err := c.Dial("tcp", web.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(conn, "GET / HTTP/1.0\r\n\r\n")
	b, _ := io.ReadAll(conn)
	conn.Close()
	if !strings.HasSuffix(string(b), "hello") {
		t.Fatalf("forward got %q", b)
	}
	// A closed port: the channel is refused with the reason.
	if _, err := c.Dial("tcp", "127.0.0.1:1"); err == nil || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Fatalf("dial closed port: %v", err)
	}

	// Reverse forward asked on 0.0.0.0: the agent listens on 127.0.0.1 only.
	ok, payload, err := c.SendRequest("tcpip-forward", true, ssh.Marshal(tcpipForwardMsg{Addr: "0.0.0.0", Port: 0}))
	if err != nil || !ok {
		t.Fatalf("tcpip-forward: %v %v", ok, err)
	}
	var rep tcpipForwardReply
	if err := ssh.Unmarshal(payload, &rep); err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(int(rep.Port))
	if !listening("127.0.0.1:" + port) {
		t.Fatal("reverse port not listening on 127.0.0.1")
	}
	for _, ip := range nonLoopbackIPs() {
		if listening(net.JoinHostPort(ip, port)) {
			t.Fatalf("reverse port reachable on %s", ip)
		}
	}
	// Through the x/crypto client's Listen: a connection inside comes back to us.
	ln, err := c.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		rc, err := ln.Accept()
		if err != nil {
			return
		}
		io.WriteString(rc, "from the client side")
		rc.Close()
	}()
	rc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(rc)
	rc.Close()
	if string(b) != "from the client side" {
		t.Fatalf("reverse got %q", b)
	}
	rport := ln.Addr().String()
	ln.Close() // cancel-tcpip-forward
	waitFor(t, func() bool { return !listening(rport) }, "reverse port closed after cancel")
	c.Close()
	waitFor(t, func() bool { return !listening("127.0.0.1:" + port) }, "reverse port closed with the connection")
}

func listening(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

func nonLoopbackIPs() []string {
	var out []string
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && !ipn.IP.IsLoopback() && ipn.IP.To4() != nil {
			out = append(out, ipn.IP.String())
		}
	}
	return out
}

func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestSubsystem(t *testing.T) {
	home := t.TempDir()
	k := newKey(t)
	authorize(t, home, k)
	// Without Sync: refused.
	ts := startServer(t, home, nil)
	c := dial(t, ts, k)
	s, _ := c.NewSession()
	if err := s.RequestSubsystem(SyncSubsystem); err == nil {
		t.Fatal("subsystem accepted without Sync")
	}
	s.Close()
	if !strings.Contains(ts.logBuf.String(), "without the sync engine") {
		t.Fatalf("log does not say why: %s", ts.logBuf.String())
	}
	ts.stop()

	// With Sync: the channel is handed over (an echo here).
	ts = startServer(t, home, func(ctx context.Context, ch io.ReadWriteCloser) error {
		_, err := io.Copy(ch, ch)
		return err
	})
	c = dial(t, ts, k)
	s, _ = c.NewSession()
	w, _ := s.StdinPipe()
	r, _ := s.StdoutPipe()
	if err := s.RequestSubsystem(SyncSubsystem); err != nil {
		t.Fatal(err)
	}
	io.WriteString(w, "ping")
	w.Close()
	b, _ := io.ReadAll(r)
	if string(b) != "ping" {
		t.Fatalf("echo got %q", b)
	}
	s.Close()
	s2, _ := c.NewSession()
	if err := s2.RequestSubsystem("sftp"); err == nil {
		t.Fatal("unknown subsystem accepted")
	}
}

func TestKeepaliveAnswered(t *testing.T) {
	home := t.TempDir()
	k := newKey(t)
	authorize(t, home, k)
	ts := startServer(t, home, nil)
	c := dial(t, ts, k)
	ok, _, err := c.SendRequest("keepalive@openssh.com", true, nil)
	if err != nil || !ok {
		t.Fatalf("keepalive: %v %v", ok, err)
	}
}

// TestServeEndsEverything: cancelling Serve closes connections, forwards and child
// processes, and leaves no goroutine behind.
func TestServeEndsEverything(t *testing.T) {
	base := runtime.NumGoroutine()
	home := t.TempDir()
	k := newKey(t)
	authorize(t, home, k)
	ts := startServer(t, home, nil)
	c := dial(t, ts, k)
	ln, err := c.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rport := ln.Addr().String()
	pidFile := filepath.Join(t.TempDir(), "pid")
	s, _ := c.NewSession()
	if err := s.Start("sleep 300 & echo $! > " + pidFile + "; wait"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { b, _ := os.ReadFile(pidFile); return len(bytes.TrimSpace(b)) > 0 }, "pid file")
	b, _ := os.ReadFile(pidFile)
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	ts.stop()
	if listening(ts.addr) || listening(rport) {
		t.Fatal("a port is still open after Serve returned")
	}
	waitFor(t, func() bool { return !alive(pid) }, "child killed")
	c.Close()
	waitFor(t, func() bool { return runtime.NumGoroutine() <= base+1 }, "goroutines back to baseline")
}

// alive reports whether pid runs (a zombie counts as gone).
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

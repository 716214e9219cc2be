package devssh

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/devtool/devtool/internal/agent"
)

// testAgent is an agent.Serve running in this process on a loopback port.
type testAgent struct {
	t      *testing.T
	home   string
	addr   string
	cancel context.CancelFunc
	done   chan struct{}
}

func startAgent(t *testing.T, home, addr string, signer ssh.Signer) *testAgent {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(home, "ssh"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, "ssh", "authorized_keys"), ssh.MarshalAuthorizedKey(signer.PublicKey()), 0o600); err != nil {
		t.Fatal(err)
	}
	var ln net.Listener
	var err error
	deadline := time.Now().Add(5 * time.Second)
	for {
		ln, err = net.Listen("tcp", addr)
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	a := &testAgent{t: t, home: home, addr: ln.Addr().String(), cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(a.done)
		err := agent.Serve(ctx, ln, agent.Config{
			HostKeyFile:        filepath.Join(home, "ssh", "host_ed25519"),
			AuthorizedKeysFile: filepath.Join(home, "ssh", "authorized_keys"),
			Logger:             slog.New(slog.DiscardHandler),
			Sync: func(ctx context.Context, ch io.ReadWriteCloser) error {
				_, err := io.Copy(ch, ch)
				return err
			},
		})
		if err != nil {
			t.Error(err)
		}
	}()
	t.Cleanup(a.stop)
	return a
}

func (a *testAgent) stop() {
	a.cancel()
	<-a.done
}

// tracker dials the agent and remembers the connections so a test can cut them.
type tracker struct {
	mu      sync.Mutex
	addr    string
	conns   []net.Conn
	dials   int
	refused bool
}

func (tr *tracker) dial(ctx context.Context) (net.Conn, error) {
	tr.mu.Lock()
	addr := tr.addr
	tr.dials++
	refused := tr.refused
	tr.mu.Unlock()
	if refused {
		return nil, errors.New("tracker: dials refused (the test cut the network)")
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	tr.mu.Lock()
	tr.conns = append(tr.conns, c)
	tr.mu.Unlock()
	return c, nil
}

func (tr *tracker) dialCount() int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.dials
}

// refuse makes dials fail (on) or work again (off).
func (tr *tracker) refuse(on bool) {
	tr.mu.Lock()
	tr.refused = on
	tr.mu.Unlock()
}

func (tr *tracker) cut() {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for _, c := range tr.conns {
		c.Close()
	}
	tr.conns = nil
}

type fixture struct {
	signer     ssh.Signer
	knownHosts string
	agent      *testAgent
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	dir := t.TempDir()
	s, err := LoadOrCreateKey(filepath.Join(dir, "state", "id_ed25519"))
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{signer: s, knownHosts: filepath.Join(dir, "state", "known_hosts")}
	f.agent = startAgent(t, filepath.Join(dir, "home"), "127.0.0.1:0", s)
	return f
}

func (f *fixture) config() ClientConfig {
	return ClientConfig{Signer: f.signer, KnownHostsFile: f.knownHosts}
}

func (f *fixture) dial(t *testing.T) *Client {
	t.Helper()
	conn, err := net.Dial("tcp", f.agent.addr)
	if err != nil {
		t.Fatal(err)
	}
	c, err := Dial(context.Background(), conn, f.config())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
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

func listening(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
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

// goroutinesSettle waits until the goroutine count is back to base (a small slack for
// the runtime's own).
func goroutinesSettle(t *testing.T, base int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > base {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			n := runtime.Stack(buf, true)
			t.Fatalf("goroutines: %d, baseline %d\n%s", runtime.NumGoroutine(), base, buf[:n])
		}
		time.Sleep(20 * time.Millisecond)
	}
}

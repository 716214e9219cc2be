package dev

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/sync/errgroup"

	"github.com/devtool/devtool/internal/devssh"
)

// The dev command of TestDevCommandStopsBeforeTheConnectionCloses is this test binary run again
// with these variables set (TestMain): a server on the address that, on SIGTERM or SIGHUP, writes
// the signal's name to the marker file and takes a moment to finish before it closes its port.
const (
	helperAddrEnv   = "DEVTOOL_TEST_DEV_COMMAND_ADDR"
	helperMarkerEnv = "DEVTOOL_TEST_DEV_COMMAND_MARKER"
)

func TestMain(m *testing.M) {
	if addr := os.Getenv(helperAddrEnv); addr != "" {
		os.Exit(devCommandHelper(addr, os.Getenv(helperMarkerEnv)))
	}
	os.Exit(m.Run())
}

func devCommandHelper(addr, marker string) int {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGHUP)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	s := <-sig
	if err := os.WriteFile(marker, []byte(s.String()), 0o644); err != nil {
		return 1
	}
	time.Sleep(300 * time.Millisecond) // a server finishing its requests
	ln.Close()
	return 0
}

// slowCloseRelay stands for the port-forward between up and the agent: bytes pass at once both
// ways, but the agent learns that up closed the connection only after delay (through a
// Kubernetes port-forward, about a second).
type slowCloseRelay struct {
	agent string
	delay time.Duration
	wg    sync.WaitGroup
}

func (r *slowCloseRelay) dial(ctx context.Context) (net.Conn, error) {
	var d net.Dialer
	up, err := d.DialContext(ctx, "tcp", r.agent)
	if err != nil {
		return nil, err
	}
	mine, theirs := net.Pipe()
	r.wg.Add(2)
	go func() {
		defer r.wg.Done()
		_, _ = io.Copy(up, theirs) // ends when up's side of the pipe is closed
		time.Sleep(r.delay)
		up.Close()
	}()
	go func() {
		defer r.wg.Done()
		_, _ = io.Copy(theirs, up)
		theirs.Close()
	}()
	return mine, nil
}

// TestDevCommandStopsBeforeTheConnectionCloses: when up ends, the dev command is stopped through
// its SSH session (SIGTERM; a terminal's command is released, i.e. hung up) and up's connection
// stays open until it has exited, so its port is free the moment up returns, although the agent
// learns of the closed connection only a second later. Before, the connection closed first: the
// signal was lost and the port stayed taken until the agent noticed (an up started at once failed
// with "address already in use"). The real agent, over real SSH.
func TestDevCommandStopsBeforeTheConnectionCloses(t *testing.T) {
	for _, tc := range []struct {
		name   string
		tty    bool
		signal string
	}{
		{"exec", false, syscall.SIGTERM.String()},
		{"terminal", true, syscall.SIGHUP.String()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			home := filepath.Join(dir, "home")
			signer, err := devssh.LoadOrCreateKey(filepath.Join(dir, "state", "id_ed25519"))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(filepath.Join(home, "ssh"), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(home, "ssh", "authorized_keys"), ssh.MarshalAuthorizedKey(signer.PublicKey()), 0o600); err != nil {
				t.Fatal(err)
			}
			relay := &slowCloseRelay{agent: startAgent(t, home), delay: time.Second}
			t.Cleanup(relay.wg.Wait)

			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			addr := ln.Addr().String()
			ln.Close()
			marker := filepath.Join(dir, "stopped")
			exe, err := os.Executable()
			if err != nil {
				t.Fatal(err)
			}
			o := SessionOptions{TTY: tc.tty, Command: []string{"env", helperAddrEnv + "=" + addr, helperMarkerEnv + "=" + marker, exe}}

			sess := devssh.NewSession(relay.dial, devssh.ClientConfig{Signer: signer, KnownHostsFile: filepath.Join(dir, "state", "known_hosts")})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			g, gctx := errgroup.WithContext(ctx)
			stopped := make(chan struct{})
			clients := make(chan *devssh.Client, 1)
			g.Go(func() error { return sessionUntil(gctx, sess, stopped, commandStopWait) })
			g.Go(func() error {
				c, err := sess.WaitClient(gctx)
				if err == nil {
					clients <- c
				}
				return nil
			})
			var mu sync.Mutex
			var notices []string
			g.Go(func() error {
				defer close(stopped)
				return (&Up{}).devCommand(gctx, o, clients, func(k NoticeKind, format string, args ...any) {
					mu.Lock()
					notices = append(notices, fmt.Sprintf(format, args...))
					mu.Unlock()
				})
			})

			// The dev command serves its port.
			deadline := time.Now().Add(30 * time.Second)
			for {
				c, err := net.DialTimeout("tcp", addr, time.Second)
				if err == nil {
					c.Close()
					break
				}
				if time.Now().After(deadline) {
					cancel()
					_ = g.Wait()
					t.Fatalf("the dev command never listened on %s: %v (notices %q)", addr, err, notices)
				}
				time.Sleep(20 * time.Millisecond)
			}

			cancel() // up ends (Ctrl-C)
			if err := g.Wait(); err != nil {
				t.Fatalf("session: %v", err)
			}
			// The port is free on the first try, as a new up needs it.
			again, err := net.Listen("tcp", addr)
			if err != nil {
				t.Fatalf("the dev command's port after up returned: %v (the dev command was not stopped before the connection closed)", err)
			}
			again.Close()
			got, err := os.ReadFile(marker)
			if err != nil || string(got) != tc.signal {
				t.Errorf("the dev command was stopped by %q (%v), want %q through its SSH session", got, err, tc.signal)
			}
		})
	}
}

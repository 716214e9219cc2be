package filesync

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// pair runs a Client and Serve over net.Pipe.
type pair struct {
	t         *testing.T
	local     string
	remote    string
	clientDir string
	serverDir string
	c         *Client
	cancel    context.CancelFunc
	done      chan error
	sdone     chan error
	// sent and received count the bytes the client wrote to and read from its streams.
	sent, received atomic.Int64
}

// countingConn counts a client stream's bytes into its pair.
type countingConn struct {
	net.Conn
	p *pair
}

func (c countingConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.p.received.Add(int64(n))
	return n, err
}

func (c countingConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.p.sent.Add(int64(n))
	return n, err
}

func testLogger(t *testing.T) *slog.Logger {
	if os.Getenv("FILESYNC_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

func newPair(t *testing.T, opts ClientOptions) *pair {
	t.Helper()
	base := t.TempDir()
	p := &pair{t: t, local: filepath.Join(base, "local"), remote: filepath.Join(base, "remote"),
		clientDir: filepath.Join(base, "cstate"), serverDir: filepath.Join(base, "sstate")}
	must(t, os.MkdirAll(p.local, 0o755))
	must(t, os.MkdirAll(p.remote, 0o755))
	return p
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// start connects a (new or given) client to a fresh server session.
func (p *pair) start(opts ClientOptions) {
	p.t.Helper()
	opts.Folders = []Folder{{Local: p.local, Remote: p.remote}}
	opts.StateDir = p.clientDir
	if opts.Logger == nil {
		opts.Logger = testLogger(p.t).With("side", "client")
	}
	c, err := NewClient(opts)
	must(p.t, err)
	p.c = c
	p.connect()
}

func (p *pair) connect() {
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	p.done = make(chan error, 1)
	p.sdone = make(chan error, 1)
	var servers sync.WaitGroup
	open := func() (io.ReadWriteCloser, error) {
		a, b := net.Pipe()
		servers.Add(1)
		go func() {
			defer servers.Done()
			_ = Serve(ctx, b, ServerOptions{StateDir: p.serverDir, Logger: testLogger(p.t).With("side", "server")})
		}()
		return countingConn{a, p}, nil
	}
	go func() {
		err := p.c.Run(ctx, open)
		servers.Wait()
		p.sdone <- nil
		p.done <- err
	}()
}

// stop ends both ends and waits for them.
func (p *pair) stop() {
	p.t.Helper()
	p.cancel()
	for _, ch := range []chan error{p.done, p.sdone} {
		select {
		case <-ch:
		case <-time.After(10 * time.Second):
			buf := make([]byte, 1<<20)
			n := runtime.Stack(buf, true)
			p.t.Fatalf("sync did not stop\n%s", buf[:n])
		}
	}
}

// waitEqual waits until both trees hold the same content and the client
// has nothing pending.
func (p *pair) waitEqual(timeout time.Duration) {
	p.t.Helper()
	deadline := time.Now().Add(timeout)
	var diff string
	for time.Now().Before(deadline) {
		a, b := snapshotDir(p.t, p.local), snapshotDir(p.t, p.remote)
		diff = diffSnap(a, b)
		st := p.c.Status()
		if diff == "" && st.Synced && st.Folders[0].Pending == 0 {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	p.t.Fatalf("trees differ after %v: %s\nstatus %+v", timeout, diff, p.c.Status())
}

// snapshotDir describes a tree: path -> "f:<exec>:<content>", "d", "l:<target>".
func snapshotDir(t testing.TB, root string) map[string]string {
	m := map[string]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) {
				return nil
			}
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if rel == "." {
			return nil
		}
		rel = filepath.ToSlash(rel)
		if d.Name() == ".git" {
			return filepath.SkipDir
		}
		if strings.HasPrefix(d.Name(), tmpPrefix) {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return nil
		}
		switch {
		case fi.IsDir():
			m[rel] = "d"
		case fi.Mode()&fs.ModeSymlink != 0:
			tg, _ := os.Readlink(path)
			m[rel] = "l:" + tg
		default:
			b, err := os.ReadFile(path)
			if err != nil {
				return nil
			}
			m[rel] = fmt.Sprintf("f:%v:%s", fi.Mode()&0o100 != 0, b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func diffSnap(a, b map[string]string) string {
	var out []string
	for k, v := range a {
		if w, ok := b[k]; !ok {
			out = append(out, "only local: "+k)
		} else if v != w {
			out = append(out, fmt.Sprintf("differs: %s (%.40q vs %.40q)", k, v, w))
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			out = append(out, "only remote: "+k)
		}
	}
	sort.Strings(out)
	if len(out) > 10 {
		out = append(out[:10], fmt.Sprintf("... %d more", len(out)-10))
	}
	return strings.Join(out, "; ")
}

func write(t testing.TB, root, rel, content string) {
	t.Helper()
	p := filepath.Join(root, filepath.FromSlash(rel))
	must(t, os.MkdirAll(filepath.Dir(p), 0o755))
	must(t, os.WriteFile(p, []byte(content), 0o644))
}

// Package compat checks this release against the previous one (testrelease.Previous),
// built from the git history: the sync protocol and the agent's SSH server keep working
// both ways (a new CLI with the previous release's agent, the previous release's CLI with
// the new agent), over real SSH on the loopback, without a cluster.
package compat

import (
	"bufio"
	"bytes"
	"context"
	_ "embed"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/devtool/devtool/internal/agentversion"
	"github.com/devtool/devtool/internal/devssh"
	"github.com/devtool/devtool/internal/filesync"
	"github.com/devtool/devtool/internal/testrelease"
)

//go:embed testdata/synccli/main.go
var syncCLISource string

// previous builds the previous release's agent and sync client (cached, see testrelease).
func previous(t *testing.T) *testrelease.Release {
	return testrelease.Build(t, testrelease.Previous,
		testrelease.Target{Name: "devtool-agent", Package: "./cmd/devtool-agent", Linux: true},
		testrelease.Target{Name: "synccli", Package: "./cmd/devtool-compat-synccli",
			Files: map[string]string{"cmd/devtool-compat-synccli/main.go": syncCLISource}})
}

// currentAgent builds this tree's agent.
func currentAgent(t *testing.T) string {
	out := filepath.Join(t.TempDir(), "devtool-agent")
	cmd := exec.Command("go", "build", "-o", out, "./cmd/devtool-agent")
	cmd.Dir = filepath.Join("..", "..")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the agent: %v\n%s", err, b)
	}
	return out
}

// agentProc is an agent binary serving on the loopback, its home in a temporary folder.
type agentProc struct {
	addr, home string
	cmd        *exec.Cmd
	log        bytes.Buffer
}

func startAgent(t *testing.T, bin string, key ssh.PublicKey) *agentProc {
	t.Helper()
	a := &agentProc{home: filepath.Join(t.TempDir(), "home")}
	must(t, os.MkdirAll(filepath.Join(a.home, "ssh"), 0o700))
	must(t, os.WriteFile(filepath.Join(a.home, "ssh", "authorized_keys"), ssh.MarshalAuthorizedKey(key), 0o600))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	a.addr = ln.Addr().String()
	ln.Close()
	a.cmd = exec.Command(bin, "serve", "--home", a.home, "--addr", a.addr)
	a.cmd.Stderr = &syncWriter{w: &a.log}
	must(t, a.cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- a.cmd.Wait() }()
	t.Cleanup(func() {
		_ = a.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			_ = a.cmd.Process.Kill()
			<-exited
			t.Errorf("the agent did not end on SIGTERM")
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.Dial("tcp", a.addr)
		if err == nil {
			c.Close()
			return a
		}
		if time.Now().After(deadline) {
			t.Fatalf("agent %s not listening: %v", bin, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

func (a *agentProc) logText() string {
	b, _ := os.ReadFile(filepath.Join(a.home, "agent.log"))
	return string(b)
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func write(t *testing.T, root, rel, content string, mode os.FileMode) {
	t.Helper()
	p := filepath.Join(root, filepath.FromSlash(rel))
	must(t, os.MkdirAll(filepath.Dir(p), 0o755))
	must(t, os.WriteFile(p, []byte(content), mode))
}

// waitFile waits until the file at root/rel holds content.
func waitFile(t *testing.T, root, rel, content string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(rel)))
		if err == nil && string(b) == content {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s/%s: %q (%v), want %q", root, rel, b, err, content)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// scenario is what each pairing must do: the first synchronization both ways (an
// executable kept executable), then an edit on each side after it.
type scenario struct {
	local, remote string
}

func newScenario(t *testing.T) scenario {
	dir := t.TempDir()
	s := scenario{local: filepath.Join(dir, "local"), remote: filepath.Join(dir, "remote")}
	write(t, s.local, "a.txt", "local a", 0o644)
	write(t, s.local, "sub/run.sh", "#!/bin/sh\necho hi\n", 0o755)
	write(t, s.remote, "from-agent.txt", "remote", 0o644)
	return s
}

func (s scenario) checkFirst(t *testing.T) {
	t.Helper()
	waitFile(t, s.remote, "a.txt", "local a")
	waitFile(t, s.remote, "sub/run.sh", "#!/bin/sh\necho hi\n")
	waitFile(t, s.local, "from-agent.txt", "remote")
	if fi, err := os.Stat(filepath.Join(s.remote, "sub/run.sh")); err != nil || fi.Mode().Perm()&0o100 == 0 {
		t.Errorf("run.sh on the agent's side: %v %v (want executable)", fi.Mode(), err)
	}
}

func (s scenario) checkEdits(t *testing.T) {
	t.Helper()
	write(t, s.local, "a.txt", "local edit", 0o644)
	waitFile(t, s.remote, "a.txt", "local edit")
	write(t, s.remote, "new-remote.txt", "made on the agent's side", 0o644)
	waitFile(t, s.local, "new-remote.txt", "made on the agent's side")
}

// newClient runs this release's sync client over SSH to addr; it returns the agent's
// banner and the client's log.
func newClient(t *testing.T, signer ssh.Signer, addr string, s scenario) (agentversion.Info, *bytes.Buffer) {
	t.Helper()
	state := t.TempDir()
	conn, err := net.Dial("tcp", addr)
	must(t, err)
	c, err := devssh.Dial(context.Background(), conn, devssh.ClientConfig{Signer: signer, KnownHostsFile: filepath.Join(state, "known_hosts")})
	must(t, err)
	t.Cleanup(func() { c.Close() })
	info, err := agentversion.Parse(string(c.SSH().ServerVersion()))
	must(t, err)
	var logBuf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&syncWriter{w: &logBuf}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	sc, err := filesync.NewClient(filesync.ClientOptions{Folders: []filesync.Folder{{Local: s.local, Remote: s.remote}}, StateDir: filepath.Join(state, "sync"), Logger: logger})
	must(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- sc.Run(ctx, func() (io.ReadWriteCloser, error) { return c.OpenSubsystem(devssh.SyncSubsystem) })
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Error("the sync client did not stop")
		}
	})
	select {
	case <-sc.Synced():
	case err := <-done:
		t.Fatalf("sync ended: %v\n%s", err, logBuf.String())
	case <-time.After(2 * time.Minute):
		t.Fatalf("no first synchronization: %+v\n%s", sc.Status(), logBuf.String())
	}
	return info, &logBuf
}

// TestPreviousRelease syncs over real SSH in every pairing of this release and the
// previous one (built from the git history): the protocol is negotiated down to the
// previous release's, and files travel both ways.
func TestPreviousRelease(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the agent runs on Linux")
	}
	if testing.Short() {
		t.Skip("builds the previous release")
	}
	rel := previous(t)
	cur := currentAgent(t)
	signerDir := t.TempDir()
	signer, err := devssh.LoadOrCreateKey(filepath.Join(signerDir, "id_ed25519"))
	must(t, err)

	t.Run("new CLI, previous agent", func(t *testing.T) {
		a := startAgent(t, rel.Bin("devtool-agent"), signer.PublicKey())
		s := newScenario(t)
		info, log := newClient(t, signer, a.addr, s)
		if info.Banner || info.Protocol != 2 {
			t.Errorf("the previous agent's banner read as %+v", info)
		}
		s.checkFirst(t)
		s.checkEdits(t)
		if !strings.Contains(log.String(), "protocol=2") {
			t.Errorf("the client did not settle on protocol 2:\n%s", log.String())
		}
	})

	t.Run("previous CLI, new agent", func(t *testing.T) {
		a := startAgent(t, cur, signer.PublicKey())
		s := newScenario(t)
		state := t.TempDir()
		must(t, copyFile(filepath.Join(signerDir, "id_ed25519"), filepath.Join(state, "id_ed25519")))
		cmd := exec.Command(rel.Bin("synccli"), "-addr", a.addr, "-dir", state, "-local", s.local, "-remote", s.remote)
		stdin, err := cmd.StdinPipe()
		must(t, err)
		stdout, err := cmd.StdoutPipe()
		must(t, err)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		must(t, cmd.Start())
		lines := make(chan string, 10)
		go func() {
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				lines <- sc.Text()
			}
			close(lines)
		}()
		var banner string
		deadline := time.After(2 * time.Minute)
	wait:
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					_ = cmd.Wait()
					t.Fatalf("the previous release's client ended: %s", stderr.String())
				}
				if b, ok := strings.CutPrefix(l, "banner "); ok {
					banner = b
				}
				if l == "synced" {
					break wait
				}
			case <-deadline:
				_ = cmd.Process.Kill()
				t.Fatalf("the previous release's client did not sync: %s", stderr.String())
			}
		}
		if i, err := agentversion.Parse(banner); err != nil || !i.Banner || i.Protocol != filesync.ProtocolVersion {
			t.Errorf("the new agent's banner %q: %+v %v", banner, i, err)
		}
		s.checkFirst(t)
		s.checkEdits(t)
		stdin.Close()
		if err := cmd.Wait(); err != nil {
			t.Errorf("the previous release's client: %v\n%s", err, stderr.String())
		}
		if log := a.logText(); !strings.Contains(log, "sync session started") || !strings.Contains(log, "protocol=2") {
			t.Errorf("the new agent did not serve protocol 2:\n%s", log)
		}
	})

	t.Run("new CLI, new agent", func(t *testing.T) {
		a := startAgent(t, cur, signer.PublicKey())
		s := newScenario(t)
		info, log := newClient(t, signer, a.addr, s)
		if !info.Banner || info.Protocol != filesync.ProtocolVersion {
			t.Errorf("banner %+v", info)
		}
		s.checkFirst(t)
		s.checkEdits(t)
		if want := fmt.Sprintf("protocol=%d", filesync.ProtocolVersion); !strings.Contains(log.String(), want) {
			t.Errorf("not %s:\n%s", want, log.String())
		}
	})
}

func copyFile(from, to string) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, b, 0o600)
}

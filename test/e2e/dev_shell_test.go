//go:build integration

package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/devtool/devtool/internal/testcluster"
)

// cutProxy is a TCP proxy in front of the API server that a test can cut: every connection
// through it is closed and new ones are refused until it is restored.
type cutProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	cut    bool
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
	served int
}

func startCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			if p.cut {
				p.mu.Unlock()
				c.Close()
				continue
			}
			p.conns[c] = struct{}{}
			p.served++
			p.mu.Unlock()
			p.wg.Add(1)
			go func() {
				defer p.wg.Done()
				p.pipe(c)
			}()
		}
	}()
	t.Cleanup(p.close)
	return p
}

func (p *cutProxy) pipe(c net.Conn) {
	defer func() {
		p.mu.Lock()
		delete(p.conns, c)
		p.mu.Unlock()
		c.Close()
	}()
	up, err := net.DialTimeout("tcp", p.target, 10*time.Second)
	if err != nil {
		return
	}
	p.mu.Lock()
	if p.cut {
		p.mu.Unlock()
		up.Close()
		return
	}
	p.conns[up] = struct{}{}
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.conns, up)
		p.mu.Unlock()
		up.Close()
	}()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, up); done <- struct{}{} }()
	<-done
}

// setCut cuts every connection and refuses new ones (on), or lets them through again (off).
func (p *cutProxy) setCut(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = on
	if on {
		for c := range p.conns {
			c.Close()
		}
	}
}

func (p *cutProxy) close() {
	p.ln.Close()
	p.setCut(true)
	p.wg.Wait()
}

// proxiedKubeconfig writes a copy of kubeconfig whose current cluster is reached through addr
// (the certificate is still checked against the API server's own name).
func proxiedKubeconfig(t *testing.T, kubeconfig, addr string) (path, target string) {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	ctx := cfg.Contexts[cfg.CurrentContext]
	if ctx == nil {
		t.Fatalf("%s: no current context", kubeconfig)
	}
	cl := cfg.Clusters[ctx.Cluster]
	u, err := url.Parse(cl.Server)
	if err != nil {
		t.Fatal(err)
	}
	target = u.Host
	if cl.TLSServerName == "" {
		cl.TLSServerName = u.Hostname()
	}
	u.Host = addr
	cl.Server = u.String()
	path = filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path, target
}

// ptyProc is devtool running on a terminal (a real PTY), as a developer runs up.
type ptyProc struct {
	cmd  *exec.Cmd
	ptmx *os.File
	mu   sync.Mutex
	out  bytes.Buffer
	done chan error
}

func (u *user) startPTY(t *testing.T, env []string, args ...string) *ptyProc {
	t.Helper()
	cmd := exec.Command(devtoolBin, args...)
	cmd.Dir = u.dir
	cmd.Env = append(append([]string{
		"HOME=" + u.home, "DEVTOOL_HOME=" + u.home, "KUBECONFIG=" + u.c.Kubeconfig,
		"PATH=" + os.Getenv("PATH"), "NO_COLOR=1", "TERM=xterm",
	}, u.extra...), env...)
	ptmx, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 40, Cols: 160})
	if err != nil {
		t.Fatal(err)
	}
	p := &ptyProc{cmd: cmd, ptmx: ptmx, done: make(chan error, 1)}
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		buf := make([]byte, 4096)
		for {
			n, err := ptmx.Read(buf)
			p.mu.Lock()
			p.out.Write(buf[:n])
			p.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	go func() {
		err := cmd.Wait()
		p.done <- err
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		ptmx.Close()
		<-copied
		t.Logf("$ devtool %s (on a terminal)\n%s", strings.Join(args, " "), p.output())
	})
	return p
}

func (p *ptyProc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// typeLine types s and Enter (a terminal in raw mode sends CR).
func (p *ptyProc) typeLine(t *testing.T, s string) {
	t.Helper()
	if _, err := io.WriteString(p.ptmx, s+"\r"); err != nil {
		t.Fatal(err)
	}
}

// wait waits until the output matches re and returns its first group (or the match).
func (p *ptyProc) wait(t *testing.T, re string, timeout time.Duration) string {
	t.Helper()
	rx := regexp.MustCompile(re)
	deadline := time.Now().Add(timeout)
	for {
		if m := rx.FindStringSubmatch(p.output()); m != nil {
			if len(m) > 1 {
				return m[1]
			}
			return m[0]
		}
		select {
		case err := <-p.done:
			p.done <- err
			if m := rx.FindStringSubmatch(p.output()); m != nil {
				continue
			}
			t.Fatalf("devtool ended (%v) before output matching %q:\n%s", err, re, p.output())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no output matching %q within %s:\n%s", re, timeout, p.output())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// shellFixture is a folder whose devtool.yml develops a sleeping busybox service "shell" with
// ./src synced to /src; the dev command is a login shell (none given).
func shellFixture(u *user) {
	u.write("compose.yml", `services:
  shell:
    image: docker.io/library/busybox:local
    command: ["sh", "-c", "trap 'exit 0' TERM; while :; do sleep 1; done"]
    stop_grace_period: 1s
`)
	u.write("devtool.yml", `name: shellcut
deploy:
  compose: compose.yml
dev:
  shell:
    workdir: /src
    sync:
      - src:/src
`)
	u.write("src/hello.txt", "hello\n")
}

// TestDevUpShellSurvivesCut: up on a real terminal, its API server reached through a proxy the
// test cuts. The login shell in the dev container runs a background job counting; while the
// connection is cut (up says so) the job goes on and a command typed then is held; once the
// proxy lets through again, up reconnects and attaches to the same shell (same PID), the typed
// command runs there, the sync goes on, and nothing from client-go is printed over the shell.
// The shell's exit ends up with its code.
func TestDevUpShellSurvivesCut(t *testing.T) {
	c := testcluster.Connect(t)
	ns := c.Namespace(t)
	u := newUser(t, c)
	shellFixture(u)
	withAgent(t, u)
	u.mustRun("deploy", "--namespace", ns, "--wait", "--timeout", "4m")

	proxy := startCutProxy(t, "")
	kc, target := proxiedKubeconfig(t, c.Kubeconfig, proxy.ln.Addr().String())
	proxy.target = target
	up := u.startPTY(t, []string{"KUBECONFIG=" + kc}, "up", "shell", "--namespace", ns)
	up.wait(t, `ready: `, 4*time.Minute)

	up.typeLine(t, "echo PID=$$")
	pid := up.wait(t, `PID=(\d+)`, time.Minute)
	up.typeLine(t, "(i=0; while :; do i=$((i+1)); echo $i > /tmp/counter; sleep 0.2; done) >/dev/null 2>&1 &")
	up.typeLine(t, "echo JOB=$!")
	up.wait(t, `JOB=(\d+)`, time.Minute)
	counter := func() int {
		out, _, err := u.run("exec", "shell", "--namespace", ns, "--", "cat", "/tmp/counter")
		if err != nil {
			return -1
		}
		n, _ := strconv.Atoi(strings.TrimSpace(out))
		return n
	}
	eventually(t, time.Minute, "the background job counts", func() error {
		if counter() < 1 {
			return fmt.Errorf("no count yet")
		}
		return nil
	})

	proxy.setCut(true)
	up.wait(t, `connection lost`, 2*time.Minute)
	atCut := counter() // devtool exec goes to the API server directly
	up.typeLine(t, "echo TYPED=$$ > /tmp/typed; echo AFTER=$$")
	eventually(t, time.Minute, "the background job going on during the cut", func() error {
		if n := counter(); n <= atCut+5 {
			return fmt.Errorf("counter %d, %d at the cut", n, atCut)
		}
		return nil
	})
	if out, _, err := u.run("exec", "shell", "--namespace", ns, "--", "cat", "/tmp/typed"); err == nil {
		t.Fatalf("the command typed during the cut ran before the reconnect: %q", out)
	}
	proxy.setCut(false)

	if got := up.wait(t, `AFTER=(\d+)`, 3*time.Minute); got != pid {
		t.Errorf("after the cut the shell is pid %s, before it was %s", got, pid)
	}
	if !strings.Contains(up.output(), "back in the dev command (pid "+pid+")") {
		t.Errorf("up did not say it is back in the same dev command")
	}
	if out, _, err := u.run("exec", "shell", "--namespace", ns, "--", "cat", "/tmp/typed"); err != nil || strings.TrimSpace(out) != "TYPED="+pid {
		t.Errorf("the command typed during the cut: %q %v", out, err)
	}
	// The sync goes on over the new connection.
	u.write("src/hello.txt", "after the cut\n")
	eventually(t, time.Minute, "a local edit after the reconnect", func() error {
		out, _, err := u.run("exec", "shell", "--namespace", ns, "--", "cat", "/src/hello.txt")
		if err != nil || out != "after the cut\n" {
			return fmt.Errorf("%q %v", out, err)
		}
		return nil
	})
	// client-go's complaints about the broken port-forward went to up's log, not the terminal.
	if m := regexp.MustCompile(`(?m)^\s*[EWI]\d{4} \d\d:\d\d|Unhandled Error|portforward\.go`).FindString(up.output()); m != "" {
		t.Errorf("client-go printed over the dev shell: %q", m)
	}

	up.typeLine(t, "kill %1; exit 3")
	select {
	case err := <-up.done:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 3 {
			t.Errorf("up after the shell's exit 3: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatalf("up did not end with the shell")
	}
	u.mustRun("down", "shell", "--namespace", ns, "--volumes")
}

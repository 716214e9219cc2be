package devssh

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

func TestExecStreamsExitCodeStdinEnvDir(t *testing.T) {
	f := newFixture(t)
	c := f.dial(t)
	ctx := context.Background()
	var out, errb bytes.Buffer
	dir := t.TempDir()
	code, err := c.Exec(ctx, ExecOptions{
		Command: []string{"sh", "-c", `echo out; echo err >&2; cat; echo "$GREETING"; pwd; exit 7`},
		Stdin:   strings.NewReader("from stdin\n"),
		Env:     map[string]string{"GREETING": "it's me"},
		Dir:     dir,
		Stdout:  &out, Stderr: &errb,
	})
	if err != nil {
		t.Fatal(err)
	}
	if code != 7 {
		t.Fatalf("exit code %d", code)
	}
	if want := "out\nfrom stdin\nit's me\n" + dir + "\n"; out.String() != want {
		t.Fatalf("stdout %q, want %q", out.String(), want)
	}
	if errb.String() != "err\n" {
		t.Fatalf("stderr %q", errb.String())
	}
	// No stdin: the command sees EOF at once.
	out.Reset()
	code, err = c.Exec(ctx, ExecOptions{Command: []string{"wc", "-c"}, Stdout: &out})
	if err != nil || code != 0 || strings.TrimSpace(out.String()) != "0" {
		t.Fatalf("wc: %d %v %q", code, err, out.String())
	}
	// The container's environment is inherited.
	t.Setenv("DEVTOOL_TEST_INHERITED", "yes") // the in-process agent is "the container"
	out.Reset()
	if _, err := c.Exec(ctx, ExecOptions{Command: []string{"sh", "-c", "echo $DEVTOOL_TEST_INHERITED"}, Stdout: &out}); err != nil || out.String() != "yes\n" {
		t.Fatalf("inherited env: %v %q", err, out.String())
	}
	// A command that does not exist: 127 from sh.
	code, _ = c.Exec(ctx, ExecOptions{Command: []string{"no-such-command-devtool"}})
	if code != 127 {
		t.Fatalf("missing command: %d", code)
	}
	// A command killed by a signal: 128+n.
	code, err = c.Exec(ctx, ExecOptions{Command: []string{"sh", "-c", "kill -9 $$"}})
	if err != nil || code != 137 {
		t.Fatalf("killed: %d %v", code, err)
	}
	// Quoting survives: words with spaces and quotes arrive intact.
	out.Reset()
	if _, err := c.Exec(ctx, ExecOptions{Command: []string{"printf", "%s|", "a b", `c'd`, "$HOME", ""}, Stdout: &out}); err != nil || out.String() != `a b|c'd|$HOME||` {
		t.Fatalf("quoting: %v %q", err, out.String())
	}
}

func TestExecPTY(t *testing.T) {
	f := newFixture(t)
	c := f.dial(t)
	var out bytes.Buffer
	code, err := c.Exec(context.Background(), ExecOptions{
		Command: []string{"sh", "-c", "stty size; echo $TERM; test -t 0 && echo tty; exit 3"},
		TTY:     true, Term: "xterm-test", Stdout: &out,
	})
	if err != nil || code != 3 {
		t.Fatalf("pty exec: %d %v", code, err)
	}
	got := strings.ReplaceAll(out.String(), "\r", "")
	if got != "24 80\nxterm-test\ntty\n" {
		t.Fatalf("pty output %q", got)
	}

	// window-change reaches the terminal; sizes from pty-req too.
	s, err := c.SSH().NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	stdin, _ := s.StdinPipe()
	stdout, _ := s.StdoutPipe()
	if err := s.RequestPty("xterm", 40, 100, ssh.TerminalModes{ssh.ECHO: 0}); err != nil {
		t.Fatal(err)
	}
	if err := s.Start("stty size; read x; stty size"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(stdout)
	line, _ := br.ReadString('\n')
	if strings.TrimSpace(line) != "40 100" {
		t.Fatalf("first size %q", line)
	}
	// Asked with a reply wanted (WindowChange wants none): the agent has resized the terminal
	// when the answer comes, before the data below is written to it.
	if ok, err := s.SendRequest("window-change", true, ssh.Marshal(struct{ Columns, Rows, Width, Height uint32 }{132, 50, 0, 0})); !ok || err != nil {
		t.Fatalf("window-change: %v %v", ok, err)
	}
	io.WriteString(stdin, "go\n")
	line, _ = br.ReadString('\n')
	if strings.TrimSpace(line) != "50 132" {
		t.Fatalf("size after window-change %q", line)
	}
	if err := s.Wait(); err != nil {
		t.Fatal(err)
	}

	// A login shell on a PTY: interactive, exits with what it is told.
	out.Reset()
	code, err = c.Exec(context.Background(), ExecOptions{TTY: true, Stdin: strings.NewReader("echo in-shell\nexit 5\n"), Stdout: &out})
	if err != nil || code != 5 || !strings.Contains(out.String(), "in-shell") {
		t.Fatalf("shell: %d %v %q", code, err, out.String())
	}
}

func TestExecSignalForwarded(t *testing.T) {
	f := newFixture(t)
	c := f.dial(t)
	sigs := make(chan os.Signal, 1)
	pr, pw := io.Pipe()
	done := make(chan struct{})
	var code int
	var err error
	go func() {
		defer close(done)
		code, err = c.Exec(context.Background(), ExecOptions{
			Command: []string{"sh", "-c", `trap 'echo got-int; exit 3' INT; echo ready; while :; do sleep 0.05; done`},
			Stdout:  pw, Signals: sigs,
		})
		pw.Close()
	}()
	br := bufio.NewReader(pr)
	if line, _ := br.ReadString('\n'); line != "ready\n" {
		t.Fatalf("got %q", line)
	}
	sigs <- syscall.SIGINT
	rest, _ := io.ReadAll(br)
	<-done
	if err != nil || code != 3 || string(rest) != "got-int\n" {
		t.Fatalf("after SIGINT: %d %v %q", code, err, rest)
	}
}

// TestExecKilledWhenClientGoes: the command and its children die when the client's
// connection ends, and when the Exec's context is cancelled.
func TestExecKilledWhenClientGoes(t *testing.T) {
	f := newFixture(t)
	for _, how := range []string{"disconnect", "cancel"} {
		t.Run(how, func(t *testing.T) {
			c := f.dial(t)
			pidFile := filepath.Join(t.TempDir(), "pid")
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() {
				// The trap makes the shell ignore SIGTERM: the cancel path must still kill.
				_, err := c.Exec(ctx, ExecOptions{Command: []string{"sh", "-c", `trap '' TERM; sleep 300 & echo $! > ` + pidFile + `; wait; wait`}})
				done <- err
			}()
			waitFor(t, func() bool { b, _ := os.ReadFile(pidFile); return len(bytes.TrimSpace(b)) > 0 }, "pid file")
			b, _ := os.ReadFile(pidFile)
			pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
			if !alive(pid) {
				t.Fatal("child not running")
			}
			if how == "disconnect" {
				c.Close()
			} else {
				cancel()
			}
			select {
			case err := <-done:
				if err == nil {
					t.Fatal("Exec returned no error")
				}
				if how == "cancel" && !errors.Is(err, context.Canceled) {
					t.Fatalf("cancel: %v", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("Exec did not return")
			}
			waitFor(t, func() bool { return !alive(pid) }, "the remote child killed")
		})
	}
}

func TestOpenSubsystem(t *testing.T) {
	f := newFixture(t)
	c := f.dial(t)
	rw, err := c.OpenSubsystem(SyncSubsystem)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(rw, "ping")
	buf := make([]byte, 4)
	if _, err := io.ReadFull(rw, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("echo: %v %q", err, buf)
	}
	if err := rw.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.OpenSubsystem("nope"); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Fatalf("unknown subsystem: %v", err)
	}
}

func TestShellQuote(t *testing.T) {
	for in, want := range map[string]string{
		"ls":        "ls",
		"a b":       "'a b'",
		"it's":      `'it'\''s'`,
		"":          "''",
		"$HOME":     "'$HOME'",
		"x=1,y@z:%": "x=1,y@z:%",
	} {
		if got := ShellQuote([]string{in}); got != want {
			t.Errorf("ShellQuote(%q) = %q, want %q", in, got, want)
		}
	}
}

// One buffer given as both Stdout and Stderr (as os/exec allows) receives every line: the SSH
// session copies the two streams in two goroutines, which without a guard race on the buffer
// (go test -race reports it; output came back short).
func TestExecOneWriterForBothStreams(t *testing.T) {
	f := newFixture(t)
	c := f.dial(t)
	for i := 0; i < 20; i++ {
		var out bytes.Buffer
		code, err := c.Exec(context.Background(), ExecOptions{
			Command: []string{"sh", "-c", "echo o1; echo e1 >&2; echo o2; echo e2 >&2"},
			Stdout:  &out, Stderr: &out,
		})
		if err != nil || code != 0 {
			t.Fatalf("exec %d: %d %v", i, code, err)
		}
		for _, l := range []string{"o1\n", "e1\n", "o2\n", "e2\n"} {
			if !strings.Contains(out.String(), l) {
				t.Fatalf("exec %d: output %q lacks %q", i, out.String(), l)
			}
		}
		if out.Len() != 12 {
			t.Fatalf("exec %d: output %q", i, out.String())
		}
	}
}

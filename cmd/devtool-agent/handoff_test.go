package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/devtool/devtool/internal/agentversion"
	"github.com/devtool/devtool/internal/devssh"
)

// lockedBuffer is a bytes.Buffer written by one goroutine and read by another.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// servedAgent is the built agent serving from home/bin/devtool-agent on the loopback.
type servedAgent struct {
	t              *testing.T
	dir, home, exe string
	addr           string
	signer         ssh.Signer
	cmd            *exec.Cmd
	stderr         lockedBuffer
	exited         chan error
}

func serveBuilt(t *testing.T, built string) *servedAgent {
	t.Helper()
	a := &servedAgent{t: t, dir: t.TempDir(), exited: make(chan error, 1)}
	a.home = filepath.Join(a.dir, "home")
	a.exe = filepath.Join(a.home, "bin", "devtool-agent")
	data, err := os.ReadFile(built)
	a.must(err)
	a.must(os.MkdirAll(filepath.Dir(a.exe), 0o755))
	a.put(data)
	a.signer, err = devssh.LoadOrCreateKey(filepath.Join(a.dir, "state", "id_ed25519"))
	a.must(err)
	a.must(os.MkdirAll(filepath.Join(a.home, "ssh"), 0o700))
	a.must(os.WriteFile(filepath.Join(a.home, "ssh", "authorized_keys"), ssh.MarshalAuthorizedKey(a.signer.PublicKey()), 0o600))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	a.must(err)
	a.addr = ln.Addr().String()
	ln.Close()
	a.cmd = exec.Command(a.exe, "serve", "--home", a.home, "--addr", a.addr)
	a.cmd.Stderr = &a.stderr
	a.must(a.cmd.Start())
	go func() { a.exited <- a.cmd.Wait() }()
	t.Cleanup(func() {
		_ = a.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-a.exited:
		case <-time.After(20 * time.Second):
			_ = a.cmd.Process.Kill()
			<-a.exited
		}
		if t.Failed() {
			t.Logf("agent log:\n%s", a.stderr.String())
		}
	})
	return a
}

func (a *servedAgent) must(err error) {
	a.t.Helper()
	if err != nil {
		a.t.Fatal(err)
	}
}

// put writes the binary at exe as Install does: a temporary file renamed over it.
func (a *servedAgent) put(b []byte) {
	a.t.Helper()
	a.must(os.WriteFile(a.exe+".tmp", b, 0o755))
	a.must(os.Rename(a.exe+".tmp", a.exe))
}

func (a *servedAgent) dial() *devssh.Client {
	a.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		conn, err := net.Dial("tcp", a.addr)
		if err == nil {
			c, err := devssh.Dial(context.Background(), conn, devssh.ClientConfig{Signer: a.signer, KnownHostsFile: filepath.Join(a.dir, "state", "known_hosts")})
			if err == nil {
				a.t.Cleanup(func() { c.Close() })
				return c
			}
		}
		if time.Now().After(deadline) {
			a.t.Fatalf("no agent at %s: %v\n%s", a.addr, err, a.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// restart asks the agent to restart in place and waits until its connection closes.
func (a *servedAgent) restart(c *devssh.Client) agentversion.RestartReply {
	a.t.Helper()
	ok, reply, err := c.SSH().SendRequest(agentversion.RestartRequest, true, nil)
	if err != nil || !ok {
		a.t.Fatalf("restart: ok=%v %q %v", ok, reply, err)
	}
	select {
	case <-c.Done():
	case <-time.After(20 * time.Second):
		a.t.Fatal("the connection stayed open after the restart was accepted")
	}
	return agentversion.ParseRestartReply(reply)
}

// terminals lists the agent process's open terminal masters.
func (a *servedAgent) terminals() []string {
	a.t.Helper()
	dir := fmt.Sprintf("/proc/%d/fd", a.cmd.Process.Pid)
	ents, err := os.ReadDir(dir)
	a.must(err)
	var out []string
	for _, e := range ents {
		if l, err := os.Readlink(filepath.Join(dir, e.Name())); err == nil && strings.HasSuffix(l, "ptmx") {
			out = append(out, e.Name()+" -> "+l)
		}
	}
	return out
}

// keptTerm is a devssh.Terminal (the dev command of up) running a counter that echoes its
// input, kept by the agent under one ID.
type keptTerm struct {
	t    *testing.T
	term *devssh.Terminal
	in   *io.PipeWriter
	out  lockedBuffer
	note lockedBuffer
	ctx  context.Context
	stop context.CancelFunc
	runs chan error
}

const counterScript = `echo PID=$$ PPID=$PPID; (i=0; while :; do i=$((i+1)); echo tick-$i; sleep 0.1; done) & while read l; do echo got-$l; done`

func newKeptTerm(t *testing.T) *keptTerm {
	pr, pw := io.Pipe()
	k := &keptTerm{t: t, in: pw, runs: make(chan error, 4)}
	k.term = devssh.NewTerminal(devssh.ExecOptions{Command: []string{"sh", "-c", counterScript}, Stdin: pr, Stdout: &k.out}, devssh.NewKeepID())
	k.term.Notify = func(s string) { fmt.Fprintln(&k.note, s) }
	k.ctx, k.stop = context.WithCancel(context.Background())
	t.Cleanup(func() {
		k.stop()
		pw.Close()
		k.term.Close()
	})
	return k
}

// run runs (or attaches to) the command over c in the background.
func (k *keptTerm) run(c *devssh.Client) {
	go func() {
		_, _, err := k.term.Run(k.ctx, c)
		k.runs <- err
	}()
}

func (k *keptTerm) waitRun() error {
	k.t.Helper()
	select {
	case err := <-k.runs:
		return err
	case <-time.After(30 * time.Second):
		k.t.Fatalf("the terminal's run did not end; output %q", k.out.String())
		return nil
	}
}

// waitOutput waits until the output after from matches re; it returns the submatches.
func (k *keptTerm) waitOutput(from int, re string) []string {
	k.t.Helper()
	rx := regexp.MustCompile(re)
	deadline := time.Now().Add(30 * time.Second)
	for {
		s := k.out.String()
		if from <= len(s) {
			if m := rx.FindStringSubmatch(s[from:]); m != nil {
				return m
			}
		}
		if time.Now().After(deadline) {
			k.t.Fatalf("no output matching %s after byte %d; output %q; notes %q", re, from, s, k.note.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// gone reports whether process pid no longer exists (not even as a zombie).
func gone(pid int) bool {
	return syscall.Kill(pid, 0) == syscall.ESRCH
}

func waitGone(t *testing.T, pid int, what string) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !gone(pid); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("%s: process %d is still there (%s)", what, pid, b)
		}
	}
}

// A restart in place keeps the dev command (a kept terminal command) running: the agent
// hands it to the new binary (same process), and the client's next connection attaches to
// the same process, its output and input flowing again; nothing is left behind (no handoff
// file, one terminal master), and releasing it afterwards ends it for good.
func TestRestartInPlaceKeepsTheKeptCommand(t *testing.T) {
	if runtime.GOOS != "linux" || testing.Short() {
		t.Skip("linux only; builds the agent")
	}
	built := build(t, runtime.GOARCH)
	data, err := os.ReadFile(built)
	if err != nil {
		t.Fatal(err)
	}
	for _, rebuilt := range []bool{false, true} {
		t.Run(fmt.Sprintf("rebuilt=%v", rebuilt), func(t *testing.T) {
			a := serveBuilt(t, built)
			c := a.dial()
			k := newKeptTerm(t)
			k.run(c)
			m := k.waitOutput(0, `PID=(\d+) PPID=(\d+)`)
			pid, _ := strconv.Atoi(m[1])
			if m[2] != strconv.Itoa(a.cmd.Process.Pid) {
				t.Fatalf("the command's parent is %s, not the agent %d", m[2], a.cmd.Process.Pid)
			}
			if _, err := io.WriteString(k.in, "before\n"); err != nil {
				t.Fatal(err)
			}
			k.waitOutput(0, `got-before`)
			k.waitOutput(0, `tick-3\b`)
			if n := len(a.terminals()); n != 1 {
				t.Fatalf("%d terminals open in the agent before the restart, want 1", n)
			}

			sum := ""
			if rebuilt {
				a.put(append(append([]byte(nil), data...), []byte("another release")...))
				sum, _ = agentversion.FileSum(a.exe)
			}
			r := a.restart(c)
			if !r.Said || !r.Handoff || r.Kept != 1 {
				t.Fatalf("restart reply %+v, want a handoff of 1 kept command", r)
			}
			if err := k.waitRun(); err == nil {
				t.Fatal("the terminal's run ended without an error when the agent restarted")
			}
			mark := len(k.out.String())

			c2 := a.dial()
			if rebuilt {
				if i, _ := agentversion.Parse(string(c2.SSH().ServerVersion())); !strings.HasPrefix(sum, i.Sum) || i.Sum == "" {
					t.Fatalf("after the restart the banner says %+v, the new binary's sum is %s", i, sum)
				}
			}
			k.run(c2)
			// The same process goes on: its counter continues and it still reads its input.
			tick := k.waitOutput(mark, `tick-(\d+)`)
			if n, _ := strconv.Atoi(tick[1]); n < 3 {
				t.Fatalf("the counter started again (tick-%d after the restart): the command was not kept", n)
			}
			if got := k.term.PID(); got != pid {
				t.Fatalf("attached to process %d after the restart, want %d; notes %q", got, pid, k.note.String())
			}
			if !strings.Contains(k.note.String(), fmt.Sprintf("back in the dev command (pid %d), which kept running", pid)) {
				t.Errorf("notes %q do not say the command kept running", k.note.String())
			}
			if _, err := io.WriteString(k.in, "after\n"); err != nil {
				t.Fatal(err)
			}
			k.waitOutput(mark, `got-after`)
			if strings.Contains(k.out.String()[mark:], "PID=") {
				t.Fatalf("the command started again after the restart: %q", k.out.String()[mark:])
			}
			if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err != nil || !strings.Contains(string(b), fmt.Sprintf(" %d ", a.cmd.Process.Pid)) {
				t.Fatalf("the command is no longer the agent's child: %q %v", b, err)
			}
			if _, err := os.Lstat(filepath.Join(a.home, "agent-handoff.json")); !os.IsNotExist(err) {
				t.Errorf("the handoff file is left after the restart: %v", err)
			}
			if n := a.terminals(); len(n) != 1 {
				t.Errorf("terminals open in the agent after the restart: %v, want one", n)
			}
			log := a.stderr.String()
			for _, want := range []string{"kept commands handed over to the next agent", "kept command taken over", "restarting with the binary on the dev volume"} {
				if !strings.Contains(log, want) {
					t.Errorf("the log does not say %q:\n%s", want, log)
				}
			}

			// Released (up stops): the command ends for good, and the agent holds nothing of it.
			k.stop()
			k.waitRun()
			waitGone(t, pid, "the released command")
			for deadline := time.Now().Add(10 * time.Second); len(a.terminals()) > 0; time.Sleep(20 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("terminals left in the agent after the command ended: %v", a.terminals())
				}
			}
			select {
			case err := <-a.exited:
				t.Fatalf("the agent exited: %v", err)
			default:
			}
		})
	}
}

// When the kept commands cannot be handed over, the restart ends them as before, cleanly:
// a successor that does not take them (an earlier release: no `capabilities`), or a handoff
// file the successor cannot read (garbled). No process, zombie or terminal is left.
func TestRestartInPlaceFallbackEndsKeptCommands(t *testing.T) {
	if runtime.GOOS != "linux" || testing.Short() {
		t.Skip("linux only; builds the agent")
	}
	built := build(t, runtime.GOARCH)
	for _, tc := range []struct {
		name    string
		wrapper string // the successor: a script executing the built agent
		handoff bool   // the restart reply announces a handoff
	}{
		{"refused", `[ "$1" = capabilities ] && { echo "unknown command" >&2; exit 2; }`, false},
		{"garbled", `[ "$1" = serve ] && echo '{"version":1,"commands":[{"id":' > "$DEVTOOL_TEST_HOME/agent-handoff.json"`, true},
		{"foreign", `[ "$1" = serve ] && sed -i 's/"start":[0-9]*/"start":1/' "$DEVTOOL_TEST_HOME/agent-handoff.json"`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := serveBuilt(t, built)
			c := a.dial()
			k := newKeptTerm(t)
			k.run(c)
			m := k.waitOutput(0, `PID=(\d+)`)
			pid, _ := strconv.Atoi(m[1])
			k.waitOutput(0, `tick-2\b`)
			// The command's background counter, in the same session.
			var members []int
			for _, p := range sessionOf(pid) {
				members = append(members, p)
			}
			if len(members) < 2 {
				t.Fatalf("the command's session has %v, want the shell and its counter", members)
			}

			real := filepath.Join(a.dir, "real-agent")
			b, err := os.ReadFile(built)
			a.must(err)
			a.must(os.WriteFile(real, b, 0o755))
			a.put([]byte("#!/bin/sh\nDEVTOOL_TEST_HOME='" + a.home + "'\n" + tc.wrapper + "\nexec '" + real + "' \"$@\"\n"))

			r := a.restart(c)
			if r.Handoff != tc.handoff {
				t.Fatalf("restart reply %+v, want handoff %v", r, tc.handoff)
			}
			k.waitRun()
			c2 := a.dial()
			for _, p := range members {
				waitGone(t, p, "a process of the kept command after the restart")
			}
			// The next connection starts the command again (a new process).
			k.run(c2)
			m = k.waitOutput(0, `(?s)PID=\d+ PPID=\d+.*PID=(\d+) PPID=`)
			if m[1] == strconv.Itoa(pid) {
				t.Fatalf("process %d again", pid)
			}
			if n := a.terminals(); len(n) != 1 {
				t.Errorf("terminals open in the agent after the restart: %v, want only the new command's", n)
			}
			if _, err := os.Lstat(filepath.Join(a.home, "agent-handoff.json")); !os.IsNotExist(err) {
				t.Errorf("the handoff file is left after the restart: %v", err)
			}
			if tc.handoff && !strings.Contains(a.stderr.String(), "ending it") {
				t.Errorf("the log does not say the terminal handed over was ended:\n%s", a.stderr.String())
			}
		})
	}
}

// sessionOf lists the processes of session sid.
func sessionOf(sid int) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) > 3 && f[3] == strconv.Itoa(sid) {
			out = append(out, pid)
		}
	}
	return out
}

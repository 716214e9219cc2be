//go:build linux

package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/sys/unix"
)

// handoffServer is an agent whose restart hands its kept commands over (as
// cmd/devtool-agent's does when the new binary takes them).
func handoffServer(t *testing.T, home string) *testServer {
	t.Helper()
	return startServerCfg(t, Config{
		HostKeyFile:        filepath.Join(home, "ssh", "host_ed25519"),
		AuthorizedKeysFile: filepath.Join(home, "ssh", "authorized_keys"),
		CanRestart:         func() (bool, error) { return true, nil },
		HandoffFile:        filepath.Join(home, "agent-handoff.json"),
	})
}

// restartServer asks ts to restart and returns what its Serve returned.
func restartServer(t *testing.T, ts *testServer, c *ssh.Client) *Restart {
	t.Helper()
	ok, _, err := c.SendRequest(restartRequest, true, nil)
	if !ok || err != nil {
		t.Fatalf("restart: %v %v", ok, err)
	}
	select {
	case err := <-ts.done:
		ts.done <- nil
		var r *Restart
		if !errors.As(err, &r) || !errors.Is(err, ErrRestart) {
			t.Fatalf("Serve returned %v after a restart request", err)
		}
		return r
	case <-time.After(30 * time.Second):
		t.Fatal("Serve did not end after the restart request")
		return nil
	}
}

// execLike does to r's commands what an exec does in this (test) process: the agent that
// handed them over is gone (its files closed, the terminal's fd kept: a duplicate without
// close-on-exec, whose number the handoff file is given).
func execLike(t *testing.T, r *Restart, file string) {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var st handoffState
	if err := json.Unmarshal(data, &st); err != nil {
		t.Fatal(err)
	}
	for i, c := range r.h.cmds {
		rc, _ := c.ptmx.SyscallConn()
		fd := -1
		_ = rc.Control(func(f uintptr) { fd = int(f) })
		nfd, err := unix.Dup(fd)
		if err != nil {
			t.Fatal(err)
		}
		c.ptmx.Close()
		c.pidfd.Close()
		if st.Commands[i].FD != fd {
			t.Fatalf("handed over fd %d, the terminal is %d", st.Commands[i].FD, fd)
		}
		st.Commands[i].FD = nfd
	}
	r.h = nil
	data, _ = json.Marshal(st)
	if err := os.WriteFile(file, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// The kept command handed over in a restart is adopted by the next Serve: the same process,
// the client's counts carried over (its output since the last byte it saw, its input not
// sent twice), and it ends normally later.
func TestHandoffAdoptsKeptCommand(t *testing.T) {
	home := t.TempDir()
	k := newKey(t)
	authorize(t, home, k)
	file := filepath.Join(home, "agent-handoff.json")
	ts := handoffServer(t, home)
	c := dial(t, ts, k)
	term, ok := openTerm(t, c, "handed", 0)
	if !ok || term.reply.Attached {
		t.Fatalf("keep: %v %+v", ok, term.reply)
	}
	sent := 0
	for _, l := range []string{"echo PID=$$", "i=0; (while :; do i=$((i+1)); echo tick-$i; sleep 0.05; done) &"} {
		term.send(t, l)
		sent += len(l) + 1
	}
	pid := term.waitOutput(t, `PID=(\d+)`)
	term.waitOutput(t, `tick-3\b`)
	r := restartServer(t, ts, c)
	<-term.ended
	if r.Kept != 1 {
		t.Fatalf("%d kept commands handed over, want 1", r.Kept)
	}
	if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("handoff file: %v %v", fi, err)
	}
	execLike(t, r, file)

	ts2 := handoffServer(t, home)
	c2 := dial(t, ts2, k)
	had := term.received()
	term2, ok := openTerm(t, c2, "handed", had)
	if !ok || !term2.reply.Attached || strconv.Itoa(int(term2.reply.PID)) != pid {
		t.Fatalf("after the handoff: ok %v, reply %+v, want attached to %s", ok, term2.reply, pid)
	}
	if term2.reply.InputReceived != uint64(sent) || term2.reply.Lost != 0 {
		t.Errorf("after the handoff: input received %d (sent %d), lost %d", term2.reply.InputReceived, sent, term2.reply.Lost)
	}
	if _, err := os.Lstat(file); !os.IsNotExist(err) {
		t.Errorf("the handoff file is left: %v", err)
	}
	// Every tick once, in order, across the two agents.
	last := regexp.MustCompile(`tick-(\d+)`).FindAllStringSubmatch(term.output(), -1)
	n, _ := strconv.Atoi(last[len(last)-1][1])
	term2.waitOutput(t, fmt.Sprintf(`tick-%d\b`, n+5))
	all := regexp.MustCompile(`tick-(\d+)`).FindAllStringSubmatch(term.output()+term2.output(), -1)
	for i, m := range all {
		if m[1] != strconv.Itoa(i+1) {
			t.Fatalf("tick %d is %s: output repeated or lost across the handoff\nfirst: %q\nsecond: %q", i+1, m[1], term.output(), term2.output())
		}
	}
	term2.send(t, "echo AGAIN=$$; kill %1; exit 5")
	if got := term2.waitOutput(t, `AGAIN=(\d+)`); got != pid {
		t.Errorf("the shell answering is %s, want %s", got, pid)
	}
	if code := term2.wait(t); code != 5 {
		t.Errorf("exit status %d after the handoff, want 5", code)
	}
	p, _ := strconv.Atoi(pid)
	waitFor(t, func() bool { return !exists(p) }, "the shell reaped")
}

// A handoff the next Serve cannot take (garbled) ends the commands handed over: their
// sessions hung up and reaped, their terminals closed; nothing leaks.
func TestHandoffGarbledEndsCommands(t *testing.T) {
	old := hangupGrace
	hangupGrace = 500 * time.Millisecond
	defer func() { hangupGrace = old }()
	home := t.TempDir()
	k := newKey(t)
	authorize(t, home, k)
	file := filepath.Join(home, "agent-handoff.json")
	ts := handoffServer(t, home)
	c := dial(t, ts, k)
	term, _ := openTerm(t, c, "garbled", 0)
	dir := t.TempDir()
	// A job that ignores SIGHUP: only the SIGKILL after the grace ends it.
	term.send(t, fmt.Sprintf("echo $$ > %s/shell; (trap '' HUP; exec sleep 300) & echo $! > %s/deaf; echo STARTED", dir, dir))
	term.waitOutput(t, "STARTED")
	var pids []int
	for _, f := range []string{"shell", "deaf"} {
		b, _ := os.ReadFile(filepath.Join(dir, f))
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			t.Fatalf("%s pid: %q", f, b)
		}
		pids = append(pids, pid)
	}
	r := restartServer(t, ts, c)
	execLike(t, r, file)
	if err := os.WriteFile(file, []byte(`{"version":1,"commands":[{"id":`), 0o600); err != nil {
		t.Fatal(err)
	}
	ts2 := handoffServer(t, home)
	for _, pid := range pids {
		waitFor(t, func() bool { return !exists(pid) }, fmt.Sprintf("process %d of the command handed over ended and reaped", pid))
	}
	waitFor(t, func() bool { return len(inheritedTerminals()) == 0 }, "the terminal handed over closed")
	c2 := dial(t, ts2, k)
	term2, ok := openTerm(t, c2, "garbled", 0)
	if !ok || term2.reply.Attached {
		t.Fatalf("after a garbled handoff: %v %+v, want a new command", ok, term2.reply)
	}
	term2.send(t, "exit 0")
	term2.wait(t)
	if !strings.Contains(ts2.logBuf.String(), "not a handoff") {
		t.Errorf("the log does not say the handoff was unreadable:\n%s", ts2.logBuf.String())
	}
}

// exists reports whether pid is a process, a zombie included (a zombie child of the test
// process would be one the agent did not reap).
func exists(pid int) bool {
	return unix.Kill(pid, 0) == nil
}

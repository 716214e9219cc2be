//go:build linux

package agent

import (
	"bytes"
	"fmt"
	"io"
	"os"
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
)

// termSession is one session channel with a PTY (x/crypto's ssh.Session does not show the
// agent's keep-info request: the channel is driven by hand, as devssh does).
type termSession struct {
	ch    ssh.Channel
	mu    sync.Mutex
	out   bytes.Buffer
	n     uint64
	reply keepReplyMsg
	ended chan int // the exit status, -1 when none came
}

func (ts *termSession) Write(p []byte) (int, error) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.n += uint64(len(p))
	return ts.out.Write(p)
}

func (ts *termSession) output() string {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.out.String()
}

func (ts *termSession) received() uint64 {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.n
}

// waitOutput waits until the output matches re and returns the first submatch (or the match).
func (ts *termSession) waitOutput(t *testing.T, re string) string {
	t.Helper()
	rx := regexp.MustCompile(re)
	var m []string
	waitFor(t, func() bool { m = rx.FindStringSubmatch(ts.output()); return m != nil }, "output matching "+re)
	if len(m) > 1 {
		return m[1]
	}
	return m[0]
}

// openTerm opens a session with a PTY running a login shell, asking to keep it under id
// (none when id is empty) with received bytes of output seen; ok is the keep request's answer.
func openTerm(t *testing.T, c *ssh.Client, id string, received uint64) (*termSession, bool) {
	t.Helper()
	ch, reqs, err := c.OpenChannel("session", nil)
	if err != nil {
		t.Fatal(err)
	}
	ts := &termSession{ch: ch, ended: make(chan int, 1)}
	modes := []byte{53, 0, 0, 0, 0, 0} // ECHO off
	if ok, err := ch.SendRequest("pty-req", true, ssh.Marshal(ptyRequestMsg{Term: "xterm", Columns: 120, Rows: 40, Modelist: string(modes)})); !ok || err != nil {
		t.Fatalf("pty-req: %v %v", ok, err)
	}
	ok := true
	if id != "" {
		ok, err = ch.SendRequest(keepRequest, true, ssh.Marshal(keepRequestMsg{ID: id, Received: received}))
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			select {
			case r := <-reqs:
				if r.Type != keepInfoRequest {
					t.Fatalf("request %s before the keep info", r.Type)
				}
				if err := ssh.Unmarshal(r.Payload, &ts.reply); err != nil {
					t.Fatal(err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("no keep info")
			}
		}
	}
	if ok, err := ch.SendRequest("shell", true, nil); !ok || err != nil {
		t.Fatalf("shell: %v %v", ok, err)
	}
	status := make(chan int, 1)
	go func() {
		code := -1
		for r := range reqs {
			if r.Type == "exit-status" {
				var m exitStatusMsg
				if ssh.Unmarshal(r.Payload, &m) == nil {
					code = int(m.Status)
				}
			}
		}
		status <- code
	}()
	go func() {
		_, _ = io.Copy(ts, ch)
		ch.Close()
		ts.ended <- <-status
	}()
	return ts, ok
}

func (ts *termSession) send(t *testing.T, line string) {
	t.Helper()
	if _, err := io.WriteString(ts.ch, line+"\n"); err != nil {
		t.Fatal(err)
	}
}

func (ts *termSession) wait(t *testing.T) int {
	t.Helper()
	select {
	case code := <-ts.ended:
		return code
	case <-time.After(30 * time.Second):
		t.Fatalf("the session did not end; output %q", ts.output())
		return 0
	}
}

func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// TestPTYShellExitsWithBackgroundJob: a shell that exits while a background job it started
// still holds the terminal is answered at once with its exit status (it used to be answered
// only when the job ended: the terminal's reader blocked until every holder was gone).
func TestPTYShellExitsWithBackgroundJob(t *testing.T) {
	for _, keep := range []string{"", "bgjob"} {
		t.Run("keep="+keep, func(t *testing.T) {
			home := t.TempDir()
			k := newKey(t)
			authorize(t, home, k)
			ts := startServer(t, home, nil)
			c := dial(t, ts, k)
			term, _ := openTerm(t, c, keep, 0)
			pidFile := filepath.Join(t.TempDir(), "job")
			term.send(t, "sleep 300 & echo $! > "+pidFile+"; exit 3")
			select {
			case code := <-term.ended:
				if code != 3 {
					t.Fatalf("exit status %d, want 3; output %q", code, term.output())
				}
			case <-time.After(60 * time.Second):
				t.Fatalf("no exit status while the background job runs; output %q", term.output())
			}
			b, _ := os.ReadFile(pidFile)
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		})
	}
}

// TestKeptShellSurvivesDisconnect: a kept shell goes on when its connection drops (a
// background job keeps writing to the terminal); the same client's new connection attaches to
// it, gets the output it missed, learns how much of its input arrived, and the shell's exit
// ends it for good.
func TestKeptShellSurvivesDisconnect(t *testing.T) {
	home := t.TempDir()
	k := newKey(t)
	authorize(t, home, k)
	ts := startServer(t, home, nil)

	c1 := dial(t, ts, k)
	term, ok := openTerm(t, c1, "survive", 0)
	if !ok || term.reply.Attached {
		t.Fatalf("keep request: ok %v, reply %+v: want a new kept command", ok, term.reply)
	}
	sent := 0
	for _, l := range []string{"echo PID=$$", "i=0; (while :; do i=$((i+1)); echo tick-$i; sleep 0.05; done) &"} {
		term.send(t, l)
		sent += len(l) + 1
	}
	pid := term.waitOutput(t, `PID=(\d+)`)
	term.waitOutput(t, `tick-3\b`)
	c1.Close() // the connection drops
	<-term.ended

	// The job goes on without a client: its ticks fill the ring.
	time.Sleep(300 * time.Millisecond)
	c2 := dial(t, ts, k)
	had := term.received()
	term2, ok := openTerm(t, c2, "survive", had)
	if !ok || !term2.reply.Attached {
		t.Fatalf("re-attach: ok %v, reply %+v", ok, term2.reply)
	}
	if strconv.Itoa(int(term2.reply.PID)) != pid {
		t.Errorf("re-attached to pid %d, the shell was %s", term2.reply.PID, pid)
	}
	if term2.reply.InputReceived != uint64(sent) {
		t.Errorf("input received %d, sent %d", term2.reply.InputReceived, sent)
	}
	if term2.reply.Lost != 0 {
		t.Errorf("lost %d bytes of output, the ring holds them all", term2.reply.Lost)
	}
	// The output continues where the first connection stopped: both together hold every
	// tick once, in order (a line cut by the drop is completed by the replay).
	last := regexp.MustCompile(`tick-(\d+)`).FindAllStringSubmatch(term.output(), -1)
	n, _ := strconv.Atoi(last[len(last)-1][1])
	term2.waitOutput(t, fmt.Sprintf(`tick-%d\b`, n+10))
	all := regexp.MustCompile(`tick-(\d+)`).FindAllStringSubmatch(term.output()+term2.output(), -1)
	for i, m := range all {
		if m[1] != strconv.Itoa(i+1) {
			t.Fatalf("tick %d is %s: output repeated or lost across the re-attach\nfirst: %q\nsecond: %q", i+1, m[1], term.output(), term2.output())
		}
	}
	term2.send(t, "echo AGAIN=$$; kill %1; exit 4")
	if got := term2.waitOutput(t, `AGAIN=(\d+)`); got != pid {
		t.Errorf("the same shell answers: pid %s, want %s", got, pid)
	}
	if code := term2.wait(t); code != 4 {
		t.Errorf("exit status after re-attach %d, want 4", code)
	}
	// Its end was delivered: no longer kept, a new keep request starts afresh.
	term3, ok := openTerm(t, c2, "survive", 0)
	if !ok || term3.reply.Attached {
		t.Errorf("after the end: %v %+v, want a new command", ok, term3.reply)
	}
	term3.send(t, "exit 0")
	term3.wait(t)
}

// TestKeptCommandExpires: a kept command without a client for KeepFor is hung up (SIGHUP to
// its whole session, background jobs in their own process groups included, SIGKILL to what
// ignores it) and reaped; every goroutine and file descriptor the agent used for it is gone.
func TestKeptCommandExpires(t *testing.T) {
	old := hangupGrace
	hangupGrace = 500 * time.Millisecond
	defer func() { hangupGrace = old }()
	home := t.TempDir()
	k := newKey(t)
	authorize(t, home, k)
	srv := startServerCfg(t, Config{
		HostKeyFile:        filepath.Join(home, "ssh", "host_ed25519"),
		AuthorizedKeysFile: filepath.Join(home, "ssh", "authorized_keys"),
		KeepFor:            time.Second,
	})
	// Settle what the server itself uses, then count.
	c0 := dial(t, srv, k)
	run(t, c0, "true")
	c0.Close()
	time.Sleep(100 * time.Millisecond)
	baseG, baseFD := runtime.NumGoroutine(), openFDs(t)

	c := dial(t, srv, k)
	term, _ := openTerm(t, c, "expire", 0)
	dir := t.TempDir()
	// A job that ignores SIGHUP (only SIGKILL ends it) and one that does not.
	term.send(t, fmt.Sprintf("echo $$ > %s/shell; (trap '' HUP; exec sleep 300) & echo $! > %s/deaf; sleep 300 & echo $! > %s/job; echo STARTED", dir, dir, dir))
	term.waitOutput(t, "STARTED")
	var pids []int
	for _, f := range []string{"shell", "deaf", "job"} {
		b, _ := os.ReadFile(filepath.Join(dir, f))
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			t.Fatalf("%s pid: %q", f, b)
		}
		pids = append(pids, pid)
	}
	c.Close()
	<-term.ended
	// Kept for a while: it still runs after the connection is gone.
	time.Sleep(300 * time.Millisecond)
	for _, pid := range pids {
		if !alive(pid) {
			t.Fatalf("pid %d ended with its connection, before KeepFor", pid)
		}
	}
	for i, pid := range pids {
		waitFor(t, func() bool { return !alive(pid) }, fmt.Sprintf("process %d (%s) ended after KeepFor", pid, []string{"shell", "deaf job", "job"}[i]))
	}
	if !strings.Contains(srv.logBuf.String(), "no client came back") {
		t.Errorf("the agent's log does not say why the command ended:\n%s", srv.logBuf.String())
	}
	waitFor(t, func() bool { return runtime.NumGoroutine() <= baseG && openFDs(t) <= baseFD },
		fmt.Sprintf("goroutines back to %d (now %d), fds back to %d (now %d)", baseG, runtime.NumGoroutine(), baseFD, openFDs(t)))
	// A client coming back now finds nothing kept.
	c2 := dial(t, srv, k)
	term2, ok := openTerm(t, c2, "expire", term.received())
	if !ok || term2.reply.Attached {
		t.Errorf("after expiry: %v %+v, want a new command", ok, term2.reply)
	}
	term2.send(t, "exit")
	term2.wait(t)
}

// TestKeptCommandOnlyForItsKey: another key that knows the ID is refused; a released command
// ends at once instead of being kept, before the release is answered.
func TestKeptCommandOnlyForItsKey(t *testing.T) {
	home := t.TempDir()
	k, other := newKey(t), newKey(t)
	authorize(t, home, k, other)
	ts := startServer(t, home, nil)
	c := dial(t, ts, k)
	term, _ := openTerm(t, c, "mine", 0)
	term.send(t, "echo PID=$$")
	pid, _ := strconv.Atoi(term.waitOutput(t, `PID=(\d+)`))
	c.Close()
	<-term.ended

	c2 := dial(t, ts, other)
	s, err := c2.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.RequestPty("xterm", 24, 80, nil); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.SendRequest(keepRequest, true, ssh.Marshal(keepRequestMsg{ID: "mine"})); ok || err != nil {
		t.Fatalf("another key attached to the kept command: %v %v", ok, err)
	}
	s.Close()
	if !alive(pid) {
		t.Fatal("the refused attach ended the kept command")
	}

	// Back with the right key, then released: the shell ends with the channel.
	c3 := dial(t, ts, k)
	term3, ok := openTerm(t, c3, "mine", term.received())
	if !ok || !term3.reply.Attached || int(term3.reply.PID) != pid {
		t.Fatalf("re-attach: %v %+v", ok, term3.reply)
	}
	if ok, err := term3.ch.SendRequest(releaseRequest, true, nil); !ok || err != nil {
		t.Fatalf("release: %v %v", ok, err)
	}
	// Answered once the command is gone: the client may close its connection then.
	if alive(pid) {
		t.Error("the release was answered while the released shell still ran")
	}
	term3.ch.Close()
	waitFor(t, func() bool { return !alive(pid) }, "the released shell ended")
}

// TestKeptOutputLostIsCounted: output beyond the ring while no client is attached is dropped
// from the oldest, and the client coming back is told how much.
func TestKeptOutputLostIsCounted(t *testing.T) {
	home := t.TempDir()
	k := newKey(t)
	authorize(t, home, k)
	ts := startServer(t, home, nil)
	c := dial(t, ts, k)
	term, _ := openTerm(t, c, "flood", 0)
	term.send(t, "echo READY")
	term.waitOutput(t, "READY")
	// 512 KiB after the connection is gone, then a marker.
	term.send(t, "sleep 0.5; head -c 524288 /dev/zero | tr '\\0' x; echo; echo DONE")
	time.Sleep(100 * time.Millisecond)
	c.Close()
	<-term.ended
	had := term.received()
	time.Sleep(2 * time.Second) // the flood is written meanwhile, with no client
	c2 := dial(t, ts, k)
	term2, ok := openTerm(t, c2, "flood", had)
	if !ok || !term2.reply.Attached {
		t.Fatalf("re-attach: %v %+v", ok, term2.reply)
	}
	term2.waitOutput(t, "DONE")
	if term2.reply.Lost == 0 || term2.reply.Lost > 512<<10 {
		t.Errorf("lost %d bytes, want some of the 512 KiB sent while away", term2.reply.Lost)
	}
	got := int(term2.received())
	if got > keepRing+4096 {
		t.Errorf("replayed %d bytes, more than the ring holds", got)
	}
	term2.send(t, "exit")
	term2.wait(t)
}

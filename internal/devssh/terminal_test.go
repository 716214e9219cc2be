package devssh

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

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

func (l *lockedBuffer) waitMatch(t *testing.T, re string) string {
	t.Helper()
	rx := regexp.MustCompile(re)
	var m []string
	waitFor(t, func() bool { m = rx.FindStringSubmatch(l.String()); return m != nil }, "output matching "+re)
	if len(m) > 1 {
		return m[1]
	}
	return m[0]
}

// runTerminal runs term over each connection sess makes until it ends, as up does.
func runTerminal(ctx context.Context, sess *Session, term *Terminal) (int, error) {
	for {
		c, err := sess.WaitClient(ctx)
		if err != nil {
			return 0, err
		}
		code, ended, err := term.Run(ctx, c)
		if ended {
			return code, err
		}
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		select { // the connection died: wait for the next
		case <-c.Done():
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// TestTerminalSurvivesCut: the dev command with a PTY keeps running when the connection is cut;
// the keys typed while no connection can be made are held and delivered once it is back, to
// the same shell (same PID), whose background job went on meanwhile, and its exit ends the
// terminal. Everything is closed afterwards.
func TestTerminalSurvivesCut(t *testing.T) {
	base := runtime.NumGoroutine()
	f := newFixture(t)
	tr := &tracker{addr: f.agent.addr}
	sess := NewSession(tr.dial, f.config())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	runDone := make(chan error, 1)
	go func() { runDone <- sess.Run(ctx) }()

	keys, typing := io.Pipe()
	out := &lockedBuffer{}
	var notes lockedBuffer
	term := NewTerminal(ExecOptions{Stdin: keys, Stdout: out}, NewKeepID())
	term.Notify = func(s string) { fmt.Fprintln(&notes, s) }
	type result struct {
		code int
		err  error
	}
	ended := make(chan result, 1)
	go func() {
		code, err := runTerminal(ctx, sess, term)
		ended <- result{code, err}
	}()

	dir := t.TempDir()
	counter := filepath.Join(dir, "counter")
	fmt.Fprintf(typing, "echo PID=$$; (i=0; while :; do i=$((i+1)); echo $i > %s; sleep 0.05; done) & echo STARTED\n", counter)
	pid := out.waitMatch(t, `PID=(\d+)`)
	out.waitMatch(t, "STARTED")
	readCounter := func() int {
		b, _ := os.ReadFile(counter)
		n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		return n
	}

	tr.refuse(true)
	tr.cut()
	waitFor(t, func() bool { return sess.Client() == nil }, "the connection seen lost")
	before := readCounter()
	// Typed while disconnected: held.
	fmt.Fprintf(typing, "echo TYPED=$$ > %s/typed; echo AFTER=$$\n", dir)
	waitFor(t, func() bool { return readCounter() > before+3 }, "the background job going on while disconnected")
	if _, err := os.Stat(filepath.Join(dir, "typed")); err == nil {
		t.Fatal("the keys typed while disconnected arrived without a connection")
	}
	tr.refuse(false)
	if got := out.waitMatch(t, `AFTER=(\d+)`); got != pid {
		t.Errorf("after the cut the shell is pid %s, before %s", got, pid)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "typed")); err != nil || strings.TrimSpace(string(b)) != "TYPED="+pid {
		t.Errorf("the command typed during the cut: %q %v", b, err)
	}
	if !strings.Contains(notes.String(), "back in the dev command (pid "+pid+")") {
		t.Errorf("notes: %q", notes.String())
	}
	if term.PID() != mustAtoi(pid) {
		t.Errorf("PID() %d, want %s", term.PID(), pid)
	}
	fmt.Fprintf(typing, "kill %%1; exit 6\n")
	select {
	case r := <-ended:
		if r.code != 6 || r.err != nil {
			t.Errorf("the terminal ended with %d %v, want 6", r.code, r.err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the terminal did not end; output %q", out.String())
	}
	term.Close()
	typing.Close()
	cancel()
	if err := <-runDone; err != nil {
		t.Fatal(err)
	}
	f.agent.stop()
	goroutinesSettle(t, base)
}

func mustAtoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

// TestTerminalResendsLostKeys: keys written on a connection that died before they reached
// the agent are sent again after the re-attach, each exactly once (the agent says how many
// it got).
func TestTerminalResendsLostKeys(t *testing.T) {
	q := inputQueue{}
	q.put([]byte("abcdef"))
	q.advance(6) // all sent on the first channel
	if lost := q.rewind(4, false); lost != 0 || string(q.peek(10)) != "ef" {
		t.Fatalf("rewind to 4: lost %d, to send %q", lost, q.peek(10))
	}
	q.advance(2)
	q.put([]byte("gh"))
	if lost := q.rewind(6, false); lost != 0 || string(q.peek(10)) != "gh" {
		t.Fatalf("rewind to 6: lost %d, to send %q", lost, q.peek(10))
	}
	// A new command counts from the first key not sent yet.
	q.newCommand()
	if lost := q.rewind(0, false); lost != 0 || string(q.peek(10)) != "gh" {
		t.Fatalf("new command: %d %q", lost, q.peek(10))
	}
	// Sent keys are held up to InputHold; older ones are reported lost when asked again.
	var r inputQueue
	big := bytes.Repeat([]byte("k"), InputHold+100)
	r.put(big)
	r.advance(len(big))
	if lost := r.rewind(0, false); lost != 100 || r.unsent() != InputHold {
		t.Fatalf("rewind past the held keys: lost %d, unsent %d", lost, r.unsent())
	}
	// A fresh client attached to a command another started sends nothing again.
	var f inputQueue
	f.put([]byte("new"))
	if lost := f.rewind(1000, true); lost != 0 || string(f.peek(10)) != "new" {
		t.Fatalf("fresh attach: %d %q", lost, f.peek(10))
	}
}

// TestTerminalAttachesToCommandLeftRunning: an up that died left its dev command running (no
// release); a new Terminal with the same keep ID (from the state file) attaches to it, says so,
// and sends none of the old client's keys again.
func TestTerminalAttachesToCommandLeftRunning(t *testing.T) {
	f := newFixture(t)
	id := NewKeepID()
	ctx := context.Background()

	keys1, typing1 := io.Pipe()
	out1 := &lockedBuffer{}
	term1 := NewTerminal(ExecOptions{Stdin: keys1, Stdout: out1}, id)
	c1 := f.dial(t)
	ran := make(chan bool, 1)
	go func() {
		_, ended, _ := term1.Run(ctx, c1)
		ran <- ended
	}()
	fmt.Fprintf(typing1, "echo PID=$$\n")
	pid := out1.waitMatch(t, `PID=(\d+)`)
	c1.Close() // the up dies: no release
	if ended := <-ran; ended {
		t.Fatal("the first terminal says the command ended")
	}
	term1.Close()
	typing1.Close()

	keys2, typing2 := io.Pipe()
	out2 := &lockedBuffer{}
	var notes lockedBuffer
	term2 := NewTerminal(ExecOptions{Stdin: keys2, Stdout: out2}, id)
	term2.Notify = func(s string) { fmt.Fprintln(&notes, s) }
	defer term2.Close()
	c2 := f.dial(t)
	done := make(chan int, 1)
	go func() {
		code, _, _ := term2.Run(ctx, c2)
		done <- code
	}()
	fmt.Fprintf(typing2, "echo AGAIN=$$; exit 5\n")
	if got := out2.waitMatch(t, `AGAIN=(\d+)`); got != pid {
		t.Errorf("the new terminal runs in pid %s, the one left running is %s", got, pid)
	}
	if !strings.Contains(notes.String(), "left running by an earlier up (pid "+pid+")") {
		t.Errorf("notes %q", notes.String())
	}
	select {
	case code := <-done:
		if code != 5 {
			t.Errorf("exit %d, want 5", code)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no exit")
	}
	typing2.Close()
}

package devssh

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/term"

	"github.com/devtool/devtool/internal/safefile"
)

// The agent's kept terminal commands (internal/agent/keep.go; the wire messages are repeated
// here so the CLI does not import the Linux-only agent package).
const (
	keepRequest     = "keep@devtool"
	keepInfoRequest = "keep-info@devtool"
	releaseRequest  = "release@devtool"
)

type keepRequestMsg struct {
	ID       string
	Received uint64
	Fresh    bool
}

type keepInfoMsg struct {
	Attached      bool
	PID           uint32
	InputReceived uint64
	Lost          uint64
}

// InputHold bounds the keys a Terminal holds: typed while disconnected and not sent yet (the
// terminal is not read further while that much waits), and sent but maybe not arrived (kept
// to be sent again after a reconnect).
const InputHold = 64 << 10

// Terminal is the dev command run with a PTY that outlives the connection: the agent keeps it
// running when the connection drops (for a while), and Run over the next connection attaches
// to it again (the same process, its output since the drop replayed, the keys typed meanwhile
// delivered, those lost on the way sent again). An agent that cannot keep commands gets the
// command started again on each connection. The local terminal stays in raw mode from the
// first Run to Close.
type Terminal struct {
	o  ExecOptions
	id string
	// Notify gets one sentence for the user when something about the command changes (it was
	// attached again, output was lost, it was started anew); nil drops them.
	Notify func(string)
	// OnKeepID is told when the keep ID changes (the agent refused the one given); may be nil.
	OnKeepID func(string)

	mu       sync.Mutex
	cond     *sync.Cond
	in       inputQueue
	received uint64 // output bytes of the current command written to Stdout
	started  bool   // a command was started (or attached) on some connection
	noKeep   bool   // the agent refused to keep it: start it anew on each connection
	pid      uint32
	closed   bool

	once    sync.Once
	restore func()
	winch   chan os.Signal
}

// NewTerminal prepares the command of o (TTY implied; Signals unused) to run kept under id, a
// random name this client gives it (NewKeepID).
func NewTerminal(o ExecOptions, id string) *Terminal {
	t := &Terminal{o: o, id: id}
	t.cond = sync.NewCond(&t.mu)
	if t.o.Stdout == nil {
		t.o.Stdout = io.Discard
	}
	return t
}

// NewKeepID is a random keep ID.
func NewKeepID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%x", b)
}

func (t *Terminal) notify(format string, args ...any) {
	if t.Notify != nil {
		t.Notify(fmt.Sprintf(format, args...))
	}
}

// setup puts the local terminal in raw mode and starts reading it (once).
func (t *Terminal) setup() error {
	var err error
	t.once.Do(func() {
		if fd, ok := terminalFd(t.o.Stdin); ok {
			st, e := term.MakeRaw(fd)
			if e != nil {
				err = e
				return
			}
			t.restore = func() { _ = term.Restore(fd, st) }
			t.winch = notifyResize()
		}
		if t.o.Stdin != nil {
			// Reads until EOF; a terminal's Read cannot be interrupted, so after Close this
			// goroutine ends at the next key (or with the process).
			go t.readInput(t.o.Stdin)
		} else {
			t.mu.Lock()
			t.in.eof = true
			t.mu.Unlock()
		}
	})
	return err
}

// Close gives the local terminal its mode back and stops holding keys.
func (t *Terminal) Close() {
	t.mu.Lock()
	t.closed = true
	t.cond.Broadcast()
	t.mu.Unlock()
	if t.winch != nil {
		signal.Stop(t.winch)
	}
	if t.restore != nil {
		t.restore()
	}
}

func (t *Terminal) readInput(r io.Reader) {
	buf := make([]byte, 4096)
	for {
		n, err := r.Read(buf)
		t.mu.Lock()
		// Bounded: while InputHold keys wait to be sent, the terminal is not read (the
		// user's terminal holds the rest, and nothing is dropped).
		for !t.closed && t.in.unsent() >= InputHold {
			t.cond.Wait()
		}
		if t.closed {
			t.mu.Unlock()
			return
		}
		t.in.put(buf[:n])
		if err != nil {
			t.in.eof = true
		}
		t.cond.Broadcast()
		t.mu.Unlock()
		if err != nil {
			return
		}
	}
}

// Run runs (or attaches to) the command over c until it ends (ended, with its exit code:
// 128+n for signal n), the connection is lost (not ended; Run again on the next one), or ctx
// ends (the command is released: the agent hangs it up).
func (t *Terminal) Run(ctx context.Context, c *Client) (code int, ended bool, err error) {
	if err := t.setup(); err != nil {
		return ExitStatusUnknown, false, err
	}
	ch, reqs, err := c.ssh.OpenChannel("session", nil)
	if err != nil {
		return ExitStatusUnknown, false, fmt.Errorf("opening a session: %w", err)
	}
	defer ch.Close()
	// The channel's requests: the keep info first (when asked), then the exit.
	info := make(chan keepInfoMsg, 1)
	exit := make(chan int, 1)
	reqDone := make(chan struct{})
	go func() {
		defer close(reqDone)
		code := -1
		for r := range reqs {
			switch r.Type {
			case keepInfoRequest:
				var m keepInfoMsg
				if ssh.Unmarshal(r.Payload, &m) == nil {
					info <- m
				}
			case "exit-status":
				var m struct{ Status uint32 }
				if ssh.Unmarshal(r.Payload, &m) == nil {
					code = int(m.Status)
				}
			case "exit-signal":
				var m struct {
					Signal     string
					CoreDumped bool
					Error      string
					Lang       string
				}
				if ssh.Unmarshal(r.Payload, &m) == nil {
					code = 128 + 15
					if n, ok := signalNumbers[ssh.Signal(m.Signal)]; ok {
						code = 128 + n
					}
				}
			}
			if r.WantReply {
				_ = r.Reply(false, nil)
			}
		}
		exit <- code
	}()
	fail := func(what string, err error) (int, bool, error) {
		ch.Close()
		<-reqDone
		if err == nil {
			err = errors.New("refused by the agent")
		}
		return ExitStatusUnknown, false, fmt.Errorf("%s: %w", what, err)
	}
	env := map[string]string{}
	for k, v := range t.o.Env {
		env[k] = v
	}
	if t.o.Dir != "" {
		env[WorkdirEnv] = t.o.Dir
	}
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if ok, err := ch.SendRequest("env", true, ssh.Marshal(struct{ Name, Value string }{k, env[k]})); !ok || err != nil {
			return fail("setting "+k, err)
		}
	}
	termName := t.o.Term
	if termName == "" {
		termName = "xterm-256color"
	}
	w, h := t.size()
	modes := []byte{byte(ssh.ECHO), 0, 0, 0, 1, 0}
	if ok, err := ch.SendRequest("pty-req", true, ssh.Marshal(struct {
		Term                    string
		Columns, Rows, Wpx, Hpx uint32
		Modelist                string
	}{termName, uint32(w), uint32(h), 0, 0, string(modes)})); !ok || err != nil {
		return fail("requesting a terminal", err)
	}

	attached := false
	t.mu.Lock()
	noKeep, received := t.noKeep, t.received
	t.mu.Unlock()
	if !noKeep {
		t.mu.Lock()
		fresh := !t.started
		t.mu.Unlock()
		var m keepInfoMsg
		ok, err := t.askKeep(ch, c, info, received, fresh, &m)
		if err != nil {
			return fail("asking the agent to keep the command", err)
		}
		if !ok && fresh {
			// The ID may be another key's (a state folder whose key was made again) or
			// an old agent's refusal: a new ID tells them apart.
			t.id = NewKeepID()
			if t.OnKeepID != nil {
				t.OnKeepID(t.id)
			}
			if ok, err = t.askKeep(ch, c, info, received, fresh, &m); err != nil {
				return fail("asking the agent to keep the command", err)
			}
		}
		t.mu.Lock()
		switch {
		case !ok:
			// An agent without kept commands (or the ID is another key's): the command
			// runs as long as its connection.
			t.noKeep = true
			if t.started {
				t.mu.Unlock()
				t.notify("the dev command of the lost connection ended with it (this agent does not keep commands); starting it again")
				t.mu.Lock()
			}
			t.newCommandLocked()
		case m.Attached:
			attached = true
			lostIn := t.in.rewind(m.InputReceived, !t.started)
			t.pid = m.PID
			wasStarted := t.started
			t.mu.Unlock()
			msg := fmt.Sprintf("back in the dev command (pid %d), which kept running", m.PID)
			if !wasStarted {
				msg = fmt.Sprintf("attached to the dev command left running by an earlier up (pid %d)", m.PID)
			}
			if m.Lost > 0 {
				msg += fmt.Sprintf("; %s of its output while disconnected did not fit in the agent's buffer and is not shown", safefile.FormatSize(int64(m.Lost)))
			}
			if lostIn > 0 {
				msg += fmt.Sprintf("; %s of the keys typed before the drop were lost (more than %s)", safefile.FormatSize(int64(lostIn)), safefile.FormatSize(InputHold))
			}
			t.notify("%s", msg)
			t.mu.Lock()
		default:
			if t.started {
				t.mu.Unlock()
				t.notify("the dev command of the lost connection is gone (the pod was replaced, or it waited too long); starting it again")
				t.mu.Lock()
			}
			t.newCommandLocked()
		}
		t.mu.Unlock()
	} else {
		t.mu.Lock()
		again := t.started
		t.newCommandLocked()
		t.mu.Unlock()
		if again {
			t.notify("the dev command of the lost connection ended with it (this agent does not keep commands); starting it again")
		}
	}

	var startErr error
	var ok bool
	if attached || len(t.o.Command) == 0 {
		ok, startErr = ch.SendRequest("shell", true, nil)
	} else {
		// exec: the command replaces the shell, so signals and the exit status are its own.
		ok, startErr = ch.SendRequest("exec", true, ssh.Marshal(struct{ Command string }{"exec " + ShellQuote(t.o.Command)}))
	}
	if !ok || startErr != nil {
		return fail("starting the command", startErr)
	}
	t.mu.Lock()
	t.started = true
	t.mu.Unlock()

	// Output: counted as it is written, so the next attach asks for what follows.
	outDone := make(chan struct{})
	go func() {
		defer close(outDone)
		_, _ = io.Copy(countWriter{t}, ch)
	}()
	errDone := make(chan struct{})
	go func() {
		defer close(errDone)
		_, _ = io.Copy(t.o.Stdout, ch.Stderr()) // a message of the agent's (PTY output comes as data)
	}()
	stopIn := make(chan struct{})
	inDone := make(chan struct{})
	go func() {
		defer close(inDone)
		t.sendInput(ch, stopIn)
	}()
	finish := func() {
		close(stopIn)
		t.mu.Lock()
		t.cond.Broadcast()
		t.mu.Unlock()
		<-inDone
		<-outDone
		<-errDone
	}
	var winch <-chan os.Signal = t.winch
	for {
		select {
		case code := <-exit:
			finish()
			if code < 0 {
				// No exit status: the channel ended with the connection, or the agent closed
				// it (the command may still run: attach again).
				select {
				case <-c.Done():
					return ExitStatusUnknown, false, fmt.Errorf("lost the connection to the agent: %w", c.Err())
				default:
				}
				return ExitStatusUnknown, false, errors.New("the agent closed the dev command's session without an exit status")
			}
			return code, true, nil
		case <-winch:
			w, h := t.size()
			_, _ = ch.SendRequest("window-change", false, ssh.Marshal(struct{ Columns, Rows, Wpx, Hpx uint32 }{uint32(w), uint32(h), 0, 0}))
		case <-ctx.Done():
			// Stopped on purpose: the agent hangs the command up and answers once it has ended
			// (an older agent answers at once and hangs it up when the channel closes).
			release(ch, c)
			ch.Close()
			t.waitClosed(c, exit)
			finish()
			return ExitStatusUnknown, false, ctx.Err()
		case <-c.Done():
			ch.Close()
			t.waitClosed(c, exit)
			finish()
			return ExitStatusUnknown, false, fmt.Errorf("lost the connection to the agent: %w", c.Err())
		}
	}
}

// releaseWait bounds the wait for the agent's answer to a release: the agent's grace between
// hang-up and SIGKILL (5 s), and a margin.
const releaseWait = 8 * time.Second

// release asks the agent to end the command now and waits for its answer (the command is gone),
// at most releaseWait; then the channel is closed, which ends it as well.
func release(ch ssh.Channel, c *Client) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = ch.SendRequest(releaseRequest, true, nil)
	}()
	tm := time.NewTimer(releaseWait)
	defer tm.Stop()
	select {
	case <-done:
		return
	case <-c.Done():
	case <-tm.C:
	}
	ch.Close() // SendRequest returns once the agent closes its side too (or the connection ends)
	<-done
}

// askKeep sends the keep request and reads the agent's info that precedes its answer.
func (t *Terminal) askKeep(ch ssh.Channel, c *Client, info <-chan keepInfoMsg, received uint64, fresh bool, m *keepInfoMsg) (bool, error) {
	ok, err := ch.SendRequest(keepRequest, true, ssh.Marshal(keepRequestMsg{ID: t.id, Received: received, Fresh: fresh}))
	if err != nil || !ok {
		return false, err
	}
	select {
	case *m = <-info:
		return true, nil
	case <-time.After(10 * time.Second):
		return false, errors.New("no answer")
	case <-c.Done():
		return false, c.Err()
	}
}

// waitClosed waits for the agent to close the channel after ours (exit then delivers), at most
// a few seconds; then the connection is closed (everything of the channel ends with it).
func (t *Terminal) waitClosed(c *Client, exit <-chan int) {
	tm := time.NewTimer(5 * time.Second)
	defer tm.Stop()
	select {
	case <-exit:
		return
	case <-c.Done():
	case <-tm.C:
		c.Close()
	}
	<-exit
}

// PID is the command's process in the dev container (0 before an agent that keeps commands
// said it).
func (t *Terminal) PID() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return int(t.pid)
}

func (t *Terminal) size() (w, h int) {
	w, h = 80, 24
	if fd, ok := terminalFd(t.o.Stdin); ok {
		if tw, th, err := term.GetSize(fd); err == nil {
			w, h = tw, th
		}
	}
	return w, h
}

// newCommandLocked: a command starts anew, its output counted from 0 and its input from the
// first key not sent yet.
func (t *Terminal) newCommandLocked() {
	t.received = 0
	t.pid = 0
	t.in.newCommand()
}

// sendInput sends the held keys from the queue's position on until stop or a write fails;
// the end of the local input is passed on once everything before it was sent.
func (t *Terminal) sendInput(ch ssh.Channel, stop <-chan struct{}) {
	stopped := func() bool {
		select {
		case <-stop:
			return true
		default:
			return false
		}
	}
	for {
		t.mu.Lock()
		for !t.closed && !stopped() && t.in.unsent() == 0 && !(t.in.eof && !t.in.eofSent) {
			t.cond.Wait()
		}
		if t.closed || stopped() {
			t.mu.Unlock()
			return
		}
		if t.in.unsent() == 0 {
			t.in.eofSent = true
			t.mu.Unlock()
			_ = ch.CloseWrite()
			return
		}
		chunk := t.in.peek(32 << 10)
		t.mu.Unlock()
		n, err := ch.Write(chunk)
		t.mu.Lock()
		t.in.advance(n)
		t.cond.Broadcast()
		t.mu.Unlock()
		if err != nil {
			return
		}
	}
}

type countWriter struct{ t *Terminal }

func (w countWriter) Write(p []byte) (int, error) {
	n, err := w.t.o.Stdout.Write(p)
	w.t.mu.Lock()
	w.t.received += uint64(n)
	w.t.mu.Unlock()
	return n, err
}

// inputQueue holds the keys typed, by absolute position: buf holds [base, base+len(buf)),
// next is the first not sent on the current channel, cmd where the current command's input
// began (the agent counts from there).
type inputQueue struct {
	buf     []byte
	base    int64
	next    int64
	cmd     int64
	eof     bool
	eofSent bool
}

func (q *inputQueue) end() int64    { return q.base + int64(len(q.buf)) }
func (q *inputQueue) unsent() int64 { return q.end() - q.next }

func (q *inputQueue) put(p []byte) {
	q.buf = append(q.buf, p...)
	q.trim()
}

// trim drops sent keys beyond InputHold (kept for sending again after a drop).
func (q *inputQueue) trim() {
	if sent := q.next - q.base; sent > InputHold {
		drop := sent - InputHold
		q.buf = append(q.buf[:0:0], q.buf[drop:]...)
		q.base += drop
	}
}

func (q *inputQueue) peek(max int) []byte {
	from := q.next - q.base
	to := min(int64(len(q.buf)), from+int64(max))
	return append([]byte(nil), q.buf[from:to]...)
}

func (q *inputQueue) advance(n int) {
	q.next += int64(n)
	q.trim()
}

// rewind goes back to the first key the agent did not get (received of the command's input);
// fresh: this client never sent the command anything (an earlier up did): nothing is sent
// again. It returns how many keys to send again were no longer held.
func (q *inputQueue) rewind(received uint64, fresh bool) int64 {
	q.eofSent = false
	if fresh {
		q.cmd = q.next - int64(received)
		return 0
	}
	at := q.cmd + int64(received)
	at = min(at, q.next)
	var lost int64
	if at < q.base {
		lost = q.base - at
		at = q.base
	}
	q.next = at
	return lost
}

func (q *inputQueue) newCommand() {
	q.cmd = q.next
	q.eofSent = false
}

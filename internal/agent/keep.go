package agent

import (
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/crypto/ssh"
)

// A kept command is a terminal (PTY) command that outlives its connection: when the
// connection drops, the command goes on and its output is kept in a ring buffer; the client
// that started it (same public key, same keep ID) can attach a new session channel to it,
// gets the output it has not seen (as far as the ring reaches) and tells which of its keys
// arrived. A command without a client for Config.KeepFor is hung up (SIGHUP to every process
// of its terminal session, SIGKILL after hangupGrace) and reaped.
//
// The client asks for it with a keepRequest on the session channel, after pty-req and before
// shell/exec. Before its answer, the agent sends a keepInfoRequest on the channel saying
// whether a command was attached (then shell/exec start nothing) and how much of its input
// and output went through. A releaseRequest ends the command at once (the client stops on
// purpose: SIGHUP to its terminal session, SIGKILL after hangupGrace to what is left) and is
// answered once every process of it is gone, so the client closes its connection only then.
const (
	keepRequest     = "keep@devtool"
	keepInfoRequest = "keep-info@devtool"
	releaseRequest  = "release@devtool"
)

// DefaultKeepFor is how long a kept command waits for its client to come back.
const DefaultKeepFor = 10 * time.Minute

const (
	// keepRing is how much of a kept command's latest output is kept for a client that comes
	// back.
	keepRing = 256 << 10
	// maxKept bounds the kept commands of one agent (one per up; a few at most).
	maxKept = 16
	// maxKeepID bounds the length of a keep ID.
	maxKeepID = 128
	// freshTail is the output a fresh client gets again: about a screen.
	freshTail = 8 << 10
)

// hangupGrace is how long a hung-up command's processes have to end before SIGKILL.
var hangupGrace = 5 * time.Second

type keepRequestMsg struct {
	ID string
	// Received is how many bytes of the command's output the client got.
	Received uint64
	// Fresh: the client never saw this command's output (a new up attaching to the command an
	// earlier one left running): only the last freshTail bytes are sent again, and no loss
	// is counted.
	Fresh bool
}

type keepReplyMsg struct {
	// Attached: a command kept under this ID runs (or ended unseen) and this channel is now
	// its terminal; false: none, shell/exec starts one kept under this ID.
	Attached bool
	PID      uint32
	// InputReceived is how many bytes of input the command got (the client sends the rest
	// again).
	InputReceived uint64
	// Lost is how many bytes of output since Received the ring no longer holds.
	Lost uint64
}

// keeper holds the kept commands of one Serve.
type keeper struct {
	log      *slog.Logger
	keepFor  time.Duration
	children *children
	wg       sync.WaitGroup

	mu     sync.Mutex
	closed bool
	cmds   map[string]*keptCmd
}

func newKeeper(log *slog.Logger, keepFor time.Duration, ch *children) *keeper {
	if keepFor <= 0 {
		keepFor = DefaultKeepFor
	}
	return &keeper{log: log, keepFor: keepFor, children: ch, cmds: map[string]*keptCmd{}}
}

var (
	errKeepOtherKey = errors.New("kept by another key")
	errKeepFull     = errors.New("too many kept commands")
)

// lookup finds the command kept under id for key: nil (and no error) when there is none and
// one may be started under id.
func (k *keeper) lookup(id, key string) (*keptCmd, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed {
		return nil, errKeepFull
	}
	c := k.cmds[id]
	if c == nil {
		if len(k.cmds) >= maxKept {
			return nil, errKeepFull
		}
		return nil, nil
	}
	if c.key != key {
		return nil, errKeepOtherKey
	}
	return c, nil
}

// start starts cmd on a new terminal (rows x cols, modes) kept under id for key, attached to
// ch.
func (k *keeper) start(id, key string, cmd *exec.Cmd, rows, cols uint32, modes string, ch ssh.Channel) (*keptCmd, *attachment, error) {
	k.mu.Lock()
	if k.closed || len(k.cmds) >= maxKept {
		k.mu.Unlock()
		return nil, nil, errKeepFull
	}
	if old, ok := k.cmds[id]; ok && !old.isEnding() {
		k.mu.Unlock()
		return nil, nil, errors.New("a command is kept under this ID already")
	}
	ptmx, tty, err := openPTY()
	if err != nil {
		k.mu.Unlock()
		return nil, nil, err
	}
	applyModes(tty, modes)
	setSize(ptmx, rows, cols)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
	err = k.children.start(func() (int, error) {
		if err := cmd.Start(); err != nil {
			return 0, err
		}
		return cmd.Process.Pid, nil
	})
	tty.Close() // the child holds its copy
	if err != nil {
		k.mu.Unlock()
		ptmx.Close()
		return nil, nil, err
	}
	pid := cmd.Process.Pid
	// Waited for by pid (wait), never through cmd: the process may be handed to the agent
	// that replaces this one (handoff_linux.go).
	_ = cmd.Process.Release()
	c := newKept(k, id, key, pid, ptmx, openPidfd(pid))
	k.cmds[id] = c
	k.wg.Add(2)
	k.mu.Unlock()
	c.run()
	k.log.Info("kept command started", "pid", c.pid, "keep", shortID(id))
	c.mu.Lock()
	a := c.attachLocked(ch, 0)
	c.mu.Unlock()
	return c, a, nil
}

// newKept is the kept command of process pid (a session leader, the agent's child) on the
// terminal whose master is ptmx; pidfd (may be nil) tells its exit through the poller.
func newKept(k *keeper, id, key string, pid int, ptmx, pidfd *os.File) *keptCmd {
	c := &keptCmd{k: k, id: id, key: key, pid: pid, ptmx: ptmx, pidfd: pidfd,
		ring: make([]byte, keepRing), readDone: make(chan struct{}), waited: make(chan struct{}),
		waitEnd: make(chan struct{}), gone: make(chan struct{})}
	c.cond = sync.NewCond(&c.mu)
	return c
}

// run starts c's output reader and waiter (k.wg.Add(2) done by the caller, under k.mu).
func (c *keptCmd) run() {
	go func() {
		defer c.k.wg.Done()
		c.readOutput()
	}()
	go func() {
		defer c.k.wg.Done()
		c.wait()
	}()
}

// closeAll ends every kept command at once (SIGKILL) and waits for them: Serve is ending.
func (k *keeper) closeAll() {
	k.mu.Lock()
	k.closed = true
	var all []*keptCmd
	for _, c := range k.cmds {
		all = append(all, c)
	}
	k.mu.Unlock()
	for _, c := range all {
		c.end("the agent stops", endKill)
	}
	k.wg.Wait()
}

func (k *keeper) remove(c *keptCmd) {
	k.mu.Lock()
	if k.cmds[c.id] == c {
		delete(k.cmds, c.id)
	}
	k.mu.Unlock()
}

func shortID(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

// keptCmd is one kept terminal command.
type keptCmd struct {
	k    *keeper
	id   string
	key  string
	pid  int
	ptmx *os.File // non-blocking (deadlines work); never call Fd on it
	// pidfd refers to the process (pidfd_open), non-blocking in the poller: it turns readable
	// when the process exits, and a read deadline stops the waiter without reaping it (for a
	// handoff). Nil when the kernel has none: the waiter blocks in wait4 (no handoff).
	pidfd *os.File

	readDone chan struct{} // the output reader ended
	waited   chan struct{} // the process was waited for
	waitEnd  chan struct{} // the waiter ended (after waited, or stopped for a handoff)
	gone     chan struct{} // everything of it ended

	// handing: a handoff stops the reader and the waiter (their deadlines passed on purpose).
	handing atomic.Bool

	mu        sync.Mutex
	cond      *sync.Cond
	ring      []byte
	total     uint64 // output bytes produced so far; the ring holds the last keepRing of them
	att       *attachment
	exited    bool
	exitAt    uint64 // total when the command's exit was known: output after it is not sent
	res       exitResult
	ending    bool
	expiry    *time.Timer
	expiresAt time.Time

	inMu    sync.Mutex
	inTotal uint64 // input bytes written to the terminal
}

// attachment is one session channel attached to a kept command.
type attachment struct {
	c      *keptCmd
	ch     ssh.Channel
	off    uint64 // next output byte to send (c.mu)
	stale  atomic.Bool
	result chan exitResult // the command's end, once all its output was sent
	stolen chan struct{}   // closed when another channel took the command over
	wg     sync.WaitGroup
	// sentEnd: the command's end was handed to the session (c.mu).
	sentEnd bool
}

func (c *keptCmd) isEnding() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ending
}

func (c *keptCmd) ringStart() uint64 {
	if c.total < keepRing {
		return 0
	}
	return c.total - keepRing
}

// attachLocked makes ch the command's terminal from output byte received on (c.mu held; an
// offset the ring no longer holds starts at its oldest byte); the previous attachment, if
// any, is stolen.
func (c *keptCmd) attachLocked(ch ssh.Channel, received uint64) *attachment {
	if old := c.att; old != nil {
		c.detachLocked(old)
		close(old.stolen)
	}
	if c.expiry != nil {
		c.expiry.Stop()
		c.expiry = nil
	}
	received = min(received, c.total)
	if start := c.ringStart(); received < start {
		received = start
	}
	a := &attachment{c: c, ch: ch, off: received, result: make(chan exitResult, 1), stolen: make(chan struct{})}
	c.att = a
	a.wg.Add(2)
	go func() {
		defer a.wg.Done()
		a.sendOutput()
	}()
	go func() {
		defer a.wg.Done()
		a.copyInput()
	}()
	c.cond.Broadcast()
	return a
}

// reattach attaches ch to c from output byte received on, after the input written so far
// is counted (a write of the previous attachment in progress is cut short first, so the
// count is exact: the client sends the rest again). It returns false when c is ending.
func (c *keptCmd) reattach(ch ssh.Channel, received uint64, fresh bool, rows, cols uint32) (*attachment, keepReplyMsg, bool) {
	c.mu.Lock()
	if c.ending {
		c.mu.Unlock()
		return nil, keepReplyMsg{}, false
	}
	if old := c.att; old != nil {
		old.stale.Store(true)
	}
	c.mu.Unlock()
	_ = c.ptmx.SetWriteDeadline(time.Now())
	c.inMu.Lock()
	in := c.inTotal
	_ = c.ptmx.SetWriteDeadline(time.Time{})
	c.mu.Lock()
	if c.ending { // ended meanwhile (it expired)
		c.mu.Unlock()
		c.inMu.Unlock()
		return nil, keepReplyMsg{}, false
	}
	if fresh {
		received = c.total - min(c.total, freshTail)
	}
	lost := uint64(0)
	if start := c.ringStart(); received < start {
		lost = start - received
	}
	a := c.attachLocked(ch, received)
	c.mu.Unlock()
	c.inMu.Unlock()
	if rows > 0 && cols > 0 {
		setSize(c.ptmx, rows, cols) // the program redraws for the new terminal
	}
	return a, keepReplyMsg{Attached: true, PID: uint32(c.pid), InputReceived: in, Lost: lost}, true
}

func (c *keptCmd) detachLocked(a *attachment) {
	a.stale.Store(true)
	if c.att == a {
		c.att = nil
	}
	c.cond.Broadcast()
}

// detach ends a's part (its channel closes): the command is kept for keepFor, or ended now
// when release (the client ended it on purpose: hung up) or when its end was delivered (its
// terminal closed).
func (a *attachment) detach(release bool) {
	c := a.c
	c.mu.Lock()
	current := c.att == a
	c.detachLocked(a)
	if !current || c.ending {
		c.mu.Unlock()
		return
	}
	switch {
	case release:
		c.mu.Unlock()
		c.end("released by its client", endHangup)
		return
	case a.sentEnd:
		c.mu.Unlock()
		c.end("its end was delivered", endClose)
		return
	}
	c.expireLocked(c.k.keepFor)
	c.mu.Unlock()
	c.k.log.Info("kept command detached: kept until a client comes back", "pid", c.pid, "keep", shortID(c.id), "for", c.k.keepFor)
}

// expireLocked ends the command after d unless a client attaches before (c.mu held).
func (c *keptCmd) expireLocked(d time.Duration) {
	c.expiresAt = time.Now().Add(d)
	c.expiry = time.AfterFunc(d, func() { c.end("no client came back within "+c.k.keepFor.String(), endHangup) })
}

// How end treats the command's processes.
type endMode int

const (
	// endClose closes the terminal only: the command's end was delivered; what it left in
	// the background sees its terminal hung up, as after any terminal closes.
	endClose endMode = iota
	// endHangup sends SIGHUP to every process of the command's terminal session and SIGKILL
	// after hangupGrace to those left (the client released it, or none came back in time).
	endHangup
	// endKill sends SIGKILL to every process of the session at once (the agent stops).
	endKill
)

// end ends the command as mode says, closes its terminal and waits for everything of it.
func (c *keptCmd) end(why string, mode endMode) {
	c.mu.Lock()
	if c.ending {
		c.mu.Unlock()
		<-c.gone
		return
	}
	c.ending = true
	if c.expiry != nil {
		c.expiry.Stop()
		c.expiry = nil
	}
	if c.att != nil {
		c.detachLocked(c.att)
	}
	c.mu.Unlock()
	c.finish(why, mode)
}

// finish is the rest of end, once c.ending is set.
func (c *keptCmd) finish(why string, mode endMode) {
	c.k.remove(c)
	c.k.log.Info("kept command ended", "pid", c.pid, "keep", shortID(c.id), "why", why)
	switch mode {
	case endHangup:
		signalSession(c.pid, syscall.SIGHUP)
		waitSessionGone(c.pid, c.waited, hangupGrace)
		signalSession(c.pid, syscall.SIGKILL)
	case endKill:
		signalSession(c.pid, syscall.SIGKILL)
	}
	<-c.waited
	c.ptmx.Close() // ends the reader (and hangs up what still holds the terminal)
	<-c.readDone
	<-c.waitEnd
	if c.pidfd != nil {
		c.pidfd.Close()
	}
	close(c.gone)
}

// readOutput copies the terminal's output into the ring until every holder of the terminal
// is gone (EIO) or the terminal is closed. An attached client that falls keepRing behind
// holds it up (as a terminal would); without a client, the ring keeps the latest output.
func (c *keptCmd) readOutput() {
	defer close(c.readDone)
	buf := make([]byte, 32<<10)
	for {
		n, err := c.ptmx.Read(buf)
		if n > 0 {
			c.mu.Lock()
			for c.att != nil && !c.ending && c.total+uint64(n)-c.att.off > keepRing {
				c.cond.Wait()
			}
			c.appendLocked(buf[:n])
			c.cond.Broadcast()
			c.mu.Unlock()
		}
		if err != nil {
			// A handoff stops the reader with a deadline (the successor reads on).
			return
		}
	}
}

func (c *keptCmd) appendLocked(p []byte) {
	for len(p) > 0 {
		i := int(c.total % keepRing)
		n := copy(c.ring[i:], p)
		p = p[n:]
		c.total += uint64(n)
	}
}

// readLocked copies up to max bytes of output from off (within the ring).
func (c *keptCmd) readLocked(off uint64, max int) []byte {
	end := min(c.total, off+uint64(max))
	out := make([]byte, 0, end-off)
	for off < end {
		i := int(off % keepRing)
		n := min(int(end-off), keepRing-i)
		out = append(out, c.ring[i:i+n]...)
		off += uint64(n)
	}
	return out
}

// wait waits for the process and records its end once its output is read (a background
// job may hold the terminal for ever: at most ioDrainDelay more). A handoff stops it before
// the process exited (or before it is reaped: the successor reaps it).
func (c *keptCmd) wait() {
	defer close(c.waitEnd)
	if !c.watchExit() {
		return
	}
	var ws syscall.WaitStatus
	var err error
	for {
		_, err = syscall.Wait4(c.pid, &ws, 0, nil)
		if err != syscall.EINTR {
			break
		}
	}
	c.k.children.done(c.pid)
	close(c.waited)
	t := time.NewTimer(ioDrainDelay)
	select {
	case <-c.readDone:
	case <-t.C:
	}
	t.Stop()
	res := exitResult{status: 127}
	switch {
	case err != nil:
		c.k.log.Info("kept command: wait failed", "err", err)
	case ws.Signaled():
		res = exitResult{signal: signalName(ws.Signal()), core: ws.CoreDump()}
	default:
		res = exitResult{status: uint32(ws.ExitStatus())}
	}
	c.mu.Lock()
	c.exited, c.exitAt, c.res = true, c.total, res
	detached := c.att == nil && !c.ending
	c.cond.Broadcast()
	c.mu.Unlock()
	c.k.log.Info("kept command exited", "pid", c.pid, "keep", shortID(c.id), "status", res.status, "signal", res.signal, "detached", detached)
}

// sendOutput sends the output from a.off on, then the command's end, until a is detached or
// its channel fails.
func (a *attachment) sendOutput() {
	c := a.c
	for {
		c.mu.Lock()
		for !a.stale.Load() && a.off >= c.total && !(c.exited && a.off >= c.exitAt) {
			c.cond.Wait()
		}
		if a.stale.Load() {
			c.mu.Unlock()
			return
		}
		if c.exited && a.off >= c.exitAt {
			a.sentEnd = true
			a.result <- c.res
			c.mu.Unlock()
			return
		}
		if start := c.ringStart(); a.off < start {
			a.off = start // fell behind while the reader did not wait for it (never while attached)
		}
		limit := 32 << 10
		if c.exited {
			limit = int(min(uint64(limit), c.exitAt-a.off))
		}
		chunk := c.readLocked(a.off, limit)
		c.mu.Unlock()
		n, err := a.ch.Write(chunk)
		c.mu.Lock()
		if !a.stale.Load() {
			a.off += uint64(n)
		}
		c.cond.Broadcast()
		c.mu.Unlock()
		if err != nil {
			return
		}
	}
}

// copyInput writes the channel's data to the terminal, counting what was written, until the
// channel ends or a is detached (a write cut short by a reattach counts what it wrote).
func (a *attachment) copyInput() {
	c := a.c
	buf := make([]byte, 32<<10)
	for {
		n, err := a.ch.Read(buf)
		if n > 0 {
			c.inMu.Lock()
			if a.stale.Load() {
				c.inMu.Unlock()
				return
			}
			w, werr := c.ptmx.Write(buf[:n])
			c.inTotal += uint64(w)
			c.inMu.Unlock()
			if werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

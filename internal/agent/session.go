package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/crypto/ssh"
)

// ioDrainDelay bounds how long output is still copied after the command exited
// (a background child may hold its stdout forever).
const ioDrainDelay = time.Second

type ptyRequestMsg struct {
	Term     string
	Columns  uint32
	Rows     uint32
	Width    uint32
	Height   uint32
	Modelist string
}

type windowChangeMsg struct {
	Columns uint32
	Rows    uint32
	Width   uint32
	Height  uint32
}

type envMsg struct {
	Name, Value string
}

type execMsg struct {
	Command string
}

type signalMsg struct {
	Signal string
}

type exitStatusMsg struct {
	Status uint32
}

type exitSignalMsg struct {
	Signal     string
	CoreDumped bool
	Error      string
	Lang       string
}

var signals = map[string]syscall.Signal{
	"ABRT": syscall.SIGABRT, "ALRM": syscall.SIGALRM, "FPE": syscall.SIGFPE, "HUP": syscall.SIGHUP,
	"ILL": syscall.SIGILL, "INT": syscall.SIGINT, "KILL": syscall.SIGKILL, "PIPE": syscall.SIGPIPE,
	"QUIT": syscall.SIGQUIT, "SEGV": syscall.SIGSEGV, "TERM": syscall.SIGTERM, "USR1": syscall.SIGUSR1,
	"USR2": syscall.SIGUSR2, "WINCH": syscall.SIGWINCH, "CONT": syscall.SIGCONT, "STOP": syscall.SIGSTOP,
	"TSTP": syscall.SIGTSTP,
}

func signalName(s syscall.Signal) string {
	for n, v := range signals {
		if v == s {
			return n
		}
	}
	return fmt.Sprintf("SIG%d", int(s))
}

// session is one session channel: at most one command (or subsystem) runs in it.
type session struct {
	c   *connState
	ch  ssh.Channel
	env map[string]string
	pty *ptyRequestMsg

	mu      sync.Mutex
	started bool
	pid     int // process group to signal; 0 when none
	ptmx    *os.File

	// A kept command (keep.go): the ID the client asked for, the output it has, the command
	// and this channel's attachment to it, and whether the client released it.
	keepID   string
	keepRecv uint64
	kept     *keptCmd
	att      *attachment
	released bool
}

func (c *connState) session(ch ssh.Channel, reqs <-chan *ssh.Request) {
	s := &session{c: c, ch: ch, env: map[string]string{}}
	ctx, cancel := context.WithCancel(c.ctx)
	var done <-chan exitResult
	var stolen <-chan struct{}
	var wg sync.WaitGroup
	defer func() {
		cancel()
		if s.att != nil {
			// A kept command is not killed with its channel: it waits for its client (or
			// ends now when released, or when its end was delivered).
			s.att.detach(s.released)
			ch.Close()
			s.att.wg.Wait()
		}
		s.killGroup()
		wg.Wait()
		ch.Close()
	}()
	for {
		select {
		case <-stolen:
			// A new connection of the same client took the kept command over: this one is
			// dead (its client reconnected).
			c.log.Info("kept command taken over by a new connection", "pid", s.kept.pid)
			return
		case r, ok := <-reqs:
			if !ok {
				// The client closed the channel or the connection is gone: the command's
				// whole process group goes with it (deferred above).
				return
			}
			switch r.Type {
			case "env":
				var m envMsg
				if err := ssh.Unmarshal(r.Payload, &m); err != nil || m.Name == "" || strings.ContainsAny(m.Name, "=\x00") || s.isStarted() {
					reply(r, false)
					continue
				}
				s.env[m.Name] = m.Value
				reply(r, true)
			case "pty-req":
				var m ptyRequestMsg
				if err := ssh.Unmarshal(r.Payload, &m); err != nil || s.isStarted() {
					reply(r, false)
					continue
				}
				s.pty = &m
				reply(r, true)
			case "window-change":
				var m windowChangeMsg
				if err := ssh.Unmarshal(r.Payload, &m); err != nil {
					reply(r, false)
					continue
				}
				s.resize(m.Rows, m.Columns)
				reply(r, true)
			case keepRequest:
				var m keepRequestMsg
				if err := ssh.Unmarshal(r.Payload, &m); err != nil || s.isStarted() || s.pty == nil || s.keepID != "" || m.ID == "" || len(m.ID) > maxKeepID {
					reply(r, false)
					continue
				}
				ans, ok := s.keep(m)
				if !ok {
					reply(r, false)
					continue
				}
				// A channel request's answer carries no data: what the client needs to know
				// goes first as a request of ours, so it is there when the answer arrives.
				_, _ = ch.SendRequest(keepInfoRequest, false, ssh.Marshal(ans))
				reply(r, true)
				if s.att != nil {
					done, stolen = s.att.result, s.att.stolen
				}
			case releaseRequest:
				s.mu.Lock()
				s.released = true
				s.mu.Unlock()
				if s.att != nil {
					// The client stops on purpose and keeps its connection until the command
					// is gone (its ports free): end it now, answer once it has ended.
					s.att.c.end("released by its client", endHangup)
				}
				reply(r, s.keepID != "")
			case "signal":
				var m signalMsg
				if err := ssh.Unmarshal(r.Payload, &m); err != nil {
					reply(r, false)
					continue
				}
				sig, ok := signals[strings.TrimPrefix(m.Signal, "SIG")]
				reply(r, ok && s.signal(sig))
			case "shell", "exec":
				var command string
				if r.Type == "exec" {
					var m execMsg
					if err := ssh.Unmarshal(r.Payload, &m); err != nil {
						reply(r, false)
						continue
					}
					command = m.Command
				}
				if s.att != nil && !s.isStarted() {
					// Attached to a kept command: it runs already.
					s.setStarted(0)
					reply(r, true)
					continue
				}
				if s.isStarted() {
					reply(r, false)
					continue
				}
				s.setStarted(0) // env and pty-req are closed from here on
				reply(r, true)
				if s.keepID != "" {
					if res, ok := s.startKept(r.Type == "shell", command); ok {
						done, stolen = s.att.result, s.att.stolen
					} else {
						d := make(chan exitResult, 1)
						d <- res
						done = d
					}
					continue
				}
				d := make(chan exitResult, 1)
				done = d
				wg.Add(1)
				go func() {
					defer wg.Done()
					d <- s.run(r.Type == "shell", command)
				}()
			case "subsystem":
				var m execMsg
				if err := ssh.Unmarshal(r.Payload, &m); err != nil || s.isStarted() {
					reply(r, false)
					continue
				}
				if m.Command != SyncSubsystem || c.srv.cfg.Sync == nil {
					c.log.Warn("subsystem refused", "name", m.Command, "reason", subsystemRefusal(m.Command, c.srv.cfg.Sync != nil))
					reply(r, false)
					continue
				}
				s.setStarted(0)
				reply(r, true)
				d := make(chan exitResult, 1)
				done = d
				wg.Add(1)
				go func() {
					defer wg.Done()
					err := c.srv.cfg.Sync(ctx, ch)
					if err != nil && ctx.Err() == nil {
						c.log.Warn("sync subsystem ended", "err", err)
						d <- exitResult{status: 1}
						return
					}
					d <- exitResult{}
				}()
			default:
				reply(r, false)
			}
		case res := <-done:
			done, stolen = nil, nil
			if res.signal != "" {
				_, _ = ch.SendRequest("exit-signal", false, ssh.Marshal(exitSignalMsg{Signal: res.signal, CoreDumped: res.core}))
			} else {
				_, _ = ch.SendRequest("exit-status", false, ssh.Marshal(exitStatusMsg{Status: res.status}))
			}
			_ = ch.CloseWrite()
			_ = ch.Close()
			// Keep reading requests until the client closes its side.
		}
	}
}

func subsystemRefusal(name string, haveSync bool) string {
	if name != SyncSubsystem {
		return "unknown subsystem"
	}
	if !haveSync {
		return "this agent was built without the sync engine"
	}
	return ""
}

func reply(r *ssh.Request, ok bool) {
	if r.WantReply {
		_ = r.Reply(ok, nil)
	}
}

type exitResult struct {
	status uint32
	signal string
	core   bool
}

func (s *session) isStarted() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.started
}

func (s *session) setStarted(pid int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.started = true
	s.pid = pid
}

func (s *session) resize(rows, cols uint32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pty != nil {
		s.pty.Rows, s.pty.Columns = rows, cols
	}
	if s.ptmx != nil {
		setSize(s.ptmx, rows, cols)
	}
	if s.kept != nil {
		setSize(s.kept.ptmx, rows, cols)
	}
}

// signal sends sig to the command's process group.
func (s *session) signal(sig syscall.Signal) bool {
	s.mu.Lock()
	pid := s.pid
	if s.kept != nil {
		pid = s.kept.pid
	}
	s.mu.Unlock()
	if pid <= 0 {
		return false
	}
	return syscall.Kill(-pid, sig) == nil
}

func (s *session) killGroup() {
	s.mu.Lock()
	pid := s.pid
	s.mu.Unlock()
	if pid > 0 {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
}

func (s *session) environ() []string {
	env := os.Environ()
	over := map[string]string{}
	for k, v := range s.env {
		over[k] = v
	}
	if s.pty != nil && s.pty.Term != "" {
		over["TERM"] = s.pty.Term
	}
	out := env[:0:0]
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if _, ok := over[k]; !ok {
			out = append(out, kv)
		}
	}
	for k, v := range over {
		out = append(out, k+"="+v)
	}
	return out
}

// command is the shell (login) or `sh -c command`.
func (s *session) command(shell bool, command string) (*exec.Cmd, error) {
	path, err := exec.LookPath(s.c.srv.cfg.Shell)
	if err != nil {
		return nil, err
	}
	var cmd *exec.Cmd
	if shell {
		cmd = exec.Command(path)
		cmd.Args = []string{"-" + filepath.Base(path)}
	} else {
		cmd = exec.Command(path, "-c", command)
	}
	cmd.Env = s.environ()
	cmd.Dir = s.env[WorkdirEnv]
	return cmd, nil
}

// keep answers a keep request: attached to the command kept under m.ID for this client's key,
// or ready to start one under it. false refuses (another key's ID, too many kept).
func (s *session) keep(m keepRequestMsg) (keepReplyMsg, bool) {
	k := s.c.srv.keeper
	key := s.c.conn.Permissions.Extensions["fp"]
	kc, err := k.lookup(m.ID, key)
	if err != nil {
		s.c.log.Warn("keep refused", "keep", shortID(m.ID), "err", err)
		return keepReplyMsg{}, false
	}
	if kc != nil {
		a, ans, ok := kc.reattach(s.ch, m.Received, m.Fresh, s.pty.Rows, s.pty.Columns)
		if ok {
			s.mu.Lock()
			s.keepID, s.kept, s.att = m.ID, kc, a
			s.mu.Unlock()
			s.c.log.Info("kept command attached", "pid", kc.pid, "keep", shortID(m.ID), "lost", ans.Lost, "inputReceived", ans.InputReceived)
			return ans, true
		}
	}
	s.keepID, s.keepRecv = m.ID, m.Received
	return keepReplyMsg{}, true
}

// startKept starts the command kept under s.keepID on a terminal attached to this channel;
// false (with the exit to report) when it could not start.
func (s *session) startKept(shell bool, command string) (exitResult, bool) {
	cmd, err := s.command(shell, command)
	var kc *keptCmd
	var a *attachment
	if err == nil {
		kc, a, err = s.c.srv.keeper.start(s.keepID, s.c.conn.Permissions.Extensions["fp"], cmd, s.pty.Rows, s.pty.Columns, s.pty.Modelist, s.ch)
	}
	if err != nil {
		s.c.log.Info("command did not start", "err", err)
		fmt.Fprintf(s.ch.Stderr(), "devtool-agent: %v\r\n", err)
		return exitResult{status: 127}, false
	}
	s.mu.Lock()
	s.kept, s.att = kc, a
	s.mu.Unlock()
	return exitResult{}, true
}

// run starts the shell (login) or `sh -c command` and waits for it.
func (s *session) run(shell bool, command string) exitResult {
	log := s.c.log
	cmd, err := s.command(shell, command)
	if err == nil && s.pty != nil {
		err = s.runPTY(cmd)
	} else if err == nil {
		err = s.runPlain(cmd)
	}
	if err != nil && cmd != nil && cmd.ProcessState == nil || err != nil && cmd == nil {
		log.Info("command did not start", "err", err)
		fmt.Fprintf(s.ch.Stderr(), "devtool-agent: %v\r\n", err)
		s.setStarted(0)
		return exitResult{status: 127}
	}
	ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if ws.Signaled() {
		log.Info("command killed", "signal", ws.Signal().String(), "shell", shell)
		return exitResult{signal: signalName(ws.Signal()), core: ws.CoreDump()}
	}
	log.Info("command exited", "code", ws.ExitStatus(), "shell", shell)
	return exitResult{status: uint32(ws.ExitStatus())}
}

func (s *session) runPlain(cmd *exec.Cmd) error {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	cmd.Stdout = s.ch
	cmd.Stderr = s.ch.Stderr()
	cmd.WaitDelay = ioDrainDelay
	s.mu.Lock()
	s.started = true
	err = s.c.srv.children.start(func() (int, error) {
		if err := cmd.Start(); err != nil {
			return 0, err
		}
		return cmd.Process.Pid, nil
	})
	if err == nil {
		s.pid = cmd.Process.Pid
	}
	s.mu.Unlock()
	if err != nil {
		return err
	}
	defer s.c.srv.children.done(cmd.Process.Pid)
	go func() {
		// Ends at the client's EOF (the command sees its stdin end) or when the channel
		// closes; never blocks Wait.
		_, _ = io.Copy(stdin, s.ch)
		stdin.Close()
	}()
	err = cmd.Wait()
	var ee *exec.ExitError
	if errors.As(err, &ee) || errors.Is(err, exec.ErrWaitDelay) {
		return nil
	}
	return err
}

func (s *session) runPTY(cmd *exec.Cmd) error {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
	s.mu.Lock()
	s.started = true
	rows, cols := s.pty.Rows, s.pty.Columns
	if rows == 0 || cols == 0 {
		rows, cols = 24, 80
	}
	ptmx, tty, err := openPTY()
	if err == nil {
		applyModes(tty, s.pty.Modelist)
		setSize(ptmx, rows, cols)
		cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
		err = s.c.srv.children.start(func() (int, error) {
			if err := cmd.Start(); err != nil {
				return 0, err
			}
			return cmd.Process.Pid, nil
		})
		if err != nil {
			ptmx.Close()
		}
		tty.Close() // the child holds its copy
	}
	if err == nil {
		s.pid = cmd.Process.Pid
		s.ptmx = ptmx
	}
	s.mu.Unlock()
	if err != nil {
		return err
	}
	defer s.c.srv.children.done(cmd.Process.Pid)
	go func() {
		_, _ = io.Copy(ptmx, s.ch)
	}()
	out := make(chan struct{})
	go func() {
		defer close(out)
		_, _ = io.Copy(s.ch, ptmx) // ends with EIO once every holder of the terminal is gone
	}()
	err = cmd.Wait()
	select {
	case <-out:
	case <-time.After(ioDrainDelay):
	}
	s.mu.Lock()
	s.ptmx = nil
	s.mu.Unlock()
	ptmx.Close()
	<-out
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return nil
	}
	return err
}

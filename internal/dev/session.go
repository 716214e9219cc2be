package dev

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/user"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/sync/errgroup"

	"github.com/devtool/devtool/internal/devssh"
	"github.com/devtool/devtool/internal/filesync"
	"github.com/devtool/devtool/internal/manifest"
)

// SessionOptions are the inputs of Up.Run, the connection half of `devtool up`.
type SessionOptions struct {
	// TTY runs the dev command once with a PTY (its end ends Run with a *CommandEndedError);
	// otherwise the dev command runs again on each new connection.
	TTY bool
	// Command is the dev command; nil is a login shell with TTY and nothing without.
	Command []string
	// The dev command's streams (Stdin only with TTY).
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// Reset forgets the sync state: every file is compared anew.
	Reset bool
	// AcceptDeletions turns the sync's halts off for this session: an emptied or replaced
	// folder, or most of a side's files deleted at once, is carried over to the other side.
	AcceptDeletions bool
	// Folder is the manifest folder, shown to another `up` refused by this one's lease.
	Folder string
	// Force takes the dev container's lease over from another live `up` (which then stops).
	Force bool
	// Notify gets what the user may want to know besides the state changes (forwards, lost
	// and restored connections, a dev command that exited); may be nil.
	Notify func(Notice)
}

// NoticeKind says what a Notice is about.
type NoticeKind int

// The notices of a session.
const (
	// NoticeForwarding: a forward listens (once per forward, after the first connection).
	NoticeForwarding NoticeKind = iota + 1
	// NoticeLost: the connection to the agent broke; the session reconnects.
	NoticeLost
	// NoticeReconnected: the session is connected again.
	NoticeReconnected
	// NoticeCommandExited: the dev command (without TTY) exited; it runs again after the next
	// reconnect.
	NoticeCommandExited
	// NoticeTookOver: Force took the dev container over from another live `up`.
	NoticeTookOver
	// NoticeTerminal: about the dev command's terminal (attached again after a reconnect, output
	// lost meanwhile, started anew).
	NoticeTerminal
	// NoticeAgentUpgraded: an older agent was upgraded in place (or could not be).
	NoticeAgentUpgraded
)

// Notice is one sentence for the user.
type Notice struct {
	Kind    NoticeKind
	Message string
}

// CommandEndedError ends Run when the dev command run with a TTY ended; Code is its exit code.
type CommandEndedError struct{ Code int }

func (e *CommandEndedError) Error() string {
	return fmt.Sprintf("the dev command ended with code %d", e.Code)
}

// ForwardError is a forward whose local port could not be taken.
type ForwardError struct {
	Local int32
	Err   error
}

func (e *ForwardError) Error() string { return fmt.Sprintf("forward %d: %v", e.Local, e.Err) }
func (e *ForwardError) Unwrap() error { return e.Err }

// Run is `up` after the preparation: it loads the keys from the state folder, activates the dev
// container (Start), connects to its agent over SSH with the forwards, runs the sync and the
// dev command, and follows the dev container (Follow) until ctx ends (ctx's error), the dev
// command with a TTY ends (*CommandEndedError), or the dev container stops (*StoppedError).
// State changes go to Report (and Progress), everything else to o.Notify. The dev container's
// lease is held throughout (AcquireLease): another holder's refuses Run (*LeaseHeldError) unless
// o.Force, and losing it ends Run (*LeaseLostError).
func (u *Up) Run(ctx context.Context, o SessionOptions) (err error) {
	d := u.Dev
	signer, err := devssh.LoadOrCreateKey(u.State.KeyFile())
	if err != nil {
		return err
	}
	u.AuthorizedKey = ssh.MarshalAuthorizedKey(signer.PublicKey())
	// The agent's host key is made here and installed with the agent (a pod without a dev
	// volume would otherwise make a new one each time, breaking the pin on reconnect); its
	// public half is pinned whenever Install places it in a pod.
	if u.HostKey, err = devssh.MarshalKey(u.State.HostKeyFile()); err != nil {
		return err
	}
	u.KnownHostsFile = u.State.KnownHostsFile()
	notify := func(k NoticeKind, format string, args ...any) {
		if o.Notify != nil {
			o.Notify(Notice{Kind: k, Message: fmt.Sprintf(format, args...)})
		}
	}
	// One owner: the lease is taken before anything changes in the cluster, so a refused up
	// leaves the holder's dev container as it is.
	holder := Holder{ID: ssh.FingerprintSHA256(signer.PublicKey()), Host: hostUser(), Folder: o.Folder, PID: os.Getpid()}
	lease, took, err := AcquireLease(ctx, u.Kube.Clientset, u.Namespace, d.Name, holder, o.Force)
	if err != nil {
		u.fail(err)
		return err
	}
	// The lease is renewed from now on, activation (image pulls) included; losing it to a
	// --force elsewhere ends the whole session with the *LeaseLostError.
	ctx, cancelRun := context.WithCancelCause(ctx)
	keepDone := make(chan struct{})
	go func() {
		defer close(keepDone)
		if err := lease.Keep(ctx, u.logWarn); lease.Err() != nil {
			u.Report(Event{State: StateFailed, Message: err.Error()})
			cancelRun(err)
		}
	}()
	defer func() {
		cancelRun(nil)
		<-keepDone
		if lost := lease.Err(); lost != nil {
			err = lost
			return
		}
		if rerr := lease.Release(ctx); rerr != nil {
			u.logWarn("releasing the lease", "err", rerr)
		}
	}()
	if took != nil {
		u.logWarn("took the dev container over", "from", took.String())
		notify(NoticeTookOver, "took dev container %s over from %s (--force): that up stops", d.Name, took)
	}
	ready := make(chan struct{})
	var readyOnce sync.Once
	u.onReport = func(e Event) {
		if e.State == StateReady || e.State == StateHalted {
			readyOnce.Do(func() { close(ready) })
		}
	}
	defer func() { u.onReport = nil }()
	// A rebuild (Follow) reports ready again once the session is connected to the new pod.
	rebuilt := make(chan string, 1)
	u.onRebuilt = func(pod string) {
		select {
		case <-rebuilt:
		default:
		}
		rebuilt <- pod
	}
	defer func() { u.onRebuilt = nil }()
	// A dev home found new or emptied (see Up.FreshHome) makes the sync compare every file
	// anew instead of taking the files missing there for deletions to carry over.
	var (
		scMu      sync.Mutex
		sc        *filesync.Client
		freshHome bool
	)
	u.FreshHome = func(pod string) {
		scMu.Lock()
		defer scMu.Unlock()
		if sc == nil {
			freshHome = true
			return
		}
		u.logInfo("the dev home in the new pod is new or was emptied: the sync compares every file anew", "pod", pod)
		sc.Reset()
	}
	a, dialer, err := u.Start(ctx)
	if err != nil {
		return err
	}
	dialer.OnPod = func(pod string) {
		u.Report(Event{State: StateAttaching, Message: "connecting to pod " + pod})
	}

	sess := devssh.NewSession(dialer.Dial, devssh.ClientConfig{Signer: signer, KnownHostsFile: u.State.KnownHostsFile(), Logger: u.Logger})
	for _, f := range d.Forward {
		host := "127.0.0.1"
		if f.Service != "" {
			host = f.Service
		}
		if err := sess.Forward(int(f.Local), host, int(f.Remote)); err != nil {
			err = &ForwardError{Local: f.Local, Err: err}
			u.fail(err)
			return err
		}
	}
	for _, r := range d.Reverse {
		if err := sess.Reverse(int(r.Remote), net.JoinHostPort("127.0.0.1", strconv.Itoa(int(r.Local)))); err != nil {
			u.fail(err)
			return err
		}
	}

	if len(d.Sync) > 0 {
		scMu.Lock()
		c, err := filesync.NewClient(filesync.ClientOptions{Folders: syncFolders(d), StateDir: u.State.SyncDir(), Reset: o.Reset || freshHome,
			AcceptDeletions: o.AcceptDeletions, Logger: syncLogger(u.Logger)})
		sc = c
		scMu.Unlock()
		if err != nil {
			err = fmt.Errorf("the file synchronization cannot start: %w", err)
			u.fail(err)
			return err
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	svc := StatusService{Addr: ln.Addr().String(), User: "devtool", Password: NewCredential(16)}
	if err := u.State.WriteStatusService(svc); err != nil {
		ln.Close()
		return err
	}

	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { <-gctx.Done(); return ln.Close() })
	if sc != nil {
		g.Go(func() error { return filesync.ServeStatus(ln, svc.User, svc.Password, sc) })
	}
	// The connection outlives the dev command: it closes only once the dev command has stopped
	// (or commandStopWait passed), so the stop reaches the agent (sessionUntil).
	commandStopped := make(chan struct{})
	g.Go(func() error { return sessionUntil(gctx, sess, commandStopped, commandStopWait) })
	g.Go(func() error { return u.Follow(gctx, a, dialer) })
	conns := make(chan Opener, 1)
	clients := make(chan *devssh.Client, 1)
	g.Go(func() error {
		defer close(commandStopped)
		select {
		case <-ready:
		case <-gctx.Done():
			return nil
		}
		return u.devCommand(gctx, o, clients, notify)
	})
	var loop *SyncLoop
	if sc != nil {
		loop = &SyncLoop{Client: sc, Report: u.Report, Logger: syncLogger(u.Logger)}
		g.Go(func() error { return loop.Run(gctx, conns) })
	}
	// An agent older than this CLI's is upgraded in place before its connection is used.
	upg := newAgentUpgrader(u, dialer, func() string { return dialer.Active().Container }, func(format string, args ...any) {
		notify(NoticeAgentUpgraded, format, args...)
	})
	defer upg.stop()
	g.Go(func() error {
		first := true
		pendingRebuild := "" // the new pod of a rebuild, until the session is connected to it
		rebuiltReady := func() {
			pendingRebuild = ""
			if loop != nil {
				loop.reportReady("rebuilt; the dev container is ready")
				return
			}
			u.Report(Event{State: StateReady, Message: "rebuilt; the dev container is ready"})
		}
		for {
			select {
			case <-gctx.Done():
				return nil
			case pod := <-rebuilt:
				pendingRebuild = pod
				if c := sess.Client(); c != nil && c.Err() == nil && dialer.Pod() == pod {
					rebuiltReady()
				}
			case ev := <-sess.Events():
				u.logInfo("connection", "event", ev.Kind.String(), "took", ev.Duration, "attempts", ev.Attempts, "err", ev.Err)
				if ev.Client == nil {
					if ev.Kind == devssh.Lost && !upg.restarting() {
						notify(NoticeLost, "connection lost (%v); reconnecting", ev.Err)
					}
					continue
				}
				upgraded := false
				switch upg.check(gctx, ev.Client) {
				case upgradeRestarting:
					continue // the agent restarts: its next connection is the one to use
				case upgradeDone:
					upgraded = true
				}
				if first {
					for i, a := range sess.ForwardAddrs() {
						if i < len(d.Forward) {
							f := d.Forward[i]
							to := strconv.Itoa(int(f.Remote))
							if f.Service != "" {
								to = f.Service + ":" + to
							}
							notify(NoticeForwarding, "forwarding %s -> %s", a, to)
						}
					}
				} else if !upgraded {
					notify(NoticeReconnected, "reconnected to %s in %s; forwards answer again on the same ports", dialer.Pod(), ev.Duration.Round(time.Millisecond))
					if pendingRebuild != "" && dialer.Pod() == pendingRebuild {
						rebuiltReady()
					}
				}
				c := ev.Client
				if dialer.InstallSkipped() {
					// The dial went straight to the agent on the warm volume: check its version
					// beside the rest (one exec over this connection).
					pod := dialer.Pod()
					g.Go(func() error {
						if _, err := u.CheckAgent(gctx, c, pod, a.Container); err != nil && gctx.Err() == nil {
							u.logWarn("checking the agent", "err", err)
						}
						return nil
					})
				}
				select { // only the newest connection matters to the dev command
				case <-clients:
				default:
				}
				clients <- c
				if sc == nil {
					if first {
						u.Report(Event{State: StateReady, Message: "connected; the dev container is ready (nothing to synchronize)"})
					}
					first = false
					continue
				}
				first = false
				select {
				case conns <- func() (io.ReadWriteCloser, error) { return c.OpenSubsystem(SyncSubsystem) }:
				case <-gctx.Done():
					return nil
				}
			}
		}
	})
	err = g.Wait()
	if err == nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// commandStopWait bounds how long the connection waits, once up ends, for the dev command to
// stop: Exec's SIGTERM and kill (2 s), or the Terminal's release (the agent's hang-up grace, 5 s).
const commandStopWait = 10 * time.Second

// sessionUntil runs sess until ctx has ended and then until stopped is closed (at most wait
// longer): the dev command stops when ctx ends (SIGTERM through its SSH session and its exit
// awaited, or a terminal's release, which the agent answers once the command is gone), and
// that needs the connection. Closing the connection first lost the signal, and the agent, which
// learns of a closed connection through the port-forward only a second or so later, killed
// the dev command only then: an up started at once found its ports still taken. It returns
// early, with its error, when sess.Run does (a changed host key).
func sessionUntil(ctx context.Context, sess *devssh.Session, stopped <-chan struct{}, wait time.Duration) error {
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- sess.Run(sctx) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case err := <-errc:
		return err
	case <-stopped:
	case <-t.C:
	}
	cancel()
	return <-errc
}

// devCommand runs the dev command over the connections it is given until ctx ends: on a
// terminal, once, with a PTY (its end ends up: *CommandEndedError); otherwise again on each new
// connection, its output on ours. When ctx ends it stops the command (see sessionUntil) and
// returns once it has stopped, nil.
func (u *Up) devCommand(ctx context.Context, o SessionOptions, clients <-chan *devssh.Client, notify func(NoticeKind, string, ...any)) error {
	if !o.TTY && len(o.Command) == 0 {
		return nil
	}
	if o.TTY {
		return u.runTerminal(ctx, o, clients, notify)
	}
	for {
		var c *devssh.Client
		select {
		case c = <-clients:
		case <-ctx.Done():
			return nil
		}
		u.logDebug("starting the dev command", "command", o.Command)
		code, err := c.Exec(ctx, devssh.ExecOptions{Command: o.Command, Stdout: o.Stdout, Stderr: o.Stderr})
		if ctx.Err() != nil {
			u.logDebug("the dev command stopped", "code", code, "err", err)
			return nil
		}
		if err == nil {
			notify(NoticeCommandExited, "the dev command exited with code %d; it runs again after the next reconnect", code)
		}
	}
}

// runTerminal runs the dev command with a PTY over each new connection until it ends
// (*CommandEndedError) or ctx does: the agent keeps it running while the connection is down
// and each new connection attaches to it again (devssh.Terminal), the keys typed meanwhile
// delivered.
func (u *Up) runTerminal(ctx context.Context, o SessionOptions, clients <-chan *devssh.Client, notify func(NoticeKind, string, ...any)) error {
	term := devssh.NewTerminal(devssh.ExecOptions{Command: o.Command, Stdin: o.Stdin, Stdout: o.Stdout}, u.keepID(o.Command))
	term.Notify = func(s string) { notify(NoticeTerminal, "%s", s) }
	term.OnKeepID = func(id string) { u.saveKeepID(id, o.Command) }
	defer term.Close()
	var c *devssh.Client
	failures := 0 // Runs in a row that failed on a live connection
	for {
		if c == nil {
			select {
			case c = <-clients:
			case <-ctx.Done():
				return nil
			}
		}
		u.logDebug("running the dev command", "command", o.Command)
		began := time.Now()
		code, ended, err := term.Run(ctx, c)
		if time.Since(began) > time.Minute {
			failures = 0 // it ran well for a while
		}
		if ended {
			u.logInfo("the dev command ended", "code", code, "err", err)
			return &CommandEndedError{Code: code}
		}
		if ctx.Err() != nil {
			return nil
		}
		u.logInfo("the dev command's terminal is detached; attaching again on the next connection", "err", err, "pid", term.PID())
		select {
		case <-c.Done():
			c, failures = nil, 0 // the next connection comes through clients
		case <-ctx.Done():
			return nil
		case <-time.After(time.Second):
			// The connection lives on (the agent closed only the session): attach again on it,
			// a few times.
			if failures++; failures >= maxTerminalFailures {
				return fmt.Errorf("the dev command cannot run in the dev container: %w", err)
			}
		}
	}
}

// maxTerminalFailures bounds the attempts to run the dev command on a connection that stays up.
const maxTerminalFailures = 5

// keepID is the name the dev command is kept under in the agent: the one recorded in the state
// file for the same command (so an up started again after one that died attaches to the
// command it left running), else a new one.
func (u *Up) keepID(command []string) string {
	if u.State != nil {
		if r, err := u.State.ReadState(); err == nil && r.Keep != "" && r.KeepCommand == strings.Join(command, "\x00") {
			return r.Keep
		}
	}
	id := devssh.NewKeepID()
	u.saveKeepID(id, command)
	return id
}

func (u *Up) saveKeepID(id string, command []string) {
	if u.State == nil {
		return
	}
	u.stateMu.Lock()
	defer u.stateMu.Unlock()
	r, _ := u.State.ReadState()
	r.Keep, r.KeepCommand = id, strings.Join(command, "\x00")
	if err := u.State.WriteState(r); err != nil {
		u.logWarn("writing the state file", "err", err)
	}
}

// hostUser is user@host of this process, as a lease shows it.
func hostUser() string {
	h, _ := os.Hostname()
	u := "unknown"
	if cur, err := user.Current(); err == nil {
		u = cur.Username
	}
	return u + "@" + h
}

func syncFolders(d *manifest.Dev) []filesync.Folder {
	var out []filesync.Folder
	for _, s := range d.Sync {
		out = append(out, filesync.Folder{Local: s.Local, Remote: s.Remote})
	}
	return out
}

// syncLogger tags the sync engine's lines (component=sync, as the agent does) so doctor can
// collect both sides' sync logs.
func syncLogger(l *slog.Logger) *slog.Logger {
	if l == nil {
		return nil
	}
	return l.With("component", "sync")
}

func (u *Up) logInfo(msg string, args ...any) {
	if u.Logger != nil {
		u.Logger.Info(msg, args...)
	}
}

func (u *Up) logWarn(msg string, args ...any) {
	if u.Logger != nil {
		u.Logger.Warn(msg, args...)
	}
}

func (u *Up) logDebug(msg string, args ...any) {
	if u.Logger != nil {
		u.Logger.Debug(msg, args...)
	}
}

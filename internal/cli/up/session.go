package up

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/sync/errgroup"

	"github.com/devtool/devtool/internal/cmdutil"
	"github.com/devtool/devtool/internal/dev"
	"github.com/devtool/devtool/internal/devssh"
	"github.com/devtool/devtool/internal/filesync"
	"github.com/devtool/devtool/internal/manifest"
)

func runSession(ctx context.Context, opts *Options, p *prepared) error {
	d := p.dev.Dev
	signer, err := devssh.LoadOrCreateKey(p.state.KeyFile())
	if err != nil {
		return err
	}
	p.dev.AuthorizedKey = ssh.MarshalAuthorizedKey(signer.PublicKey())
	// The agent's host key is made here and installed with the agent (a pod without a dev
	// volume would otherwise make a new one each time, breaking the pin on reconnect); its
	// public half is pinned whenever Install places it in a pod.
	if p.dev.HostKey, err = devssh.MarshalKey(p.state.HostKeyFile()); err != nil {
		return err
	}
	p.dev.KnownHostsFile = p.state.KnownHostsFile()
	tty := opts.IO.CanPrompt() && opts.IO.IsStdoutTTY()
	ready := make(chan struct{})
	var readyOnce sync.Once
	p.dev.Progress = func(e dev.Event) {
		if !tty || e.State == dev.StateFailed || e.State == dev.StateReady {
			fmt.Fprintf(opts.IO.ErrOut, "%s: %s\n", e.State, e.Message)
		}
		if e.State == dev.StateReady {
			readyOnce.Do(func() { close(ready) })
		}
	}
	// A dev home found new or emptied (see dev.Up.FreshHome) makes the sync compare every file
	// anew instead of taking the files missing there for deletions to carry over.
	var (
		scMu      sync.Mutex
		sc        *filesync.Client
		freshHome bool
	)
	p.dev.FreshHome = func(pod string) {
		scMu.Lock()
		defer scMu.Unlock()
		if sc == nil {
			freshHome = true
			return
		}
		p.dev.Logger.Info("the dev home in the new pod is new or was emptied: the sync compares every file anew", "pod", pod)
		sc.Reset()
	}
	a, dialer, err := p.dev.Start(ctx)
	if err != nil {
		return err
	}
	dialer.OnPod = func(pod string) {
		p.dev.Report(dev.Event{State: dev.StateAttaching, Message: "connecting to pod " + pod})
	}

	sess := devssh.NewSession(dialer.Dial, devssh.ClientConfig{Signer: signer, KnownHostsFile: p.state.KnownHostsFile(), Logger: p.dev.Logger})
	for _, f := range d.Forward {
		host := "127.0.0.1"
		if f.Service != "" {
			host = f.Service
		}
		if err := sess.Forward(int(f.Local), host, int(f.Remote)); err != nil {
			return cmdutil.WithHint(fmt.Errorf("forward %d: %w", f.Local, err), "another program uses that port: change dev."+d.Name+".forward")
		}
	}
	for _, r := range d.Reverse {
		if err := sess.Reverse(int(r.Remote), net.JoinHostPort("127.0.0.1", strconv.Itoa(int(r.Local)))); err != nil {
			return err
		}
	}

	if len(d.Sync) > 0 {
		scMu.Lock()
		c, err := filesync.NewClient(filesync.ClientOptions{Folders: folders(d), StateDir: p.state.SyncDir(), Reset: opts.Reset || freshHome, Logger: syncLogger(p.dev.Logger)})
		sc = c
		scMu.Unlock()
		if err != nil {
			return err
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	svc := dev.StatusService{Addr: ln.Addr().String(), User: "devtool", Password: dev.NewCredential(16)}
	if err := p.state.WriteStatusService(svc); err != nil {
		ln.Close()
		return err
	}

	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM)
	defer stop()
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { <-gctx.Done(); return ln.Close() })
	if sc != nil {
		g.Go(func() error { return filesync.ServeStatus(ln, svc.User, svc.Password, sc) })
	}
	g.Go(func() error { return sess.Run(gctx) })
	g.Go(func() error { return p.dev.Follow(gctx, a, dialer) })
	conns := make(chan dev.Opener, 1)
	clients := make(chan *devssh.Client, 1)
	command := devCommand(opts, d)
	var exitCode int
	g.Go(func() error {
		// The dev command: on a terminal, once, with a PTY (its end ends up); otherwise run
		// again on each new connection, its output on ours.
		select {
		case <-ready:
		case <-gctx.Done():
			return nil
		}
		if !tty && len(command) == 0 {
			return nil
		}
		for {
			var c *devssh.Client
			select {
			case c = <-clients:
			case <-gctx.Done():
				return nil
			}
			p.dev.Logger.Debug("starting the dev command", "command", command)
			code, err := c.Exec(gctx, devssh.ExecOptions{Command: command, Stdin: stdinFor(tty, opts), Stdout: opts.IO.Out, Stderr: opts.IO.ErrOut, TTY: tty})
			if tty && err == nil {
				exitCode = code
				return errShellEnded
			}
			if gctx.Err() != nil {
				return nil
			}
			if err == nil {
				fmt.Fprintf(opts.IO.ErrOut, "the dev command exited with code %d; it runs again after the next reconnect\n", code)
			}
		}
	})
	if sc != nil {
		loop := &dev.SyncLoop{Client: sc, Report: p.dev.Report, Logger: syncLogger(p.dev.Logger)}
		g.Go(func() error { return loop.Run(gctx, conns) })
	}
	g.Go(func() error {
		first := true
		for {
			select {
			case <-gctx.Done():
				return nil
			case ev := <-sess.Events():
				p.dev.Logger.Info("connection", "event", ev.Kind.String(), "took", ev.Duration, "attempts", ev.Attempts, "err", ev.Err)
				if ev.Client == nil {
					if ev.Kind == devssh.Lost && !tty {
						fmt.Fprintf(opts.IO.ErrOut, "connection lost (%v); reconnecting\n", ev.Err)
					}
					continue
				}
				if first {
					for i, a := range sess.ForwardAddrs() {
						if i < len(d.Forward) {
							f := d.Forward[i]
							to := strconv.Itoa(int(f.Remote))
							if f.Service != "" {
								to = f.Service + ":" + to
							}
							fmt.Fprintf(opts.IO.ErrOut, "forwarding %s -> %s\n", a, to)
						}
					}
				} else {
					fmt.Fprintf(opts.IO.ErrOut, "reconnected to %s in %s; forwards answer again on the same ports\n", dialer.Pod(), ev.Duration.Round(time.Millisecond))
				}
				c := ev.Client
				if dialer.InstallSkipped() {
					// The dial went straight to the agent on the warm volume: check its version
					// beside the rest (one exec over this connection).
					pod := dialer.Pod()
					g.Go(func() error {
						if _, err := p.dev.CheckAgent(gctx, c, pod, a.Container); err != nil && gctx.Err() == nil {
							p.dev.Logger.Warn("checking the agent", "err", err)
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
						p.dev.Report(dev.Event{State: dev.StateReady, Message: "connected; the dev container is ready (nothing to synchronize)"})
					}
					first = false
					continue
				}
				first = false
				select {
				case conns <- func() (io.ReadWriteCloser, error) { return c.OpenSubsystem(dev.SyncSubsystem) }:
				case <-gctx.Done():
					return nil
				}
			}
		}
	})
	err = g.Wait()
	var stopped *dev.StoppedError
	switch {
	case errors.Is(err, errShellEnded):
		if exitCode != 0 {
			return &cmdutil.ExitStatus{Code: exitCode}
		}
		return nil
	case errors.As(err, &stopped):
		fmt.Fprintf(opts.IO.ErrOut, "%s: stopping\n", stopped.Error())
		return nil
	case errors.Is(err, context.Canceled) || ctx.Err() != nil:
		fmt.Fprintf(opts.IO.ErrOut, "Stopped. The dev container %s stays active: 'devtool exec %s -- CMD' works; 'devtool down %s' ends it\n", d.Name, d.Name, d.Name)
		return nil
	}
	return err
}

func folders(d *manifest.Dev) []filesync.Folder {
	var out []filesync.Folder
	for _, s := range d.Sync {
		out = append(out, filesync.Folder{Local: s.Local, Remote: s.Remote})
	}
	return out
}

var errShellEnded = errors.New("the dev command ended")

// devCommand is --command (shell text), else the dev entry's command; nil means a login
// shell on a terminal and nothing without one.
func devCommand(opts *Options, d *manifest.Dev) []string {
	if opts.Command != "" {
		return []string{"sh", "-c", opts.Command}
	}
	return d.Command
}

func stdinFor(tty bool, opts *Options) io.Reader {
	if tty {
		return opts.IO.In
	}
	return nil
}

// syncLogger tags the sync engine's lines (component=sync, as the agent does) so doctor can
// collect both sides' sync logs.
func syncLogger(l *slog.Logger) *slog.Logger {
	if l == nil {
		return nil
	}
	return l.With("component", "sync")
}

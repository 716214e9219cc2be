package up

import (
	"context"
	"errors"
	"fmt"
	"os/signal"
	"syscall"

	"github.com/devtool/devtool/internal/cmdutil"
	"github.com/devtool/devtool/internal/dev"
	"github.com/devtool/devtool/internal/manifest"
)

func run(ctx context.Context, opts *Options) error {
	p, err := prepare(ctx, opts)
	if err != nil {
		return err
	}
	defer p.state.Unlock()
	defer p.log.Close()
	err = runSession(ctx, opts, p)
	// Ctrl-C while the dev container was being activated: the original may be at zero
	// replicas. main prints "Interrupted."; say first what is left and how to restore it.
	var ie *dev.InterruptedError
	if errors.As(err, &ie) {
		fmt.Fprintf(opts.IO.ErrOut, "%s may be left at zero replicas (the dev container %s was being activated): 'devtool down %s' restores it.\n", ie.Original, ie.Dev, ie.Dev)
	}
	return err
}

// runSession runs the session (dev.Up.Run) and says on stderr what happens: every state change
// without a terminal, only failed and ready on one (the dev shell owns it).
func runSession(ctx context.Context, opts *Options, p *prepared) error {
	d := p.dev.Dev
	tty := opts.IO.CanPrompt() && opts.IO.IsStdoutTTY()
	// On a terminal the dev command's terminal is in raw mode from its start on: a line ends
	// with \r\n there.
	eol := "\n"
	if tty {
		eol = "\r\n"
	}
	p.dev.Progress = func(e dev.Event) {
		if !tty || e.State == dev.StateFailed || e.State == dev.StateReady || e.State == dev.StateHalted {
			fmt.Fprintf(opts.IO.ErrOut, "%s: %s%s", e.State, e.Message, eol)
		}
		if e.State == dev.StateHalted {
			fmt.Fprintf(opts.IO.ErrOut, "%s%s", dev.HaltHint(d.Name), eol)
		}
	}
	if opts.AcceptDeletions {
		fmt.Fprintf(opts.IO.ErrOut, "Deletions are accepted for this up (--accept-deletions): an emptied or replaced folder is carried over to the other side. Start up without it afterwards.%s", eol)
	}
	so := dev.SessionOptions{TTY: tty, Command: devCommand(opts, d), Stdin: opts.IO.In, Stdout: opts.IO.Out, Stderr: opts.IO.ErrOut, Reset: opts.Reset,
		AcceptDeletions: opts.AcceptDeletions, Folder: p.project.Dir, Force: opts.Force,
		Notify: func(n dev.Notice) {
			if tty {
				// Over the dev command's output: one bracketed line, on a line of its own.
				switch n.Kind {
				case dev.NoticeLost:
					fmt.Fprintf(opts.IO.ErrOut, "\r\n[devtool] %s; the dev command goes on in the pod, keys typed now are sent once it is back\r\n", n.Message)
				case dev.NoticeReconnected:
					// The terminal's own notice follows (back in the dev command, or started anew).
				default:
					fmt.Fprintf(opts.IO.ErrOut, "\r\n[devtool] %s\r\n", n.Message)
				}
				return
			}
			fmt.Fprintln(opts.IO.ErrOut, n.Message)
		}}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM)
	defer stop()
	err := p.dev.Run(ctx, so)
	var (
		stopped *dev.StoppedError
		ended   *dev.CommandEndedError
		fwd     *dev.ForwardError
		held    *dev.LeaseHeldError
		lost    *dev.LeaseLostError
	)
	switch {
	case errors.As(err, &ended):
		if ended.Code != 0 {
			return &cmdutil.ExitStatus{Code: ended.Code}
		}
		return nil
	case errors.As(err, &stopped):
		fmt.Fprintf(opts.IO.ErrOut, "%s: stopping\n", stopped.Error())
		return nil
	case errors.As(err, &held):
		return cmdutil.WithHint(err, "stop that up first, or take the dev container over with 'devtool up "+d.Name+" --force' (that up then stops)")
	case errors.As(err, &lost):
		return cmdutil.WithHint(err, "run 'devtool up "+d.Name+" --force' to take it back")
	case errors.As(err, &fwd):
		return cmdutil.WithHint(err, "another program uses that port: change dev."+d.Name+".forward")
	case errors.As(err, new(*dev.InterruptedError)):
		// Ctrl-C while activating: run says what may be left; main prints "Interrupted." (exit 130).
		return err
	case errors.Is(err, context.Canceled) || ctx.Err() != nil:
		fmt.Fprintf(opts.IO.ErrOut, "Stopped. The dev container %s stays active: 'devtool exec %s -- CMD' works; 'devtool down %s' ends it\n", d.Name, d.Name, d.Name)
		return nil
	}
	return err
}

// devCommand is --command (shell text), else the dev entry's command; nil means a login
// shell on a terminal and nothing without one.
func devCommand(opts *Options, d *manifest.Dev) []string {
	if opts.Command != "" {
		return []string{"sh", "-c", opts.Command}
	}
	return d.Command
}

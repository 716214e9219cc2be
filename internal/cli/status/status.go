// Package status implements `devtool status`.
package status

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/spf13/cobra"

	"github.com/devtool/devtool/internal/cmdutil"
	"github.com/devtool/devtool/internal/contexts"
	"github.com/devtool/devtool/internal/dev"
	"github.com/devtool/devtool/internal/iostreams"
)

// Options are the inputs of `devtool status`.
type Options struct {
	IO      *iostreams.IOStreams
	WorkDir string
	Environ map[string]string
	Getenv  func(string) string
	Target  func(cmdutil.KubeFlags) (*cmdutil.Target, error)

	Kube     cmdutil.KubeFlags
	Env      cmdutil.EnvFlags
	Dev      string
	Info     bool
	Watch    bool
	Interval time.Duration
}

// NewCmd builds the command. runF replaces run in tests of flag parsing.
func NewCmd(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IOStreams, Target: f.Target, WorkDir: f.WorkDir, Environ: cmdutil.EnvironMap(f.Environ), Getenv: f.Getenv, Interval: time.Second}
	cmd := &cobra.Command{
		Use:   "status [devName]",
		Short: "Show the file synchronization of a running 'devtool up'",
		Long: `Status asks the local sync service of the 'devtool up' running for this folder how far the file
synchronization is, as a percentage (100.00% when both sides are equal), with pending files, conflicts
(both versions kept) and errors. --watch updates it in place; --info prints the sync service's address,
user name and password (generated per dev container, stored 0600 under ~/.devtool).`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				opts.Dev = args[0]
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return run(cmd.Context(), opts)
		},
	}
	opts.Kube.AddFlags(cmd)
	opts.Env.AddFlags(cmd, "")
	cmd.Flags().BoolVar(&opts.Info, "info", false, "print the local sync service's address, user and password")
	cmd.Flags().BoolVarP(&opts.Watch, "watch", "w", false, "keep updating until interrupted")
	return cmd
}

func run(ctx context.Context, opts *Options) error {
	// The status comes from the local sync service alone, but an explicit --context or
	// --namespace is still checked, never silently ignored.
	if (opts.Kube.Context != "" || opts.Kube.Namespace != "") && opts.Target != nil {
		if _, err := opts.Target(opts.Kube); err != nil {
			return err
		}
	}
	s, err := cmdutil.Interruptible(ctx, func() (*dev.Selection, error) {
		return dev.LoadDev(dev.LoadOptions{Env: opts.Env.Options(opts.WorkDir, opts.Environ), Name: opts.Dev, Usage: "devtool status NAME"})
	})
	if err != nil {
		return err
	}
	p, d := s.Project, s.Dev
	home, err := contexts.HomeDir(opts.Getenv)
	if err != nil {
		return err
	}
	sd := &dev.StateDir{Path: dev.StateDirPath(home, p.Dir, d.Name)}
	if err := sd.Check(); err != nil {
		return err
	}
	svc, err := sd.ReadStatusService()
	if errors.Is(err, fs.ErrNotExist) || (err == nil && sd.Holder() == 0) {
		return cmdutil.WithHint(fmt.Errorf("no 'devtool up' is running for dev container %s in this folder", d.Name), "start it with 'devtool up "+d.Name+"'")
	}
	if err != nil {
		return err
	}
	if opts.Info {
		fmt.Fprintf(opts.IO.Out, "address:  http://%s/\nuser:     %s\npassword: %s\n", svc.Addr, svc.User, svc.Password)
		return nil
	}
	for {
		st, err := dev.FetchStatus(ctx, svc)
		if err != nil {
			return err
		}
		line := format(st)
		if opts.Watch && opts.IO.IsStdoutTTY() {
			fmt.Fprintf(opts.IO.Out, "\r\033[K%s", line)
		} else {
			fmt.Fprintln(opts.IO.Out, line)
		}
		if !opts.Watch {
			return nil
		}
		select {
		case <-ctx.Done():
			if opts.IO.IsStdoutTTY() {
				fmt.Fprintln(opts.IO.Out)
			}
			return nil
		case <-time.After(opts.Interval):
		}
	}
}

func format(st dev.SyncStatus) string {
	pending, conflicts, errs := 0, 0, 0
	for _, f := range st.Folders {
		pending += f.Pending
		conflicts += len(f.Conflicts)
		errs += len(f.Errors)
	}
	s := fmt.Sprintf("%.2f%%", st.Percent)
	if !st.Connected {
		s += " (disconnected)"
	}
	if pending > 0 {
		s += fmt.Sprintf(", %d pending", pending)
	}
	if conflicts > 0 {
		s += fmt.Sprintf(", %d conflicts", conflicts)
	}
	if errs > 0 {
		s += fmt.Sprintf(", %d errors", errs)
	}
	return s
}

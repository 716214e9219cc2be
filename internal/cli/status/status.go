// Package status implements `devtool status`.
package status

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
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
	Output   string // -o json
}

// NewCmd builds the command. runF replaces run in tests of flag parsing.
func NewCmd(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IOStreams, Target: f.Target, WorkDir: f.WorkDir, Environ: cmdutil.EnvironMap(f.Environ), Getenv: f.Getenv, Interval: time.Second}
	cmd := &cobra.Command{
		Use:   "status [devName]",
		Short: "Show the file synchronization of a running 'devtool up'",
		Long: `Status asks the local sync service of the 'devtool up' running for this folder how far the file
synchronization is, as a percentage (100.00% when both sides are equal), with pending files, conflicts
(both versions kept) and errors, then each conflict and each path that fails to synchronize. When up
reported the failed state (the synchronization cannot start, the dev container was taken over) its
reason comes first. A folder whose synchronization halted (it was found emptied or replaced, or most
of its files were deleted at once: nothing is deleted on the other side) is named with what was seen,
followed by how to go on: 'devtool up --reset' or 'devtool up --accept-deletions'. --watch updates the summary in place; -o json prints up's state and the sync
service's whole answer; --info prints the sync service's address, user name and password (generated
per dev container, stored 0600 under ~/.devtool).`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				opts.Dev = args[0]
			}
			if opts.Output != "" && opts.Output != "json" {
				return cmdutil.FlagErrorf("-o %q: expected json", opts.Output)
			}
			if opts.Output != "" && opts.Watch {
				return cmdutil.FlagErrorf("-o json and --watch cannot be combined")
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
	cmd.Flags().StringVarP(&opts.Output, "output", "o", "", "output format: json")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"json"}, cobra.ShellCompDirectiveNoFileComp))
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
	rec, _ := sd.ReadState() // what up reported last (a missing file: nothing yet)
	if opts.Output == "json" {
		st, err := dev.FetchStatus(ctx, svc)
		if err != nil {
			return err
		}
		return printJSON(opts.IO.Out, rec, st)
	}
	if rec.State == dev.StateFailed {
		fmt.Fprintf(opts.IO.Out, "failed: %s\n", rec.Message)
	}
	for {
		st, err := dev.FetchStatus(ctx, svc)
		if err != nil {
			return err
		}
		line := format(st)
		if !opts.Watch {
			fmt.Fprintln(opts.IO.Out, line)
			for _, l := range details(st) {
				fmt.Fprintln(opts.IO.Out, l)
			}
			for _, f := range st.Folders {
				if f.Halted != "" {
					fmt.Fprintln(opts.IO.Out, dev.HaltHint(d.Name))
					break
				}
			}
			return nil
		}
		if opts.IO.IsStdoutTTY() {
			fmt.Fprintf(opts.IO.Out, "\r\033[K%s", line)
		} else {
			fmt.Fprintln(opts.IO.Out, line)
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

// details lists each conflict, each path that fails and some of those pending, per folder.
func details(st dev.SyncStatus) []string {
	var out []string
	for _, f := range st.Folders {
		for _, c := range f.Conflicts {
			if c.Copy == "" {
				out = append(out, fmt.Sprintf("  conflict  %s: %s", filepath.Join(f.Local, c.Path), c.Reason))
				continue
			}
			out = append(out, fmt.Sprintf("  conflict  %s: both changed; the other version is kept as %s", filepath.Join(f.Local, c.Path), c.Copy))
		}
		for _, e := range f.Errors {
			line := fmt.Sprintf("  failing   %s: %s", filepath.Join(f.Local, e.Path), e.Err)
			if e.Failures > 0 {
				line += fmt.Sprintf(" (failed %d times", e.Failures)
				if e.NextTry != nil {
					line += ", next try " + e.NextTry.Local().Format("15:04:05")
				}
				line += ")"
			}
			out = append(out, line)
		}
		for i, p := range f.Waiting {
			line := fmt.Sprintf("  waiting   %s", filepath.Join(f.Local, p))
			if i == len(f.Waiting)-1 && f.Pending > len(f.Waiting) {
				line += fmt.Sprintf(" (and %d more)", f.Pending-len(f.Waiting))
			}
			out = append(out, line)
		}
	}
	return out
}

// printJSON writes up's last state and the sync service's answer as it came (so fields the
// engine adds, as halts, appear without a change here).
func printJSON(w io.Writer, rec dev.StateRecord, st dev.SyncStatus) error {
	doc := struct {
		State   dev.State       `json:"state,omitempty"`
		Message string          `json:"message,omitempty"`
		Sync    json.RawMessage `json:"sync"`
	}{rec.State, rec.Message, st.Raw}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
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
	for _, f := range st.Folders {
		if f.Halted != "" {
			s += fmt.Sprintf(", sync of %s halted: %s", f.Local, f.Halted)
		}
	}
	return s
}

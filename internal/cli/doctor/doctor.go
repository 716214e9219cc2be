// Package doctor implements `devtool doctor`.
package doctor

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/devtool/devtool/internal/buildinfo"
	"github.com/devtool/devtool/internal/cmdutil"
	"github.com/devtool/devtool/internal/contexts"
	"github.com/devtool/devtool/internal/dev"
	"github.com/devtool/devtool/internal/iostreams"
)

// Options are the inputs of `devtool doctor`.
type Options struct {
	IO     *iostreams.IOStreams
	Target func(cmdutil.KubeFlags) (*cmdutil.Target, error)
	// StoredSecrets reads the platform's stored secrets (nil: none): their values are redacted from
	// the report wherever they appear (a dev command's log may print its environment).
	StoredSecrets func(context.Context, cmdutil.KubeFlags) (map[string]string, error)
	WorkDir       string
	Environ       map[string]string
	Getenv        func(string) string
	Now           func() time.Time

	Kube cmdutil.KubeFlags
	Env  cmdutil.EnvFlags
	Dev  string
}

// NewCmd builds the command. runF replaces run in tests of flag parsing.
func NewCmd(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IOStreams, Target: f.Target, StoredSecrets: f.StoredSecrets, WorkDir: f.WorkDir, Environ: cmdutil.EnvironMap(f.Environ), Getenv: f.Getenv, Now: time.Now}
	cmd := &cobra.Command{
		Use:   "doctor [devName]",
		Short: "Write a zip with what is needed to diagnose a dev container",
		Long: `Doctor writes devtool-doctor-<name>-<time>.zip in the current folder: the tool's log, the local and
remote sync logs, a summary of the dev entry (environment values removed), the dev pods' conditions
and events, and the OS and architecture. Keys, tokens, passwords and secret values are left out.`,
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
	return cmd
}

func run(ctx context.Context, opts *Options) error {
	// The target is optional here: a report without cluster information is still useful.
	s, err := cmdutil.Interruptible(ctx, func() (*dev.Selection, error) {
		return dev.LoadDev(dev.LoadOptions{Env: opts.Env.Options(opts.WorkDir, opts.Environ), Name: opts.Dev, Usage: "devtool doctor NAME"})
	})
	if err != nil {
		return err
	}
	p, d := s.Project, s.Dev
	home, err := contexts.HomeDir(opts.Getenv)
	if err != nil {
		return err
	}
	sd, err := dev.OpenStateDir(home, p.Dir, d.Name)
	if err != nil {
		return err
	}
	o := dev.DoctorOptions{Dev: d, State: sd, Version: buildinfo.Version, Now: opts.Now()}
	if t, err := opts.Target(opts.Kube); err == nil {
		o.Client, o.Exec, o.Namespace = t.Kube.Clientset, t.Kube, t.Namespace
		o.Secrets = append(o.Secrets, t.Token, t.Kube.Config.BearerToken, t.Kube.Config.Password)
		// The platform's stored secrets never appear in the report: their values are redacted.
		if vals, err := cmdutil.LoadStoredSecrets(ctx, opts.StoredSecrets, opts.Kube); err != nil {
			fmt.Fprintf(opts.IO.ErrOut, "Warning: no cluster information in the report: the platform's stored secrets, which the report must leave out, could not be read: %v\n", err)
			o.Client, o.Exec = nil, nil
		} else {
			for _, v := range vals {
				o.Secrets = append(o.Secrets, v)
			}
		}
	} else {
		fmt.Fprintf(opts.IO.ErrOut, "Warning: no cluster information in the report: %v\n", err)
	}
	name := filepath.Join(opts.WorkDir, fmt.Sprintf("devtool-doctor-%s-%s.zip", d.Name, o.Now.UTC().Format("20060102-150405")))
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("creating the report: %w", err)
	}
	if err := dev.WriteDoctor(ctx, f, o); err != nil {
		f.Close()
		os.Remove(name)
		return fmt.Errorf("writing the report: %w", err)
	}
	if err := f.Close(); err != nil {
		os.Remove(name)
		return err
	}
	fmt.Fprintln(opts.IO.Out, name)
	return nil
}

// Package down implements `devtool down`.
package down

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/devtool/devtool/internal/cmdutil"
	"github.com/devtool/devtool/internal/contexts"
	"github.com/devtool/devtool/internal/dev"
	"github.com/devtool/devtool/internal/iostreams"
)

// Options are the inputs of `devtool down`.
type Options struct {
	IO      *iostreams.IOStreams
	Target  func(cmdutil.KubeFlags) (*cmdutil.Target, error)
	WorkDir string
	Environ map[string]string
	Getenv  func(string) string

	Kube    cmdutil.KubeFlags
	Env     cmdutil.EnvFlags
	Dev     string
	Volumes bool
}

// NewCmd builds the command. runF replaces run in tests of flag parsing.
func NewCmd(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IOStreams, Target: f.Target, WorkDir: f.WorkDir, Environ: cmdutil.EnvironMap(f.Environ), Getenv: f.Getenv}
	cmd := &cobra.Command{
		Use:   "down [devName]",
		Short: "Stop a dev container and restore the original workload",
		Long: `Down deletes the dev container's workload (<name>-devtool) and restores the original exactly: its
replica count and spec as before 'devtool up', the dev annotations removed. It needs nothing but the
cluster: it works from another machine or after 'up' was killed. --volumes also deletes the dev
container's volume (the synced files and the agent), so the next 'up' starts cold.`,
		Example: `  devtool down
  devtool down api --volumes`,
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
	cmd.Flags().BoolVar(&opts.Volumes, "volumes", false, "also delete the dev container's volume")
	return cmd
}

func run(ctx context.Context, opts *Options) error {
	s, err := cmdutil.Interruptible(ctx, func() (*dev.Selection, error) {
		return dev.LoadDev(dev.LoadOptions{Env: opts.Env.Options(opts.WorkDir, opts.Environ), Name: opts.Dev,
			Usage: "devtool down NAME", Target: func() (*cmdutil.Target, error) { return opts.Target(opts.Kube) }})
	})
	if err != nil {
		return err
	}
	p, d, t := s.Project, s.Dev, s.Target
	res, err := dev.Down(ctx, dev.DownOptions{Client: t.Kube.Clientset, Namespace: t.Namespace, Dev: d, Volumes: opts.Volumes})
	if err != nil {
		return err
	}
	if home, herr := contexts.HomeDir(opts.Getenv); herr == nil {
		sd := dev.StateDirPath(home, p.Dir, d.Name)
		if opts.Volumes {
			// The agent's host key lived on the volume: the next one is new.
			_ = os.Remove(sd + "/known_hosts")
		}
		_ = os.Remove(sd + "/state.json")
	}
	switch {
	case len(res.Mirrors) == 0 && len(res.Restored) == 0:
		fmt.Fprintf(opts.IO.ErrOut, "Dev container %s is not active in namespace %s\n", d.Name, t.Namespace)
	default:
		if len(res.Restored) > 0 {
			fmt.Fprintf(opts.IO.ErrOut, "Restored %s\n", strings.Join(res.Restored, ", "))
		}
		fmt.Fprintf(opts.IO.ErrOut, "Dev container %s stopped in namespace %s\n", d.Name, t.Namespace)
	}
	if len(res.VolumeDeleted) > 0 {
		fmt.Fprintf(opts.IO.ErrOut, "Deleted volume %s\n", strings.Join(res.VolumeDeleted, ", "))
	}
	return nil
}

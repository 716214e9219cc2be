// Package restart implements `devtool restart`.
package restart

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/devtool/devtool/internal/cmdutil"
	"github.com/devtool/devtool/internal/dev"
	"github.com/devtool/devtool/internal/iostreams"
)

// Options are the inputs of `devtool restart`.
type Options struct {
	IO      *iostreams.IOStreams
	Target  func(cmdutil.KubeFlags) (*cmdutil.Target, error)
	WorkDir string
	Environ map[string]string
	Now     func() time.Time

	Kube cmdutil.KubeFlags
	Env  cmdutil.EnvFlags
	Dev  string
}

// NewCmd builds the command. runF replaces run in tests of flag parsing.
func NewCmd(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IOStreams, Target: f.Target, WorkDir: f.WorkDir, Environ: cmdutil.EnvironMap(f.Environ), Now: time.Now}
	cmd := &cobra.Command{
		Use:   "restart [devName]",
		Short: "Restart the services a dev container works with",
		Long: `Restart does a rollout restart of the services listed under dev.<name>.services in devtool.yml
(for example the workers that load the code you edit) and names each one it restarted.`,
		Example: `  devtool restart
  devtool restart api`,
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
	// Where it runs first: an explicit --context or --namespace that names nothing is the error,
	// whatever else is wrong.
	t, err := opts.Target(opts.Kube)
	if err != nil {
		return err
	}
	s, err := cmdutil.Interruptible(ctx, func() (*dev.Selection, error) {
		return dev.LoadDev(dev.LoadOptions{Env: opts.Env.Options(opts.WorkDir, opts.Environ), Name: opts.Dev, Usage: "devtool restart NAME"})
	})
	if err != nil {
		return err
	}
	d := s.Dev
	services := d.Services
	if len(services) == 0 {
		return cmdutil.WithHint(fmt.Errorf("dev container %s lists no services to restart", d.Name),
			fmt.Sprintf("add them to devtool.yml: dev: {%s: {services: [worker]}}", d.Name))
	}
	done, err := dev.Restart(ctx, t.Kube.Clientset, t.Namespace, services, opts.Now())
	for _, w := range done {
		fmt.Fprintf(opts.IO.ErrOut, "Restarted %s\n", w)
	}
	return err
}

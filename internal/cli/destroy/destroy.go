// Package destroy implements `devtool destroy`.
package destroy

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/devtool/devtool/internal/cmdutil"
	"github.com/devtool/devtool/internal/environment"
	"github.com/devtool/devtool/internal/iostreams"
)

// Options are the inputs of `devtool destroy`.
type Options struct {
	IO     *iostreams.IOStreams
	Target func(cmdutil.KubeFlags) (*cmdutil.Target, error)
	// StoredSecrets reads the platform's stored secrets (nil: none): ${NAME} and the destroy commands' environment.
	StoredSecrets func(context.Context, cmdutil.KubeFlags) (map[string]string, error)
	WorkDir       string
	Environ       map[string]string

	Kube    cmdutil.KubeFlags
	Env     cmdutil.EnvFlags
	Volumes bool
	Wait    bool
	All     bool
	Timeout time.Duration
	NoBash  bool

	Logger *slog.Logger
}

// NewCmd builds the command. runF replaces run in tests of flag parsing.
func NewCmd(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IOStreams, Target: f.Target, StoredSecrets: f.StoredSecrets, WorkDir: f.WorkDir, Environ: cmdutil.EnvironMap(f.Environ), Logger: f.Logger}
	cmd := &cobra.Command{
		Use:   "destroy",
		Short: "Destroy what deploy created",
		Long: `Destroy runs the destroy commands of the environment's devtool.yml (when there is one), then
deletes every object labelled for the environment (dev.devtool/deployed-by), then its state record.
--name works without a manifest. Objects annotated dev.devtool/policy: keep are never touched; volumes (PVCs) are
deleted only with --volumes.`,
		Example: `  devtool destroy
  devtool destroy --name shop --volumes --wait
  devtool destroy --all --namespace dev`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.All && opts.Env.Name != "" {
				return cmdutil.FlagErrorf("--all and --name cannot be used together")
			}
			if opts.Timeout <= 0 {
				return cmdutil.FlagErrorf("--timeout must be positive, got %s", opts.Timeout)
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return run(cmd.Context(), opts)
		},
	}
	opts.Kube.AddFlags(cmd)
	opts.Env.AddFlags(cmd, "path to the devtool.yml or Compose file, used to find the environment name and the destroy commands")
	cmd.Flags().BoolVar(&opts.Volumes, "volumes", false, "also delete the environment's volumes (PVCs)")
	cmd.Flags().BoolVar(&opts.Wait, "wait", false, "wait until the deleted objects are gone")
	cmd.Flags().BoolVar(&opts.All, "all", false, "destroy every environment in the namespace")
	cmd.Flags().DurationVar(&opts.Timeout, "timeout", 5*time.Minute, "how long to wait")
	cmd.Flags().BoolVar(&opts.NoBash, "no-bash", false, "run the destroy commands with sh -c instead of bash -c")
	return cmd
}

func run(ctx context.Context, opts *Options) error {
	secrets, err := cmdutil.LoadStoredSecrets(ctx, opts.StoredSecrets, opts.Kube)
	if err != nil {
		return err
	}
	eo := opts.Env.Options(opts.WorkDir, opts.Environ)
	eo.AllowMissing, eo.Secrets = true, secrets
	env, err := cmdutil.Interruptible(ctx, func() (*environment.Environment, error) { return environment.Load(eo) })
	if err != nil {
		return err
	}
	target, err := opts.Target(opts.Kube)
	if err != nil {
		return err
	}
	shell := "bash"
	if opts.NoBash {
		shell = "sh"
	}
	d := &environment.Deployer{
		Env: env, Target: target, Environ: opts.Environ, Secrets: secrets, Logger: opts.Logger,
		Wait: opts.Wait, Timeout: opts.Timeout, Volumes: opts.Volumes, Shell: shell, Out: opts.IO.ErrOut,
		Progress: func(s string) { fmt.Fprintln(opts.IO.ErrOut, s) },
		Warn:     func(s string) { fmt.Fprintf(opts.IO.ErrOut, "Warning: %s\n", s) },
	}
	if opts.All {
		names, err := d.DestroyAll(ctx)
		for _, n := range names {
			fmt.Fprintf(opts.IO.ErrOut, "Environment %s destroyed in namespace %s\n", n, target.Namespace)
		}
		if err == nil && len(names) == 0 {
			fmt.Fprintf(opts.IO.ErrOut, "No environment is deployed in namespace %s\n", target.Namespace)
		}
		return err
	}
	res, err := d.Destroy(ctx)
	if err != nil {
		return err
	}
	if res.Nothing {
		fmt.Fprintf(opts.IO.ErrOut, "Nothing to destroy for %s in namespace %s\n", env.Name, target.Namespace)
		return nil
	}
	fmt.Fprintf(opts.IO.ErrOut, "Environment %s destroyed in namespace %s\n", env.Name, target.Namespace)
	return nil
}

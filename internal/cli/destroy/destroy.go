// Package destroy implements `devtool destroy`.
package destroy

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/devtool/devtool/internal/cmdutil"
	"github.com/devtool/devtool/internal/composeenv"
	"github.com/devtool/devtool/internal/deploy"
	"github.com/devtool/devtool/internal/iostreams"
	"github.com/devtool/devtool/internal/manifest"
)

// Options are the inputs of `devtool destroy`.
type Options struct {
	IO      *iostreams.IOStreams
	Target  func(cmdutil.KubeFlags) (*cmdutil.Target, error)
	WorkDir string
	Environ map[string]string

	Kube    cmdutil.KubeFlags
	File    string
	Name    string
	Volumes bool
	Wait    bool
	All     bool
	Timeout time.Duration
	NoBash  bool

	Logger *slog.Logger
}

// NewCmd builds the command. runF replaces run in tests of flag parsing.
func NewCmd(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IOStreams, Target: f.Target, WorkDir: f.WorkDir, Environ: cmdutil.EnvironMap(f.Environ), Logger: f.Logger}
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
			if opts.All && opts.Name != "" {
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
	cmd.Flags().StringVarP(&opts.File, "file", "f", "", "path to the devtool.yml or Compose file, used to find the environment name and the destroy commands")
	cmd.Flags().StringVar(&opts.Name, "name", "", "environment name (default: the file's name key, else the repository or folder name)")
	cmd.Flags().BoolVar(&opts.Volumes, "volumes", false, "also delete the environment's volumes (PVCs)")
	cmd.Flags().BoolVar(&opts.Wait, "wait", false, "wait until the deleted objects are gone")
	cmd.Flags().BoolVar(&opts.All, "all", false, "destroy every environment in the namespace")
	cmd.Flags().DurationVar(&opts.Timeout, "timeout", 5*time.Minute, "how long to wait")
	cmd.Flags().BoolVar(&opts.NoBash, "no-bash", false, "run the destroy commands with sh -c instead of bash -c")
	return cmd
}

func run(ctx context.Context, opts *Options) error {
	target, err := opts.Target(opts.Kube)
	if err != nil {
		return err
	}
	m, err := deploy.LoadManifest(opts.WorkDir, opts.File, opts.Environ)
	if err != nil && (opts.Name == "" || opts.File != "") {
		return err
	}
	var names []string
	if opts.All {
		states, err := (&deploy.StateStore{Clientset: target.Kube.Clientset, Namespace: target.Namespace}).List(ctx)
		if err != nil {
			return err
		}
		for _, s := range states {
			names = append(names, s.Name)
		}
		if len(names) == 0 {
			fmt.Fprintf(opts.IO.ErrOut, "No environment is deployed in namespace %s\n", target.Namespace)
			return nil
		}
	} else if m != nil {
		names = []string{deploy.EnvironmentName(opts.Name, m.Name, m.Dir)}
	} else {
		n, err := composeenv.NameOnly(composeenv.Options{WorkDir: opts.WorkDir, File: opts.File, Name: opts.Name, Environ: opts.Environ})
		if err != nil {
			return err
		}
		names = []string{n}
	}
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	for _, n := range names {
		if err := destroyOne(ctx, opts, target, m, n); err != nil {
			return err
		}
	}
	return nil
}

// destroyOne holds the environment's lock while it runs the manifest's destroy commands (when the
// manifest names this environment), then deletes what is labelled for it, then its state.
func destroyOne(ctx context.Context, opts *Options, target *cmdutil.Target, m *manifest.Manifest, n string) error {
	lock, err := deploy.AcquireLock(ctx, target.Kube.Clientset, target.Namespace, n, deploy.LockHolder())
	if err != nil {
		return err
	}
	defer func() { _ = lock.Release(ctx) }()
	if m != nil && len(m.Destroy) > 0 && deploy.EnvironmentName(opts.Name, m.Name, m.Dir) == n {
		shell := "bash"
		if opts.NoBash {
			shell = "sh"
		}
		branch, commit := deploy.GitInfo(m.Dir)
		fmt.Fprintf(opts.IO.ErrOut, "Running the destroy commands of %s\n", n)
		err := deploy.RunManifestCommands(ctx, deploy.CommandsRun{
			Client: target.Kube, Namespace: target.Namespace, Name: n, Shell: shell, Dir: m.Dir,
			Out: opts.IO.ErrOut, Logger: opts.Logger,
			Env: deploy.CommandEnv{Environ: opts.Environ, DotEnv: m.DotEnv, Namespace: target.Namespace,
				Context: target.ContextName, Name: n, Registry: target.Registry, GitBranch: branch, GitCommit: commit,
				BuildkitHost: opts.Environ["BUILDKIT_HOST"]},
		}, m.Destroy)
		if err != nil {
			return fmt.Errorf("destroying %s: %w", n, err)
		}
	}
	{
		sp := opts.IO.StartSpinner(fmt.Sprintf("Destroying %s in namespace %s", n, target.Namespace))
		d := &deploy.Destroy{Client: target.Kube, Namespace: target.Namespace, Name: n, Volumes: opts.Volumes, Wait: opts.Wait, Progress: sp.Update}
		err := d.Run(ctx)
		sp.Stop()
		if err != nil {
			return fmt.Errorf("destroying %s: %w", n, err)
		}
		fmt.Fprintf(opts.IO.ErrOut, "Environment %s destroyed in namespace %s\n", n, target.Namespace)
	}
	return nil
}

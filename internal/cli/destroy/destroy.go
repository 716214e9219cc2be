// Package destroy implements `devtool destroy`.
package destroy

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/devtool/devtool/internal/cmdutil"
	"github.com/devtool/devtool/internal/composeenv"
	"github.com/devtool/devtool/internal/deploy"
	"github.com/devtool/devtool/internal/iostreams"
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
}

// NewCmd builds the command. runF replaces run in tests of flag parsing.
func NewCmd(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IOStreams, Target: f.Target, WorkDir: f.WorkDir, Environ: cmdutil.EnvironMap(f.Environ)}
	cmd := &cobra.Command{
		Use:   "destroy",
		Short: "Destroy what deploy created",
		Long: `Destroy deletes every object labelled for the environment (dev.devtool/deployed-by), then its
state record. Objects annotated dev.devtool/policy: keep are never touched; volumes (PVCs) are
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
	cmd.Flags().StringVarP(&opts.File, "file", "f", "", "path to the Compose file, used to find the environment name")
	cmd.Flags().StringVar(&opts.Name, "name", "", "environment name (default: the file's name key, else the repository or folder name)")
	cmd.Flags().BoolVar(&opts.Volumes, "volumes", false, "also delete the environment's volumes (PVCs)")
	cmd.Flags().BoolVar(&opts.Wait, "wait", false, "wait until the deleted objects are gone")
	cmd.Flags().BoolVar(&opts.All, "all", false, "destroy every environment in the namespace")
	cmd.Flags().DurationVar(&opts.Timeout, "timeout", 5*time.Minute, "how long to wait")
	return cmd
}

func run(ctx context.Context, opts *Options) error {
	target, err := opts.Target(opts.Kube)
	if err != nil {
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

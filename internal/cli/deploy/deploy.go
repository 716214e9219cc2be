// Package deploy implements `devtool deploy` for Compose environments.
package deploy

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/devtool/devtool/internal/build"
	"github.com/devtool/devtool/internal/cmdutil"
	"github.com/devtool/devtool/internal/composeenv"
	"github.com/devtool/devtool/internal/deploy"
	"github.com/devtool/devtool/internal/iostreams"
	"github.com/devtool/devtool/internal/translate"
)

// Options are the inputs of `devtool deploy`.
type Options struct {
	IO      *iostreams.IOStreams
	Target  func(cmdutil.KubeFlags) (*cmdutil.Target, error)
	WorkDir string
	Environ map[string]string

	Kube    cmdutil.KubeFlags
	File    string
	Name    string
	Wait    bool
	Timeout time.Duration
	DryRun  bool
	Build   bool
	Vars    []string // --var NAME=value
	NoBash  bool
	// Dependencies deploys the manifest's dependencies even when they are already deployed.
	Dependencies bool

	Getenv func(string) string
	Logger *slog.Logger
}

// NewCmd builds the command. runF replaces run in tests of flag parsing.
func NewCmd(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IOStreams, Target: f.Target, WorkDir: f.WorkDir, Environ: cmdutil.EnvironMap(f.Environ), Getenv: f.Getenv, Logger: f.Logger}
	cmd := &cobra.Command{
		Use:   "deploy",
		Short: "Deploy a development environment to the cluster",
		Long: `Deploy runs the environment's devtool.yml (devtool.yml, devtool.yaml, .devtool/devtool.yml or
.devtool/devtool.yaml in the current folder, or --file): it deploys the dependencies not yet deployed,
builds the images of the build section that are missing, runs the deploy commands in order (bash -c,
or sh -c with --no-bash) with a KUBECONFIG that labels what they create, then applies deploy.compose
and deploy.endpoints.

Without a devtool.yml, deploy translates the Compose file (compose.yaml, compose.yml,
docker-compose.yaml or docker-compose.yml) into Kubernetes objects and applies them with server-side
apply, in depends_on order. Objects that left the file are removed; volumes are kept.`,
		Example: `  devtool deploy
  devtool deploy --file compose.yml --namespace dev --wait
  devtool deploy --dry-run > objects.yaml
  devtool deploy --var MODE=test --no-bash`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.Timeout <= 0 {
				return cmdutil.FlagErrorf("--timeout must be positive, got %s", opts.Timeout)
			}
			if _, err := parseVars(opts.Vars); err != nil {
				return cmdutil.FlagErrorf("%v", err)
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return run(cmd.Context(), opts)
		},
	}
	opts.Kube.AddFlags(cmd)
	cmd.Flags().StringVarP(&opts.File, "file", "f", "", "path to the devtool.yml or Compose file (default: devtool.yml, then compose.yaml, compose.yml, docker-compose.yaml or docker-compose.yml)")
	cmd.Flags().StringVar(&opts.Name, "name", "", "environment name (default: the file's name key, else the repository or folder name)")
	cmd.Flags().BoolVar(&opts.Wait, "wait", false, "wait until every service is ready")
	cmd.Flags().DurationVar(&opts.Timeout, "timeout", 5*time.Minute, "how long to wait for the deploy")
	cmd.Flags().BoolVar(&opts.DryRun, "dry-run", false, "print the objects as YAML and change nothing")
	cmd.Flags().BoolVar(&opts.Build, "build", false, "build and push every image with a build section, even when the registry has it")
	cmd.Flags().StringArrayVar(&opts.Vars, "var", nil, "a variable NAME=value for the deploy commands (repeatable)")
	cmd.Flags().BoolVar(&opts.NoBash, "no-bash", false, "run the deploy commands with sh -c instead of bash -c")
	cmd.Flags().BoolVar(&opts.Dependencies, "dependencies", false, "deploy the dependencies even when they are already deployed")
	return cmd
}

func run(ctx context.Context, opts *Options) error {
	if m, err := deploy.LoadManifest(opts.WorkDir, opts.File, opts.Environ); err != nil {
		return err
	} else if m != nil {
		vars, _ := parseVars(opts.Vars)
		return runManifest(ctx, opts, m, vars, map[string]bool{})
	}
	return runCompose(ctx, opts)
}

func runCompose(ctx context.Context, opts *Options) error {
	env, err := composeenv.Load(composeenv.Options{WorkDir: opts.WorkDir, File: opts.File, Name: opts.Name, Environ: opts.Environ})
	if err != nil {
		return err
	}
	for _, w := range env.Project.Warnings {
		fmt.Fprintf(opts.IO.ErrOut, "Warning: %s\n", w)
	}

	target, err := opts.Target(opts.Kube)
	if err != nil {
		if !opts.DryRun {
			return err
		}
		// A dry run needs no cluster: fall back to the flag's namespace.
		target = &cmdutil.Target{Namespace: opts.Kube.Namespace, ClusterDomain: opts.Environ["DEVTOOL_CLUSTER_DOMAIN"], Registry: opts.Environ["DEVTOOL_REGISTRY"]}
		if target.Namespace == "" {
			target.Namespace = "default"
		}
	}
	warn := func(msg string) { fmt.Fprintf(opts.IO.ErrOut, "Warning: %s\n", msg) }
	err = env.ResolveImages(ctx, composeenv.ImageOptions{
		Registry: target.Registry, Namespace: target.Namespace, Force: opts.Build, DryRun: opts.DryRun,
		Progress: opts.IO.ErrOut, Warn: warn,
		NewBuilder: func(ctx context.Context) (build.Builder, error) {
			return build.Select(ctx, build.SelectOptions{IsPlatform: target.IsPlatform, PlatformURL: target.ContextName,
				ContextBuilder: target.Builder, Getenv: opts.Getenv, Logger: opts.Logger})
		},
	})
	if err != nil {
		return err
	}
	res, err := translate.Translate(env.Project, translate.Options{Name: env.Name, Namespace: target.Namespace, ClusterDomain: target.ClusterDomain})
	if err != nil {
		return err
	}
	for _, w := range res.Warnings {
		fmt.Fprintf(opts.IO.ErrOut, "Warning: %s\n", w)
	}
	if opts.DryRun {
		out, err := translate.ToYAML(res.Objects)
		if err != nil {
			return err
		}
		_, err = opts.IO.Out.Write(out)
		return err
	}

	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	sp := opts.IO.StartSpinner(fmt.Sprintf("Deploying %s to namespace %s", env.Name, target.Namespace))
	d := &deploy.ComposeDeploy{
		Client: target.Kube, Namespace: target.Namespace, Name: env.Name, Result: res,
		Manifest: string(env.Raw), ManifestFile: env.File, Wait: opts.Wait, Progress: sp.Update,
	}
	err = d.Run(ctx)
	sp.Stop()
	if err != nil {
		return fmt.Errorf("deploying %s: %w", env.Name, err)
	}
	fmt.Fprintf(opts.IO.ErrOut, "Environment %s deployed to namespace %s\n", env.Name, target.Namespace)
	return printEndpoints(opts.IO.Out, res.Endpoints)
}

func printEndpoints(w io.Writer, eps []translate.Endpoint) error {
	for _, e := range eps {
		if e.URL != "" {
			if _, err := fmt.Fprintln(w, e.URL); err != nil {
				return err
			}
		}
	}
	return nil
}

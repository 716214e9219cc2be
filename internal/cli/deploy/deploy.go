// Package deploy implements `devtool deploy`: flags to an environment.Deployer.
package deploy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/devtool/devtool/internal/cmdutil"
	"github.com/devtool/devtool/internal/contexts"
	"github.com/devtool/devtool/internal/deploy"
	"github.com/devtool/devtool/internal/environment"
	"github.com/devtool/devtool/internal/iostreams"
	"github.com/devtool/devtool/internal/translate"
)

// Options are the inputs of `devtool deploy`.
type Options struct {
	IO     *iostreams.IOStreams
	Target func(cmdutil.KubeFlags) (*cmdutil.Target, error)
	// StoredSecrets reads the platform's stored secrets (nil: none): the third source of ${NAME}
	// and the deploy commands' environment (below .env).
	StoredSecrets func(context.Context, cmdutil.KubeFlags) (map[string]string, error)
	WorkDir       string
	Environ       map[string]string

	Kube    cmdutil.KubeFlags
	Env     cmdutil.EnvFlags
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
	opts := &Options{IO: f.IOStreams, Target: f.Target, StoredSecrets: f.StoredSecrets, WorkDir: f.WorkDir, Environ: cmdutil.EnvironMap(f.Environ), Getenv: f.Getenv, Logger: f.Logger}
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
  devtool deploy --dry-run > objects.yaml   # a devtool.yml's plan goes to stderr
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
	opts.Env.AddFlags(cmd, "")
	cmd.Flags().BoolVar(&opts.Wait, "wait", false, "wait until every service is ready")
	cmd.Flags().DurationVar(&opts.Timeout, "timeout", 5*time.Minute, "how long to wait for the deploy")
	cmd.Flags().BoolVar(&opts.DryRun, "dry-run", false, "print the objects as YAML (and for a devtool.yml the images, dependencies and commands on stderr); build, run and change nothing")
	cmd.Flags().BoolVar(&opts.Build, "build", false, "build and push every image with a build section, even when the registry has it")
	cmd.Flags().StringArrayVar(&opts.Vars, "var", nil, "a variable NAME=value for the deploy commands (repeatable)")
	cmd.Flags().BoolVar(&opts.NoBash, "no-bash", false, "run the deploy commands with sh -c instead of bash -c")
	cmd.Flags().BoolVar(&opts.Dependencies, "dependencies", false, "deploy the dependencies even when they are already deployed")
	return cmd
}

// parseVars checks every --var and returns them as a map (a later one wins).
func parseVars(list []string) (map[string]string, error) {
	out := map[string]string{}
	for _, v := range list {
		name, value, err := deploy.ParseVar(v)
		if err != nil {
			return nil, err
		}
		out[name] = value
	}
	return out, nil
}

func run(ctx context.Context, opts *Options) error {
	secrets, err := cmdutil.LoadStoredSecrets(ctx, opts.StoredSecrets, opts.Kube)
	if err != nil {
		return err
	}
	eo := opts.Env.Options(opts.WorkDir, opts.Environ)
	eo.Secrets = secrets
	env, err := cmdutil.Interruptible(ctx, func() (*environment.Environment, error) { return environment.Load(eo) })
	if err != nil {
		return err
	}
	target, err := dryRunTarget(opts)
	if err != nil {
		return err
	}
	// On a platform, a namespace the user does not have yet is created (they become its owner).
	if target.Platform != nil && !opts.DryRun {
		created, err := contexts.EnsureNamespace(ctx, target.Platform, target.Namespace)
		if err != nil {
			return fmt.Errorf("namespace %s on the platform: %w", target.Namespace, err)
		}
		if created {
			fmt.Fprintf(opts.IO.ErrOut, "Namespace %s created on the platform.\n", target.Namespace)
		}
	}
	vars, _ := parseVars(opts.Vars)
	shell := "bash"
	if opts.NoBash {
		shell = "sh"
	}
	warn := func(msg string) { fmt.Fprintf(opts.IO.ErrOut, "Warning: %s\n", msg) }
	d := &environment.Deployer{
		Env: env, Target: target, Environ: opts.Environ, Secrets: secrets, Getenv: opts.Getenv, Logger: opts.Logger,
		Wait: opts.Wait, Timeout: opts.Timeout, Force: opts.Build, DryRun: opts.DryRun, Vars: vars, Shell: shell,
		Dependencies: opts.Dependencies, AllowOutsideVolumes: opts.Env.AllowOutside, Out: opts.IO.ErrOut, Warn: warn,
		Progress: func(s string) { fmt.Fprintln(opts.IO.ErrOut, s) },
	}
	var sp *iostreams.Spinner
	if env.IsCompose() && !opts.DryRun {
		sp = opts.IO.StartSpinner(fmt.Sprintf("Deploying %s to namespace %s", env.Name, target.Namespace))
		d.Progress = sp.Update
	}
	res, err := d.Deploy(ctx)
	if sp != nil {
		sp.Stop()
	}
	if err != nil {
		return err
	}
	if opts.DryRun {
		return printDryRun(ctx, opts.IO, res)
	}
	fmt.Fprintf(opts.IO.ErrOut, "Environment %s deployed to namespace %s\n", env.Name, target.Namespace)
	for _, u := range res.URLs {
		if _, err := fmt.Fprintln(opts.IO.Out, u); err != nil {
			return err
		}
	}
	return nil
}

// printDryRun writes a dry run: what a devtool.yml's deploy would do on stderr, the objects it
// would apply as YAML on stdout (nothing when it has no compose or endpoints part).
func printDryRun(ctx context.Context, ios *iostreams.IOStreams, res *environment.DeployResult) error {
	for _, l := range res.Plan {
		fmt.Fprintln(ios.ErrOut, l)
	}
	if res.Objects == nil || len(res.Objects.Objects) == 0 {
		return nil
	}
	out, err := translate.ToYAMLContext(ctx, res.Objects.Objects)
	if err != nil {
		return err
	}
	return writeContext(ctx, ios.Out, out)
}

// dryRunTarget resolves the target. A dry run needs no cluster: when nothing names a context (no
// kubeconfig current-context, no devtool context) it renders for the --namespace flag (else
// "default"). Anything else that fails to resolve is an error, as in a deploy: an explicit
// --context that names nothing, a bad --namespace, a context store that cannot be read, a current
// context whose Kubernetes context left the kubeconfig.
func dryRunTarget(opts *Options) (*cmdutil.Target, error) {
	target, err := opts.Target(opts.Kube)
	if err == nil || !opts.DryRun || opts.Kube.Context != "" || !errors.Is(err, contexts.ErrNoCurrentContext) {
		return target, err
	}
	port, perr := contexts.EndpointPortFromEnv(func(k string) string { return opts.Environ[k] })
	if perr != nil {
		return nil, perr
	}
	target = &cmdutil.Target{Namespace: opts.Kube.Namespace, ClusterDomain: opts.Environ["DEVTOOL_CLUSTER_DOMAIN"], Registry: opts.Environ["DEVTOOL_REGISTRY"],
		IngressClass: opts.Environ[contexts.EnvIngressClass], EndpointPort: port}
	if target.Namespace == "" {
		target.Namespace = "default"
	}
	return target, nil
}

// writeContext writes b in pieces and stops with ctx's error when ctx ends: printing megabytes of
// dry run to a terminal takes seconds.
func writeContext(ctx context.Context, w io.Writer, b []byte) error {
	for len(b) > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		n := min(len(b), 64<<10)
		if _, err := w.Write(b[:n]); err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

package pipeline

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/devtool/devtool/internal/cmdutil"
	"github.com/devtool/devtool/internal/gitlocal"
	"github.com/devtool/devtool/internal/iostreams"
	"github.com/devtool/devtool/internal/platform/api"
	"github.com/devtool/devtool/internal/platform/runspec"
)

// DeployOptions are the inputs of `pipeline deploy` and `pipeline destroy`.
type DeployOptions struct {
	IO      *iostreams.IOStreams
	Getenv  func(string) string
	WorkDir string

	Action       string // deploy or destroy
	Kube         cmdutil.KubeFlags
	Repository   string
	Branch       string
	File         string
	Name         string
	Vars         []string
	SkipIfExists bool
	Volumes      bool
	Wait         bool
	Timeout      time.Duration

	vars []api.Var // Vars checked
}

// NewDeployCmd builds `pipeline deploy` or `pipeline destroy` (action). runF replaces run in tests.
func NewDeployCmd(f *cmdutil.Factory, action string, runF func(context.Context, *DeployOptions) error) *cobra.Command {
	opts := &DeployOptions{IO: f.IOStreams, Getenv: f.Getenv, WorkDir: f.WorkDir, Action: action}
	cmd := &cobra.Command{Use: action, Args: cobra.NoArgs}
	if action == api.ActionDeploy {
		cmd.Short = "Deploy a repository with a job in the cluster (platform only)"
		cmd.Long = `Run a pipeline: the platform records a run and starts a Job in the namespace that clones the
repository (https; http with a warning) and runs 'devtool deploy --wait' in it, with your rights.
Private repositories: store an HTTPS access token as the secret GIT_TOKEN_<HOST> (GIT_TOKEN_GITHUB_COM
for github.com); it is never sent over http. Stored secrets are the third source of ${NAME} after
--var and the repository's .env, and are masked in the log. One run at a time per pipeline: a second
is refused, naming the running one.

With --wait the run's log is streamed here and the command exits with its result: 0, or 1 with the
failing step's last output. --timeout bounds the run on the cluster too.`
		cmd.Example = `  devtool pipeline deploy --repository https://github.com/acme/shop --branch main --wait
  devtool pipeline deploy --var MODE=test --skip-if-exists   # the current folder's remote`
	} else {
		cmd.Short = "Destroy a pipeline's environment with a job in the cluster (platform only)"
		cmd.Long = `Run a pipeline's destroy: a Job clones the repository of the pipeline's last run (same branch and
file) and runs 'devtool destroy' there (the manifest's destroy commands included), with your rights.
With --wait the log is streamed here and the command exits with the result.`
		cmd.Example = `  devtool pipeline destroy --name shop --wait
  devtool pipeline destroy --name shop --volumes`
	}
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		var err error
		if opts.vars, err = cmdutil.CheckRunFlags(opts.Timeout, opts.Vars, opts.Branch, opts.File); err != nil {
			return err
		}
		if opts.Name != "" {
			if why := runspec.ValidName(opts.Name); why != "" {
				return cmdutil.FlagErrorf("--name %q: %s", opts.Name, why)
			}
		}
		if err := checkNamespace(opts.Kube.Namespace); err != nil {
			return err
		}
		if opts.Repository != "" {
			if err := checkRepository(opts.Repository, opts.IO.ErrOut); err != nil {
				return err
			}
		}
		if runF != nil {
			return runF(cmd.Context(), opts)
		}
		return runDeploy(cmd.Context(), opts)
	}
	fl := cmd.Flags()
	fl.StringVarP(&opts.Kube.Namespace, "namespace", "n", "", "namespace to run in (default: the context's namespace)")
	fl.StringVarP(&opts.Kube.Context, "context", "c", "", "platform context to use (default: the current context)")
	fl.StringVar(&opts.Name, "name", "", "the pipeline's (and environment's) name (default: the repository's name)")
	fl.BoolVar(&opts.Wait, "wait", false, "stream the run's log and exit with its result")
	fl.DurationVar(&opts.Timeout, "timeout", 5*time.Minute, "how long the run may take (the cluster stops it then)")
	if action == api.ActionDeploy {
		fl.StringVar(&opts.Repository, "repository", "", "the repository's https URL (default: the current folder's origin remote)")
		fl.StringVar(&opts.Branch, "branch", "", "the branch to deploy (default: the repository's default branch)")
		fl.StringVarP(&opts.File, "file", "f", "", "the devtool.yml or Compose file, relative to the repository (default: found as deploy does)")
		fl.StringArrayVar(&opts.Vars, "var", nil, "a variable NAME=value for the deploy (repeatable)")
		fl.BoolVar(&opts.SkipIfExists, "skip-if-exists", false, "do nothing when the environment is deployed already")
	} else {
		fl.BoolVar(&opts.Volumes, "volumes", false, "also remove the environment's volumes")
	}
	return cmd
}

func runDeploy(ctx context.Context, opts *DeployOptions) error {
	p, err := cmdutil.RequirePlatform(opts.Getenv, opts.Kube, "pipeline "+opts.Action)
	if err != nil {
		return err
	}
	defer p.Close()
	ns := p.Selection.Namespace
	if ns == "" {
		return cmdutil.FlagErrorf("give --namespace: the context %s has no namespace", p.Selection.Name())
	}
	repo := opts.Repository
	if repo == "" && opts.Action == api.ActionDeploy {
		remote, err := gitlocal.Origin(ctx, opts.WorkDir)
		if err != nil {
			return cmdutil.FlagErrorf("give --repository: the current folder has no git origin remote to default to (%v)", err)
		}
		https, changed, err := gitlocal.HTTPS(remote)
		if err != nil {
			return cmdutil.FlagErrorf("give --repository: %v", err)
		}
		if changed {
			fmt.Fprintf(opts.IO.ErrOut, "Using %s for the origin remote %s (pipelines clone over https).\n", https, remote)
		}
		if err := checkRepository(https, opts.IO.ErrOut); err != nil {
			return err
		}
		repo = https
	}
	name := opts.Name
	if name == "" {
		if name, err = defaultName(ctx, repo, opts.WorkDir); err != nil {
			return err
		}
	}
	req := api.PipelineRequest{Name: name, Action: opts.Action, Repository: repo, Branch: opts.Branch, File: opts.File,
		SkipIfExists: opts.SkipIfExists, Volumes: opts.Volumes, TimeoutSeconds: int64(opts.Timeout.Round(time.Second) / time.Second),
		Vars: opts.vars}
	r, err := p.Client.StartPipeline(ctx, ns, req)
	if err != nil {
		if ctx.Err() != nil {
			fmt.Fprintf(opts.IO.ErrOut, "Interrupted while the platform was starting the %s: the run may have started; see it with: devtool pipeline logs --name %s --namespace %s\n", opts.Action, name, ns)
			return ctx.Err()
		}
		return refusal(err, ns)
	}
	if r.Skipped {
		fmt.Fprintf(opts.IO.ErrOut, "Environment %s is deployed in namespace %s already: nothing done (--skip-if-exists).\n", name, ns)
		return nil
	}
	what := r.Repository
	if r.Branch != "" {
		what += " (branch " + r.Branch + ")"
	}
	fmt.Fprintf(opts.IO.ErrOut, "Pipeline %s: run #%d started in namespace %s: %s of %s.\n", name, r.Number, ns, r.Action, what)
	if !opts.Wait {
		fmt.Fprintf(opts.IO.ErrOut, "Follow it with: devtool pipeline logs --name %s --namespace %s -f\n", name, ns)
		return nil
	}
	done, err := cmdutil.FollowRun(ctx, opts.IO, p.Client, r, opts.Timeout)
	if err != nil {
		return err
	}
	if err := cmdutil.RunResult(done); err != nil {
		return err
	}
	if opts.Action == api.ActionDeploy {
		commit := done.Commit
		if len(commit) > 12 {
			commit = commit[:12]
		}
		fmt.Fprintf(opts.IO.ErrOut, "Pipeline %s deployed to namespace %s (branch %s, commit %s, run #%d).\n", name, ns, done.Branch, commit, done.Number)
	} else {
		fmt.Fprintf(opts.IO.ErrOut, "Pipeline %s destroyed in namespace %s (run #%d).\n", name, ns, done.Number)
	}
	return nil
}

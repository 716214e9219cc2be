package pipeline

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/devtool/devtool/internal/cmdutil"
	"github.com/devtool/devtool/internal/iostreams"
	"github.com/devtool/devtool/internal/platform/api"
	"github.com/devtool/devtool/internal/platform/runspec"
)

// LogsOptions are the inputs of `pipeline logs`.
type LogsOptions struct {
	IO      *iostreams.IOStreams
	Getenv  func(string) string
	WorkDir string

	Kube   cmdutil.KubeFlags
	Name   string
	Run    string // a number or "latest"
	Follow bool
}

// NewLogsCmd builds `pipeline logs`. runF replaces run in tests.
func NewLogsCmd(f *cmdutil.Factory, runF func(context.Context, *LogsOptions) error) *cobra.Command {
	opts := &LogsOptions{IO: f.IOStreams, Getenv: f.Getenv, WorkDir: f.WorkDir}
	cmd := &cobra.Command{
		Use:   "logs",
		Short: "Show the log of a pipeline's run (platform only)",
		Long: `Show the log of a pipeline's latest run (or of --run N). A finished run's log is kept with its Job
outside etcd: the platform keeps the last runs of each pipeline (5 by default) and the last 512 KiB of
each. With -f a run still going on is followed until it ends, and the command exits with its result.`,
		Example: `  devtool pipeline logs --name shop
  devtool pipeline logs --name shop --run 3
  devtool pipeline logs --name shop -f`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.Name != "" {
				if why := runspec.ValidName(opts.Name); why != "" {
					return cmdutil.FlagErrorf("--name %q: %s", opts.Name, why)
				}
			}
			if err := checkNamespace(opts.Kube.Namespace); err != nil {
				return err
			}
			if opts.Run != "latest" {
				if n, err := strconv.Atoi(opts.Run); err != nil || n < 1 {
					return cmdutil.FlagErrorf("--run must be a run number (1, 2, ...) or latest, got %q", opts.Run)
				}
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return runLogs(cmd.Context(), opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&opts.Kube.Namespace, "namespace", "n", "", "the pipeline's namespace (default: the context's namespace)")
	fl.StringVarP(&opts.Kube.Context, "context", "c", "", "platform context to use (default: the current context)")
	fl.StringVar(&opts.Name, "name", "", "the pipeline (default: the name of the current folder's repository)")
	fl.StringVar(&opts.Run, "run", "latest", "the run: its number, or latest")
	fl.BoolVarP(&opts.Follow, "follow", "f", false, "follow a run still going on until it ends, then exit with its result")
	return cmd
}

func runLogs(ctx context.Context, opts *LogsOptions) error {
	p, err := cmdutil.RequirePlatform(opts.Getenv, opts.Kube, "pipeline logs")
	if err != nil {
		return err
	}
	defer p.Close()
	ns := p.Selection.Namespace
	if ns == "" {
		return cmdutil.FlagErrorf("give --namespace: the context %s has no namespace", p.Selection.Name())
	}
	name := opts.Name
	if name == "" {
		if name, err = defaultName(ctx, "", opts.WorkDir); err != nil {
			return err
		}
	}
	r, err := p.Client.PipelineRun(ctx, ns, name, opts.Run, 0)
	if err != nil {
		return refusal(err, ns)
	}
	fmt.Fprintf(opts.IO.ErrOut, "Run #%d of pipeline %s (%s by %s, %s): %s\n", r.Number, name, r.Action, r.User, r.Created.Local().Format(time.DateTime), r.Phase)
	if opts.Follow && !api.Finished(r.Phase) {
		done, err := cmdutil.FollowRun(ctx, opts.IO, p.Client, r, time.Duration(r.TimeoutSeconds)*time.Second)
		if err != nil {
			return err
		}
		return cmdutil.RunResult(done)
	}
	if err := p.Client.RunLog(ctx, ns, name, strconv.Itoa(r.Number), false, opts.IO.Out); err != nil {
		return refusal(err, ns)
	}
	// the log was asked for, not the run's result: exit 0 whatever it was
	switch r.Phase {
	case api.PhaseFailed:
		fmt.Fprintf(opts.IO.ErrOut, "Run #%d failed in step %s.\n", r.Number, r.FailedStep)
	case api.PhaseTimedOut:
		fmt.Fprintf(opts.IO.ErrOut, "Run #%d timed out.\n", r.Number)
	}
	return nil
}

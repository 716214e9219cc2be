// Package logs implements `devtool logs`.
package logs

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/devtool/devtool/internal/cmdutil"
	"github.com/devtool/devtool/internal/environment"
	"github.com/devtool/devtool/internal/iostreams"
	"github.com/devtool/devtool/internal/logs"
)

// Options are the inputs of `devtool logs`.
type Options struct {
	IO      *iostreams.IOStreams
	Target  func(cmdutil.KubeFlags) (*cmdutil.Target, error)
	Logger  *slog.Logger
	WorkDir string
	Environ map[string]string

	Kube       cmdutil.KubeFlags
	Env        cmdutil.EnvFlags
	All        bool
	Service    string // the serviceName argument
	Exclude    string
	Since      time.Duration
	Tail       int64
	Timestamps bool

	filter logs.Filter // compiled from Service and Exclude by NewCmd
}

// NewCmd builds the command. runF replaces run in tests of flag parsing.
func NewCmd(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IOStreams, Target: f.Target, Logger: f.Logger, WorkDir: f.WorkDir, Environ: cmdutil.EnvironMap(f.Environ)}
	cmd := &cobra.Command{
		Use:   "logs [serviceName]",
		Short: "Stream the logs of the environment's pods",
		Long: `Streams the logs of every container of the environment's pods (those labelled
dev.devtool/deployed-by=<environment>), or of every pod in the namespace with --all, and keeps
following pods that start later. Press Ctrl-C to stop.

serviceName is a regular expression matched as a prefix of service names: "api" selects "api" and
"api-worker", "api$" only "api". --exclude takes an expression matched the same way and removes the
services it matches. A pod's service is its app.kubernetes.io/name label, else its Deployment,
StatefulSet, DaemonSet or Job, else the pod's own name.`,
		Example: `  devtool logs
  devtool logs api --since 10m --tail 20
  devtool logs --all --exclude 'db|cache'`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				opts.Service = args[0]
			}
			var err error
			if opts.filter.Include, err = logs.CompilePrefix(opts.Service); err != nil {
				return cmdutil.FlagErrorf("serviceName %q is not a valid regular expression: %v", opts.Service, err)
			}
			if opts.filter.Exclude, err = logs.CompilePrefix(opts.Exclude); err != nil {
				return cmdutil.FlagErrorf("--exclude %q is not a valid regular expression: %v", opts.Exclude, err)
			}
			if opts.Tail < -1 {
				return cmdutil.FlagErrorf("--tail must be -1 (all lines) or more, not %d", opts.Tail)
			}
			if opts.Since < 0 {
				return cmdutil.FlagErrorf("--since must not be negative, not %s", opts.Since)
			}
			if opts.All && opts.Env.Name != "" {
				return cmdutil.FlagErrorf("--all and --name cannot be used together")
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return run(cmd.Context(), opts)
		},
	}
	opts.Kube.AddFlags(cmd)
	opts.Env.AddFlags(cmd, "path to the devtool.yml or Compose file, used to find the environment name")
	cmd.Flags().BoolVar(&opts.All, "all", false, "stream the logs of every pod in the namespace, not only the environment's")
	cmd.Flags().StringVar(&opts.Exclude, "exclude", "", "regular expression of services to leave out (matched as a prefix, like serviceName)")
	cmd.Flags().DurationVar(&opts.Since, "since", 48*time.Hour, "only lines newer than this duration (0 for no limit)")
	cmd.Flags().Int64Var(&opts.Tail, "tail", 100, "lines to show of each container already running (-1 for all)")
	cmd.Flags().BoolVar(&opts.Timestamps, "timestamps", false, "show the timestamp of each line")
	return cmd
}

func run(ctx context.Context, opts *Options) error {
	env := ""
	if !opts.All {
		name, err := cmdutil.Interruptible(ctx, func() (string, error) {
			return environment.Identify(opts.Env.Options(opts.WorkDir, opts.Environ))
		})
		if err != nil {
			return err
		}
		env = name
	}
	target, err := opts.Target(opts.Kube)
	if err != nil {
		return err
	}
	err = logs.Follow(ctx, logs.Options{
		Client:      target.Kube.Clientset,
		Namespace:   target.Namespace,
		Environment: env,
		All:         opts.All,
		Filter:      opts.filter,
		Since:       opts.Since,
		Tail:        opts.Tail,
		Out:         opts.IO.Out,
		Formatter:   formatter(opts),
		Notify:      func(msg string) { fmt.Fprintln(opts.IO.ErrOut, msg) },
		Logger:      opts.Logger,
	})
	if ctx.Err() != nil { // Ctrl-C is how logs ends: not an error
		return nil
	}
	return err
}

// formatter colours prefixes only when stdout is a terminal and NO_COLOR is unset (IOStreams decides).
func formatter(opts *Options) logs.TextFormatter {
	return logs.TextFormatter{Color: opts.IO.ColorEnabled(), Timestamps: opts.Timestamps}
}

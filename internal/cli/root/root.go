// Package root assembles the devtool command tree. Every subcommand is registered here and
// only here; a command is registered once it works.
package root

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/spf13/cobra"

	"github.com/devtool/devtool/internal/buildinfo"
	"github.com/devtool/devtool/internal/cli/analytics"
	buildcmd "github.com/devtool/devtool/internal/cli/build"
	contextcmd "github.com/devtool/devtool/internal/cli/context"
	deploycmd "github.com/devtool/devtool/internal/cli/deploy"
	"github.com/devtool/devtool/internal/cli/destroy"
	doctorcmd "github.com/devtool/devtool/internal/cli/doctor"
	downcmd "github.com/devtool/devtool/internal/cli/down"
	"github.com/devtool/devtool/internal/cli/endpoints"
	execcmd "github.com/devtool/devtool/internal/cli/exec"
	initcmd "github.com/devtool/devtool/internal/cli/init"
	kubeconfigcmd "github.com/devtool/devtool/internal/cli/kubeconfig"
	logscmd "github.com/devtool/devtool/internal/cli/logs"
	"github.com/devtool/devtool/internal/cli/namespace"
	pipelinecmd "github.com/devtool/devtool/internal/cli/pipeline"
	previewcmd "github.com/devtool/devtool/internal/cli/preview"
	restartcmd "github.com/devtool/devtool/internal/cli/restart"
	statuscmd "github.com/devtool/devtool/internal/cli/status"
	uicmd "github.com/devtool/devtool/internal/cli/ui"
	upcmd "github.com/devtool/devtool/internal/cli/up"
	"github.com/devtool/devtool/internal/cli/version"
	"github.com/devtool/devtool/internal/cmdutil"
)

// annotationStarted marks the root once the command line was accepted: cobra checks flags,
// the command name and the argument count before the persistent pre-run hook.
const annotationStarted = "devtool.started"

// annotationCommand and annotationContext record, on the root, the command path that ran (without
// the root's name, arguments or flags; "" for a hidden command) and its --context value.
const (
	annotationCommand = "devtool.command"
	annotationContext = "devtool.context"
)

// Executed is the command that ran (its path without "devtool", as "namespace create") and its
// --context flag; ok is false when none started (a usage error) or it was hidden or a completion
// helper: what an analytics event may name (internal/analytics).
func Executed(root *cobra.Command) (command, contextFlag string, ok bool) {
	command = root.Annotations[annotationCommand]
	return command, root.Annotations[annotationContext], command != ""
}

// Execute runs the command tree. Errors cobra returns before a command starts (unknown command,
// wrong number of arguments, bad flags) become usage errors (exit 2).
func Execute(ctx context.Context, cmd *cobra.Command) error {
	err := cmd.ExecuteContext(ctx)
	if err == nil || cmd.Annotations[annotationStarted] != "" {
		return err
	}
	var fe *cmdutil.FlagError
	if errors.As(err, &fe) {
		return err
	}
	return &cmdutil.FlagError{Err: err}
}

// LogLevels are the values of --loglevel, lowest first.
var logLevels = map[string]slog.Level{
	"debug": slog.LevelDebug, "info": slog.LevelInfo, "warn": slog.LevelWarn, "error": slog.LevelError,
}

// NewCmd builds the root command. levelVar is the logger's level, set from --loglevel before any command runs.
func NewCmd(f *cmdutil.Factory, levelVar *slog.LevelVar) *cobra.Command {
	var logLevel string
	cmd := &cobra.Command{
		Use:   "devtool <command> [flags]",
		Short: "Development environments on Kubernetes",
		Long: `devtool runs development environments on Kubernetes. It deploys Compose files and devtool.yml
manifests (building and pushing their images), and swaps a service for a dev container whose files
stay in two-way sync with your folder over SSH, so you edit locally and run in the cluster (up,
exec, status, restart, down). It also streams logs, lists endpoints, and manages the contexts and
namespaces its commands run in.`,
		Version:       buildinfo.Get().Version,
		Annotations:   map[string]string{},
		SilenceErrors: true, // main prints errors, once
		SilenceUsage:  true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			cmd.Root().Annotations[annotationStarted] = "true"
			recordExecuted(cmd)
			lvl, ok := logLevels[strings.ToLower(logLevel)]
			if !ok {
				return cmdutil.FlagErrorf("--loglevel must be one of debug, info, warn, error (got %q)", logLevel)
			}
			levelVar.Set(lvl)
			return nil
		},
	}
	cmd.SetOut(f.IOStreams.Out)
	cmd.SetErr(f.IOStreams.ErrOut)
	cmd.SetVersionTemplate(fmt.Sprintf("devtool version {{.Version}} (commit %s)\n", buildinfo.Get().Commit))
	cmd.PersistentFlags().StringVar(&logLevel, "loglevel", "warn", "log level: debug, info, warn or error (logs go to stderr)")
	_ = cmd.RegisterFlagCompletionFunc("loglevel", cobra.FixedCompletions(
		[]string{"debug", "info", "warn", "error"}, cobra.ShellCompDirectiveNoFileComp))
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &cmdutil.FlagError{Err: err} })

	cmd.AddCommand(version.NewCmd(f, nil))
	cmd.AddCommand(buildcmd.NewCmd(f, nil))
	cmd.AddCommand(deploycmd.NewCmd(f, nil))
	cmd.AddCommand(destroy.NewCmd(f, nil))
	cmd.AddCommand(endpoints.NewCmd(f, nil))
	cmd.AddCommand(contextcmd.NewCmd(f, nil))
	cmd.AddCommand(namespace.NewCmd(f, nil))
	cmd.AddCommand(pipelinecmd.NewCmd(f))
	cmd.AddCommand(previewcmd.NewCmd(f))
	cmd.AddCommand(kubeconfigcmd.NewCmd(f, nil))
	cmd.AddCommand(kubeconfigcmd.NewTokenCmd(f, nil))
	cmd.AddCommand(analytics.NewCmd(f, nil))
	cmd.AddCommand(initcmd.NewCmd(f, nil))
	cmd.AddCommand(logscmd.NewCmd(f, nil))
	cmd.AddCommand(upcmd.NewCmd(f, nil))
	cmd.AddCommand(downcmd.NewCmd(f, nil))
	cmd.AddCommand(statuscmd.NewCmd(f, nil))
	cmd.AddCommand(execcmd.NewCmd(f, nil))
	cmd.AddCommand(restartcmd.NewCmd(f, nil))
	cmd.AddCommand(doctorcmd.NewCmd(f, nil))
	cmd.AddCommand(uicmd.NewCmd(f, nil))
	strictCompletion(cmd)
	return cmd
}

// strictCompletion makes 'completion <shell>' with a shell cobra has no script for a usage error:
// the completion command has no Run of its own, so cobra would print its help and exit 0.
func strictCompletion(root *cobra.Command) {
	root.InitDefaultCompletionCmd()
	for _, c := range root.Commands() {
		if c.Name() != "completion" {
			continue
		}
		var shells []string
		for _, s := range c.Commands() {
			shells = append(shells, s.Name())
		}
		c.Args = func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return cmdutil.FlagErrorf("no completion script for %q: the shells are %s", args[0], strings.Join(shells, ", "))
			}
			return nil
		}
		c.RunE = func(c *cobra.Command, _ []string) error { return c.Help() }
	}
}

// recordExecuted notes the command path and --context of cmd on the root (see Executed).
func recordExecuted(cmd *cobra.Command) {
	for c := cmd; c != nil; c = c.Parent() {
		if c.Hidden || c.Name() == "completion" || c.Name() == cobra.ShellCompRequestCmd || c.Name() == cobra.ShellCompNoDescRequestCmd {
			return
		}
	}
	path := strings.TrimSpace(strings.TrimPrefix(cmd.CommandPath(), cmd.Root().Name()))
	cmd.Root().Annotations[annotationCommand] = path
	if f := cmd.Flags().Lookup("context"); f != nil {
		cmd.Root().Annotations[annotationContext] = f.Value.String()
	}
}

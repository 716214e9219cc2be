// Command devtool is the CLI. main is the only place that builds the process-wide pieces,
// maps errors to exit codes and calls os.Exit.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/devtool/devtool/internal/cli/root"
	"github.com/devtool/devtool/internal/cmdutil"
	"github.com/devtool/devtool/internal/contexts"
	"github.com/devtool/devtool/internal/iostreams"
)

func main() { os.Exit(run()) }

func run() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	ios := iostreams.System()
	level := new(slog.LevelVar)
	level.Set(slog.LevelWarn)
	logger := slog.New(slog.NewTextHandler(ios.ErrOut, &slog.HandlerOptions{Level: level}))
	wd, err := os.Getwd()
	if err != nil {
		fmt.Fprintf(ios.ErrOut, "Error: cannot read the working directory: %v\n", err)
		return cmdutil.ExitError
	}
	f := &cmdutil.Factory{IOStreams: ios, Logger: logger, Getenv: os.Getenv, Environ: os.Environ(), WorkDir: wd}
	f.Target = (&contexts.Resolver{Getenv: os.Getenv}).Resolve

	cmd := root.NewCmd(f, level)
	err = cmd.ExecuteContext(ctx)
	if err == nil {
		return cmdutil.ExitOK
	}
	if errors.Is(err, context.Canceled) || ctx.Err() != nil {
		fmt.Fprintln(ios.ErrOut, "Interrupted.")
		return cmdutil.ExitCancelled
	}
	var status *cmdutil.ExitStatus
	if errors.As(err, &status) {
		return status.Code
	}
	fmt.Fprintf(ios.ErrOut, "Error: %v\n", err)
	if hint := cmdutil.Hint(err); hint != "" {
		fmt.Fprintf(ios.ErrOut, "Hint: %s\n", hint)
	}
	var fe *cmdutil.FlagError
	if errors.As(err, &fe) {
		fmt.Fprintf(ios.ErrOut, "Run '%s --help' for usage.\n", commandPath(cmd, os.Args[1:]))
	}
	return cmdutil.ExitCode(err)
}

// commandPath names the subcommand the user ran, for the usage hint.
func commandPath(root *cobra.Command, args []string) string {
	if c, _, err := root.Find(args); err == nil && c != nil {
		return c.CommandPath()
	}
	return root.CommandPath()
}

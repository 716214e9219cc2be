// Command devtool is the CLI. main is the only place that builds the process-wide pieces,
// maps errors to exit codes and calls os.Exit.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/spf13/cobra"
	"k8s.io/klog/v2"

	"github.com/devtool/devtool/internal/analytics"
	"github.com/devtool/devtool/internal/buildinfo"
	"github.com/devtool/devtool/internal/cli/root"
	"github.com/devtool/devtool/internal/cmdutil"
	"github.com/devtool/devtool/internal/contexts"
	"github.com/devtool/devtool/internal/iostreams"
	"github.com/devtool/devtool/internal/secretmask"
)

func main() { os.Exit(run()) }

func run() (code int) {
	ios := iostreams.System()
	// Every byte devtool prints (results, progress, child commands' output, the debug log, errors)
	// goes through these writers, which mask the platform's stored secrets a command resolved.
	mask := &secretmask.Set{}
	out, errOut := secretmask.NewWriter(ios.Out, mask), secretmask.NewWriter(ios.ErrOut, mask)
	ios.Out, ios.ErrOut = out, errOut
	defer func() {
		if r := recover(); r != nil {
			code = reportPanic(ios.ErrOut, mask, r, debug.Stack())
		}
		out.Flush()
		errOut.Flush()
	}()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stopSignals := handleSignals(cancel, func() { os.Exit(cmdutil.ExitCancelled) })
	defer stopSignals()

	level := new(slog.LevelVar)
	level.Set(slog.LevelWarn)
	logger := slog.New(slog.NewTextHandler(ios.ErrOut, &slog.HandlerOptions{Level: level}))
	// client-go logs through klog: route it through the same logger, at --loglevel.
	klog.SetSlogLogger(logger)
	// compose-go logs through logrus (its dotenv parser warns about unset variables there): route
	// it through the same logger, so no line reaches the terminal in another format.
	routeLogrus(logger)
	wd, err := os.Getwd()
	if err != nil {
		fmt.Fprintf(ios.ErrOut, "Error: cannot read the working directory: %v\n", err)
		return cmdutil.ExitError
	}
	f := &cmdutil.Factory{IOStreams: ios, Logger: logger, Getenv: os.Getenv, Environ: os.Environ(), WorkDir: wd}
	resolver := &contexts.Resolver{Getenv: os.Getenv}
	f.Target = cmdutil.TargetFunc(resolver)
	f.StoredSecrets = cmdutil.StoredSecretsFunc(resolver, mask)

	cmd := root.NewCmd(f, level)
	start := time.Now()
	err = root.Execute(ctx, cmd)
	code = report(ios.ErrOut, cmd, err, ctx.Err() != nil)
	// One analytics event, to the platform of the command's context only and only when both the
	// user and that platform allow it (internal/analytics); never after Ctrl-C, never an error.
	if command, contextFlag, ok := root.Executed(cmd); ok && ctx.Err() == nil {
		sender := &analytics.Sender{Resolver: resolver, Getenv: os.Getenv}
		run := analytics.Run{Command: command, ContextFlag: contextFlag, Duration: time.Since(start), Success: code == cmdutil.ExitOK}
		if sent, err := sender.Send(ctx, run); err != nil {
			logger.Debug("analytics event not sent", "err", err)
		} else if sent {
			logger.Debug("analytics event sent", "command", command)
		}
	}
	return code
}

// routeLogrus sends logrus's entries (compose-go's) to logger instead of logrus's own output.
func routeLogrus(logger *slog.Logger) {
	logrus.SetOutput(io.Discard)
	logrus.SetLevel(logrus.DebugLevel) // the hook filters by logger's level
	logrus.StandardLogger().ReplaceHooks(logrus.LevelHooks{})
	logrus.AddHook(logrusHook{logger})
}

type logrusHook struct{ logger *slog.Logger }

func (logrusHook) Levels() []logrus.Level { return logrus.AllLevels }

func (h logrusHook) Fire(e *logrus.Entry) error {
	level := slog.LevelDebug
	switch {
	case e.Level <= logrus.ErrorLevel:
		level = slog.LevelError
	case e.Level == logrus.WarnLevel:
		level = slog.LevelWarn
	case e.Level == logrus.InfoLevel:
		level = slog.LevelInfo
	}
	h.logger.Log(context.Background(), level, e.Message)
	return nil
}

// report prints the final error (only main prints it) and returns the exit code.
func report(w io.Writer, cmd *cobra.Command, err error, interrupted bool) int {
	if err == nil {
		return cmdutil.ExitOK
	}
	if errors.Is(err, context.Canceled) || interrupted {
		fmt.Fprintln(w, "Interrupted.")
		return cmdutil.ExitCancelled
	}
	var status *cmdutil.ExitStatus
	if errors.As(err, &status) {
		return status.Code
	}
	fmt.Fprintf(w, "Error: %v\n", err)
	if hint := cmdutil.Hint(err); hint != "" {
		fmt.Fprintf(w, "Hint: %s\n", hint)
	}
	var fe *cmdutil.FlagError
	if errors.As(err, &fe) {
		fmt.Fprintf(w, "Run '%s --help' for usage.\n", commandPath(cmd, os.Args[1:]))
	}
	return cmdutil.ExitCode(err)
}

// handleSignals cancels the command on the first SIGINT/SIGTERM and calls exit on the second.
func handleSignals(cancel func(), exit func()) (stop func()) {
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case <-ch:
			cancel()
		case <-done:
			return
		}
		select {
		case <-ch:
			exit()
		case <-done:
		}
	}()
	return func() { signal.Stop(ch); close(done) }
}

// reportPanic writes the trace (stored secrets masked) to a file and prints a short message naming it.
func reportPanic(w io.Writer, mask *secretmask.Set, r any, stack []byte) int {
	trace := mask.String(fmt.Sprintf("devtool %s (commit %s) panicked at %s:\n%v\n\n%s",
		buildinfo.Get().Version, buildinfo.Get().Commit, time.Now().UTC().Format(time.RFC3339), r, stack))
	path := filepath.Join(os.TempDir(), fmt.Sprintf("devtool-crash-%d.txt", time.Now().UnixNano()))
	if err := os.WriteFile(path, []byte(trace), 0o600); err != nil {
		fmt.Fprintf(w, "devtool %s crashed (%v); the trace could not be saved (%v):\n%s", buildinfo.Get().Version, r, err, trace)
		return cmdutil.ExitError
	}
	fmt.Fprintf(w, "devtool %s crashed: %v\nThe full trace is in %s; please attach it to a bug report.\n", buildinfo.Get().Version, r, path)
	return cmdutil.ExitError
}

// commandPath names the subcommand the user ran, for the usage hint.
func commandPath(root *cobra.Command, args []string) string {
	if c, _, err := root.Find(args); err == nil && c != nil {
		return c.CommandPath()
	}
	return root.CommandPath()
}

// Package exec implements `devtool exec`.
package exec

import (
	"context"
	"errors"
	"fmt"
	"os"

	"golang.org/x/term"
	utilexec "k8s.io/client-go/util/exec"

	"github.com/spf13/cobra"

	"github.com/devtool/devtool/internal/cmdutil"
	"github.com/devtool/devtool/internal/contexts"
	"github.com/devtool/devtool/internal/dev"
	"github.com/devtool/devtool/internal/iostreams"
	"github.com/devtool/devtool/internal/kube"
)

// Options are the inputs of `devtool exec`.
type Options struct {
	IO      *iostreams.IOStreams
	Target  func(cmdutil.KubeFlags) (*cmdutil.Target, error)
	WorkDir string
	Environ map[string]string
	Getenv  func(string) string

	Kube    cmdutil.KubeFlags
	Env     cmdutil.EnvFlags
	Dev     string
	Command []string
}

// NewCmd builds the command. runF replaces run in tests of flag parsing.
func NewCmd(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IOStreams, Target: f.Target, WorkDir: f.WorkDir, Environ: cmdutil.EnvironMap(f.Environ), Getenv: f.Getenv}
	cmd := &cobra.Command{
		Use:   "exec [devName] -- COMMAND [ARG...]",
		Short: "Run a command in an active dev container",
		Long: `Exec runs a command in the active dev container of this folder, over its own connection, so it
works whether or not 'devtool up' is running. On a terminal the command gets a PTY; otherwise plain
streams. devtool exits with the command's exit code.`,
		Example: `  devtool exec -- go test ./...
  devtool exec api -- sh -c 'env | sort'`,
		Args: func(cmd *cobra.Command, args []string) error {
			at := cmd.ArgsLenAtDash()
			if at < 0 || at == len(args) {
				return cmdutil.FlagErrorf("name the command after --, for example: devtool exec -- sh")
			}
			if at > 1 {
				return cmdutil.FlagErrorf("expected at most one dev container name before --, got %d", at)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			at := cmd.ArgsLenAtDash()
			if at == 1 {
				opts.Dev = args[0]
			}
			opts.Command = args[at:]
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return run(cmd.Context(), opts)
		},
	}
	opts.Kube.AddFlags(cmd)
	opts.Env.AddFlags(cmd, "")
	return cmd
}

func run(ctx context.Context, opts *Options) error {
	s, err := cmdutil.Interruptible(ctx, func() (*dev.Selection, error) {
		return dev.LoadDev(dev.LoadOptions{Env: opts.Env.Options(opts.WorkDir, opts.Environ), Name: opts.Dev,
			Usage: "devtool exec NAME -- COMMAND", Target: func() (*cmdutil.Target, error) { return opts.Target(opts.Kube) }})
	})
	if err != nil {
		return err
	}
	p, d, t := s.Project, s.Dev, s.Target
	pod, container, err := dev.RunningPod(ctx, t.Kube.Clientset, t.Namespace, d)
	if err != nil {
		return cmdutil.WithHint(err, "start it with 'devtool up "+d.Name+"'")
	}
	// Through the agent when this folder holds the dev container's key (it ran up here);
	// otherwise (another machine, another folder) through the exec API.
	if home, err := contexts.HomeDir(opts.Getenv); err == nil {
		sd := &dev.StateDir{Path: dev.StateDirPath(home, p.Dir, d.Name)}
		if _, err := os.Stat(sd.KeyFile()); err == nil {
			return runSSH(ctx, opts, t.Kube, t.Namespace, pod, sd)
		}
	}
	tty := opts.IO.CanPrompt() && opts.IO.IsStdoutTTY()
	eo := kube.ExecOptions{Namespace: t.Namespace, Pod: pod, Container: container, Command: opts.Command,
		Stdout: opts.IO.Out, Stderr: opts.IO.ErrOut, TTY: tty}
	if tty {
		eo.Stdin = opts.IO.In
		if f, ok := opts.IO.In.(*os.File); ok {
			if old, err := term.MakeRaw(int(f.Fd())); err == nil {
				defer func() { _ = term.Restore(int(f.Fd()), old) }()
			}
		}
	} else if hasInput(opts) {
		eo.Stdin = opts.IO.In
	}
	err = t.Kube.Exec(ctx, eo)
	var ee utilexec.ExitError
	if errors.As(err, &ee) {
		return &cmdutil.ExitStatus{Code: ee.ExitStatus()}
	}
	if err != nil {
		return fmt.Errorf("exec in dev container %s: %w", d.Name, err)
	}
	return nil
}

// hasInput reports whether stdin carries data to send (a pipe or a file, not a terminal or
// /dev/null).
func hasInput(opts *Options) bool {
	f, ok := opts.IO.In.(*os.File)
	return !ok || !isCharDevice(f)
}

// isCharDevice reports whether f is a terminal or /dev/null-like device (no data to send).
func isCharDevice(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

//go:build devssh

// Package exec implements `devtool exec`.
package exec

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/spf13/cobra"

	"github.com/devtool/devtool/internal/cmdutil"
	"github.com/devtool/devtool/internal/contexts"
	"github.com/devtool/devtool/internal/dev"
	"github.com/devtool/devtool/internal/devssh"
	"github.com/devtool/devtool/internal/iostreams"
)

// Options are the inputs of `devtool exec`.
type Options struct {
	IO      *iostreams.IOStreams
	Target  func(cmdutil.KubeFlags) (*cmdutil.Target, error)
	WorkDir string
	Environ map[string]string
	Getenv  func(string) string

	Kube    cmdutil.KubeFlags
	File    string
	Dev     string
	Command []string
}

// NewCmd builds the command. runF replaces run in tests of flag parsing.
func NewCmd(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IOStreams, Target: f.Target, WorkDir: f.WorkDir, Environ: cmdutil.EnvironMap(f.Environ), Getenv: f.Getenv}
	cmd := &cobra.Command{
		Use:   "exec [devName] -- COMMAND [ARG...]",
		Short: "Run a command in an active dev container",
		Long: `Exec runs a command in the dev container through its agent, over its own SSH connection, so it
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
	cmd.Flags().StringVarP(&opts.File, "file", "f", "", "path to the devtool.yml or Compose file")
	return cmd
}

func run(ctx context.Context, opts *Options) error {
	p, err := dev.LoadProject(opts.WorkDir, opts.File, opts.Environ)
	if err != nil {
		return err
	}
	d, err := p.Select(opts.Dev)
	if err != nil {
		return cmdutil.WithHint(err, "devtool exec NAME -- COMMAND")
	}
	t, err := opts.Target(opts.Kube)
	if err != nil {
		return err
	}
	pod, container, err := dev.RunningPod(ctx, t.Kube.Clientset, t.Namespace, d)
	if err != nil {
		return cmdutil.WithHint(err, "start it with 'devtool up "+d.Name+"'")
	}
	home, err := contexts.HomeDir(opts.Getenv)
	if err != nil {
		return err
	}
	sd := &dev.StateDir{Path: dev.StateDirPath(home, p.Dir, d.Name)}
	if _, err := os.Stat(sd.KeyFile()); errors.Is(err, fs.ErrNotExist) {
		return cmdutil.WithHint(fmt.Errorf("dev container %s was started from another machine or folder: this one has no key for it", d.Name),
			"run 'devtool up "+d.Name+"' here once (it installs this folder's key)")
	}
	signer, err := devssh.LoadOrCreateKey(sd.KeyFile())
	if err != nil {
		return err
	}
	_ = container
	conn, err := t.Kube.DialPod(ctx, t.Namespace, pod, dev.AgentPort)
	if err != nil {
		return err
	}
	c, err := devssh.Dial(ctx, conn, devssh.ClientConfig{Signer: signer, KnownHostsFile: sd.KnownHostsFile()})
	if err != nil {
		conn.Close()
		return err
	}
	defer c.Close()
	tty := opts.IO.CanPrompt() && opts.IO.IsStdoutTTY()
	code, err := c.Exec(ctx, devssh.ExecOptions{Command: opts.Command, Stdin: opts.IO.In, Stdout: opts.IO.Out, Stderr: opts.IO.ErrOut, TTY: tty})
	if err != nil {
		return err
	}
	if code != 0 {
		return &cmdutil.ExitStatus{Code: code}
	}
	return nil
}

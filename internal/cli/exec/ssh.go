//go:build devssh

package exec

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/devtool/devtool/internal/cmdutil"
	"github.com/devtool/devtool/internal/contexts"
	"github.com/devtool/devtool/internal/dev"
	"github.com/devtool/devtool/internal/devssh"
)

// runSSH is exec through the agent (drafted against the brief's devssh API).
func runSSH(ctx context.Context, opts *Options) error {
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

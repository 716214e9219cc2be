package exec

import (
	"context"
	"os"
	"os/signal"

	"github.com/devtool/devtool/internal/cmdutil"
	"github.com/devtool/devtool/internal/dev"
	"github.com/devtool/devtool/internal/devssh"
	"github.com/devtool/devtool/internal/kube"
)

// runSSH runs the command through the agent over its own SSH connection (the folder's key,
// the pinned host key): PTY with resize on a terminal, signals forwarded, the exit code.
func runSSH(ctx context.Context, opts *Options, k *kube.Client, ns, pod string, sd *dev.StateDir) error {
	signer, err := devssh.LoadOrCreateKey(sd.KeyFile())
	if err != nil {
		return err
	}
	conn, err := k.DialPod(ctx, ns, pod, dev.AgentPort)
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
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, forwardedSignals...)
	defer signal.Stop(sigs)
	eo := devssh.ExecOptions{Command: opts.Command, Stdout: opts.IO.Out, Stderr: opts.IO.ErrOut, TTY: tty, Signals: sigs}
	if tty || hasInput(opts) {
		eo.Stdin = opts.IO.In
	}
	code, err := c.Exec(ctx, eo)
	if err != nil {
		return err
	}
	if code != 0 {
		return &cmdutil.ExitStatus{Code: code}
	}
	return nil
}

// Package ui implements `devtool ui`: the folder's environment as web pages on 127.0.0.1.
package ui

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/devtool/devtool/internal/cmdutil"
	"github.com/devtool/devtool/internal/contexts"
	"github.com/devtool/devtool/internal/dev"
	"github.com/devtool/devtool/internal/iostreams"
	"github.com/devtool/devtool/internal/platform/web"
)

// Options are the inputs of `devtool ui`.
type Options struct {
	IO      *iostreams.IOStreams
	Target  func(cmdutil.KubeFlags) (*cmdutil.Target, error)
	Logger  *slog.Logger
	WorkDir string
	Environ map[string]string
	Getenv  func(string) string
	// Listen opens the listener (net.Listen; tests may wrap it).
	Listen func(network, addr string) (net.Listener, error)

	Kube cmdutil.KubeFlags
	Env  cmdutil.EnvFlags
	Port int
}

// NewCmd builds the command. runF replaces run in tests of flag parsing.
func NewCmd(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IOStreams, Target: f.Target, Logger: f.Logger, WorkDir: f.WorkDir,
		Environ: cmdutil.EnvironMap(f.Environ), Getenv: f.Getenv, Listen: net.Listen}
	cmd := &cobra.Command{
		Use:   "ui",
		Short: "Show the environment, its logs and running ups in a browser",
		Long: `Serves a dashboard of this folder's environment on 127.0.0.1: its status as devtool recorded
it, services, pods, endpoints, logs (followed live), and each dev container with the 'devtool up'
that runs it on this machine: its file synchronization (files, pending, conflicts, errors, bytes)
and forwards. It reads the cluster with your own kubeconfig or devtool context; no platform is
needed.

The address it prints carries a random token: the dashboard refuses requests without it, and it
never listens beyond loopback. Press Ctrl-C to stop.`,
		Example: `  devtool ui
  devtool ui --port 8765`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.Port < 0 || opts.Port > 65535 {
				return cmdutil.FlagErrorf("--port must be 0 (any free port) to 65535, not %d", opts.Port)
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return run(cmd.Context(), opts)
		},
	}
	opts.Kube.AddFlags(cmd)
	opts.Env.AddFlags(cmd, "path to the devtool.yml or Compose file")
	cmd.Flags().IntVar(&opts.Port, "port", 0, "port on 127.0.0.1 to serve on (0: any free port)")
	return cmd
}

func run(ctx context.Context, opts *Options) error {
	p, err := cmdutil.Interruptible(ctx, func() (*dev.Project, error) {
		return dev.LoadProject(opts.Env.Options(opts.WorkDir, opts.Environ))
	})
	if err != nil {
		return err
	}
	for _, w := range p.Warnings {
		fmt.Fprintln(opts.IO.ErrOut, "Warning:", w)
	}
	target, err := opts.Target(opts.Kube)
	if err != nil {
		return err
	}
	home, err := contexts.HomeDir(opts.Getenv)
	if err != nil {
		return err
	}
	var devs []web.LocalDevSource
	for _, d := range p.Devs {
		s := web.LocalDevSource{Name: d.Name, StateDir: dev.StateDirPath(home, p.Dir, d.Name)}
		for _, f := range d.Forward {
			s.Forwards = append(s.Forwards, web.LocalForward{Local: f.Local, Service: f.Service, Remote: f.Remote})
		}
		devs = append(devs, s)
	}
	var b [24]byte
	if _, err := rand.Read(b[:]); err != nil {
		return err
	}
	token := hex.EncodeToString(b[:])
	ln, err := opts.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(opts.Port)))
	if err != nil {
		return fmt.Errorf("listening on 127.0.0.1:%d: %w", opts.Port, err)
	}
	fmt.Fprintf(opts.IO.ErrOut, "Dashboard of environment %s in namespace %s (Ctrl-C to stop):\n", p.Name, target.Namespace)
	fmt.Fprintf(opts.IO.Out, "http://%s/?token=%s\n", ln.Addr(), token)
	err = web.ServeLocal(ctx, ln, web.LocalOptions{
		Kube: target.Kube.Clientset, Namespace: target.Namespace, Environment: p.Name, Context: target.ContextName,
		EndpointPort: target.EndpointPort,
		Devs:         devs, Token: token, Log: opts.Logger,
	})
	if ctx.Err() != nil { // Ctrl-C is how ui ends: not an error
		return nil
	}
	return err
}

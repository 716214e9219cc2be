// Package up implements `devtool up`.
package up

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/klog/v2"

	"github.com/devtool/devtool/internal/cmdutil"
	"github.com/devtool/devtool/internal/contexts"
	"github.com/devtool/devtool/internal/deploy"
	"github.com/devtool/devtool/internal/dev"
	"github.com/devtool/devtool/internal/environment"
	"github.com/devtool/devtool/internal/iostreams"
	"github.com/devtool/devtool/internal/yamlsrc"
)

// Options are the inputs of `devtool up`.
type Options struct {
	IO      *iostreams.IOStreams
	Target  func(cmdutil.KubeFlags) (*cmdutil.Target, error)
	WorkDir string
	Environ map[string]string
	Getenv  func(string) string
	Logger  *slog.Logger
	// Deploy deploys the environment (environment.Deployer, as `devtool deploy --wait` does, by
	// default).
	Deploy func(ctx context.Context, opts *Options, p *dev.Project, t *cmdutil.Target) error
	// Agent gives the agent binary (agentbin.For).
	Agent dev.AgentSource

	Kube        cmdutil.KubeFlags
	Env         cmdutil.EnvFlags // --file, --name
	Dev         string
	SetEnv      []string // --env NAME=value
	Command     string   // --command
	ForceDeploy bool
	Reset       bool
	Force       bool // --force: take the dev container over from another up
	// AcceptDeletions (--accept-deletions) carries over what the sync's halts stop.
	AcceptDeletions bool
	// PortFree probes a forward's local port before anything is changed (dev.PortFree).
	PortFree func(port int) error
}

// NewCmd builds the command. runF replaces run in tests of flag parsing.
func NewCmd(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IOStreams, Target: f.Target, WorkDir: f.WorkDir, Environ: cmdutil.EnvironMap(f.Environ),
		Getenv: f.Getenv, Logger: f.Logger, Deploy: deployEnvironment, Agent: agentSource(f.Getenv), PortFree: dev.PortFree}
	cmd := &cobra.Command{
		Use:   "up [devName]",
		Short: "Replace a service by a dev container: synced files, forwards, a shell",
		Long: `Up replaces a service of the deployed environment by a development container: a copy of its
Deployment or StatefulSet (<name>-devtool, same pod labels, so its Services route to it) running the
devtool agent, with the image, command, environment, resources and security context of the dev
entry in devtool.yml (or, in a folder with only a Compose file, of the Compose service: its host
volumes become the synced folders). The original is scaled to zero and 'devtool down' restores it.

Everything goes over one SSH connection to the agent through a Kubernetes port-forward: the folders
of 'sync' (two-way), the ports of 'forward' (listening on 127.0.0.1) and 'reverse', and the dev
command. On a terminal up ends in the dev command (default sh, or --command) with a PTY; without a
terminal it prints one line per state change and keeps running until SIGINT or SIGTERM. Either way
the dev container stays active afterwards ('devtool exec' works) until 'devtool down'.

When the connection drops (the pod was deleted, the API server restarted) up reconnects and every
forward answers again on the same local port. When the original is redeployed the dev container is
rebuilt from it.

The file synchronization halts a folder instead of deleting what looks like an accident: a local
folder found empty or replaced by another (a disk or share not mounted, a folder restored empty),
the folder emptied in the dev container (rm -rf), or most of a side's files deleted at once. up
and 'devtool status' then say halted, naming the folder and what was seen; the other folders go
on, and the next connection looks again (a remounted disk simply goes on). To go on otherwise,
stop up and start it again with --reset (nothing is deleted: each side gets back what it lacks)
or --accept-deletions (the deletions are carried over; only for that up).

When the connection drops, the dev command on a terminal keeps running in the dev container (for
10 minutes) and up attaches to it again once reconnected: the same shell, its background jobs
gone on, the keys typed meanwhile delivered, the output it wrote meanwhile shown (up to 256 KiB;
up says when some was lost). An up started again after one that died attaches to the command
that one left running.

A dev container has one owner: the up holding its lease (Lease devtool-dev-<name>, renewed while up
runs, expired 30s after an up died). An up from another machine, home or folder is refused, naming
the holder (user@host, folder, since when); --force takes the dev container over and the other up
stops. Each machine's SSH key is added to the dev container's authorized keys, never put in place
of another's.


Before it changes anything in the cluster (and before the deploy it may run first), up checks the
dev entry: each sync folder's local side is an existing folder inside the project (one outside
needs --allow-outside-volumes) and its remote side a clean absolute path that is not the root or a
system folder and neither repeats nor nests in another; no local forward port or remote reverse
port twice, and every local forward port free; environment names valid; the image reference
parses; resource limits not below requests; the workdir absolute and clean. A problem is reported
with its file, line and field, and up exits with code 2.`,
		Example: `  devtool up
  devtool up api --env LOG_LEVEL=debug --command "npm run dev"
  devtool up web --namespace dev --deploy`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				opts.Dev = args[0]
			}
			if _, err := parseEnv(opts.SetEnv); err != nil {
				return cmdutil.FlagErrorf("%v", err)
			}
			if opts.Reset && opts.AcceptDeletions {
				return cmdutil.FlagErrorf("--reset and --accept-deletions cannot be combined: --reset gets the missing files back from the other side, --accept-deletions deletes them there")
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return run(cmd.Context(), opts)
		},
	}
	opts.Kube.AddFlags(cmd)
	opts.Env.AddFlags(cmd, "")
	cmd.Flags().StringArrayVarP(&opts.SetEnv, "env", "e", nil, "an environment variable NAME=value for the dev container (repeatable)")
	cmd.Flags().StringVar(&opts.Command, "command", "", "the command to run in the dev container (default: the dev entry's, else sh)")
	cmd.Flags().BoolVar(&opts.ForceDeploy, "deploy", false, "deploy the environment first, even when it is deployed")
	cmd.Flags().BoolVar(&opts.Force, "force", false, "take the dev container over from another machine's or folder's up (that up stops)")
	cmd.Flags().BoolVar(&opts.Reset, "reset", false, "forget the sync state: compare every file anew (differences kept as conflicts); restores what a halted sync would have deleted")
	cmd.Flags().BoolVar(&opts.AcceptDeletions, "accept-deletions", false, "carry over the deletions a halted sync stopped (an emptied or replaced folder, most files deleted at once), for this up")
	return cmd
}

func parseEnv(list []string) (map[string]string, error) {
	out := map[string]string{}
	for _, e := range list {
		k, v, ok := strings.Cut(e, "=")
		if !ok {
			return nil, fmt.Errorf("--env %s: expected NAME=value", yamlsrc.Quote(e))
		}
		if err := dev.EnvFlagError(k, v); err != nil {
			return nil, err
		}
		out[k] = v
	}
	return out, nil
}

// prepared is what run has set up before connecting.
type prepared struct {
	project *dev.Project
	dev     *dev.Up
	state   *dev.StateDir
	target  *cmdutil.Target
	log     io.Closer
}

// prepare loads the folder, picks the dev entry, takes its state folder and deploys when needed.
func prepare(ctx context.Context, opts *Options) (*prepared, error) {
	// The target is resolved after the entry is checked: bad input is reported first, whatever
	// the state of the cluster or the platform.
	lo := dev.LoadOptions{Env: opts.Env.Options(opts.WorkDir, opts.Environ), Name: opts.Dev, Usage: "devtool up NAME"}
	if opts.IO.CanPrompt() {
		lo.Pick = func(names []string) (string, error) { return prompt(opts.IO, names) }
	}
	s, err := cmdutil.Interruptible(ctx, func() (*dev.Selection, error) { return dev.LoadDev(lo) })
	if err != nil {
		return nil, err
	}
	p, d := s.Project, s.Dev
	for _, w := range p.Warnings {
		fmt.Fprintf(opts.IO.ErrOut, "Warning: %s\n", w)
	}
	env, err := parseEnv(opts.SetEnv)
	if err != nil {
		return nil, cmdutil.FlagErrorf("%v", err)
	}
	// The whole entry is checked before anything is deployed, scaled or created (the local
	// ports once the lock is held: a running up of this entry holds them, and the lock says so).
	check := dev.CheckOptions{ProjectDir: p.Dir, AllowOutside: opts.Env.AllowOutside, Env: env}
	if err := dev.Validate(d, check); err != nil {
		return nil, &cmdutil.InputError{Err: err}
	}
	t, err := opts.Target(opts.Kube)
	if err != nil {
		return nil, err
	}
	home, err := contexts.HomeDir(opts.Getenv)
	if err != nil {
		return nil, err
	}
	sd, err := dev.OpenStateDir(home, p.Dir, d.Name)
	if err != nil {
		return nil, err
	}
	if err := sd.Lock(); err != nil {
		var held *dev.HeldError
		if errors.As(err, &held) {
			return nil, cmdutil.WithHint(err, fmt.Sprintf("the dev container is in use by process %d; 'devtool exec %s' works alongside it", held.PID, d.Name))
		}
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			sd.Unlock()
		}
	}()
	if opts.PortFree != nil && len(d.Forward) > 0 {
		check.PortFree = opts.PortFree
		if err := dev.Validate(d, check); err != nil {
			return nil, &cmdutil.InputError{Err: err}
		}
	}
	// Rotated at a size cap, never opened through a link, never blocking on a FIFO.
	logf, err := sd.OpenLog()
	if err != nil {
		return nil, err
	}
	logger := slog.New(slog.NewTextHandler(logf, &slog.HandlerOptions{Level: slog.LevelDebug})).With("dev", d.Name)
	restoreKlog := ownClientGoLogging(logger, opts.Logger)

	deployed := false
	if !opts.ForceDeploy {
		st, err := (&deploy.StateStore{Clientset: t.Kube.Clientset, Namespace: t.Namespace}).Get(ctx, p.Name)
		deployed = err == nil && st != nil && st.Status == deploy.StatusDeployed
		if !deployed {
			// Deployed by other means (kubectl, helm): the workload is there.
			_, ferr := dev.FindWorkload(ctx, t.Kube.Clientset, t.Namespace, d)
			deployed = ferr == nil
		}
	}
	if !deployed {
		fmt.Fprintf(opts.IO.ErrOut, "Deploying %s to namespace %s first\n", p.Name, t.Namespace)
		if err := opts.Deploy(ctx, opts, p, t); err != nil {
			restoreKlog()
			logf.Close()
			return nil, err
		}
	}
	// The environment's endpoints serve the dev container too (same pod labels): say where.
	if eps, err := deploy.Endpoints(ctx, t.Kube.Clientset, t.Namespace, p.Name, t.EndpointPort); err != nil {
		logger.Debug("listing the endpoints", "err", err)
	} else {
		for _, e := range eps {
			if e.URL != "" {
				fmt.Fprintf(opts.IO.ErrOut, "Endpoint: %s\n", e.URL)
			}
		}
	}
	u := &dev.Up{Kube: t.Kube, Namespace: t.Namespace, Dev: d, Env: env, State: sd, Agent: opts.Agent, Logger: logger, LazyInstall: true}
	ok = true
	return &prepared{project: p, dev: u, state: sd, target: t, log: closerFunc(func() error { restoreKlog(); return logf.Close() })}, nil
}

type closerFunc func() error

func (f closerFunc) Close() error { return f() }

// ownClientGoLogging sends client-go's logging (klog: ended watches, port-forward stream
// errors, "Unhandled Error" lines) to up's log, where it would otherwise go to the process's
// logger on stderr and draw over the dev command's terminal. The returned func gives it back to
// root (klog's own output when nil).
func ownClientGoLogging(up, root *slog.Logger) (restore func()) {
	klog.SetSlogLogger(up)
	return func() {
		if root != nil {
			klog.SetSlogLogger(root)
		} else {
			klog.ClearLogger()
		}
	}
}

// deployEnvironment deploys the environment as `devtool deploy --wait` would (builds missing
// images, runs the deploy section), through the same environment.Deployer, in this process.
func deployEnvironment(ctx context.Context, opts *Options, p *dev.Project, t *cmdutil.Target) error {
	printed := map[string]bool{} // up has shown the environment's warnings already
	for _, w := range p.Warnings {
		printed[w] = true
	}
	d := &environment.Deployer{Env: p.Env, Target: t, Environ: opts.Environ, Getenv: opts.Getenv, Logger: opts.Logger,
		AllowOutsideVolumes: opts.Env.AllowOutside, Wait: true, Timeout: 5 * time.Minute, Out: opts.IO.ErrOut,
		Warn: func(w string) {
			if !printed[w] {
				fmt.Fprintf(opts.IO.ErrOut, "Warning: %s\n", w)
			}
		},
		Progress: func(s string) { fmt.Fprintln(opts.IO.ErrOut, s) },
	}
	if _, err := d.Deploy(ctx); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("deploying before up: %w", err)
	}
	fmt.Fprintf(opts.IO.ErrOut, "Environment %s deployed to namespace %s\n", p.Name, t.Namespace)
	return nil
}

func prompt(io *iostreams.IOStreams, names []string) (string, error) {
	fmt.Fprintln(io.ErrOut, "Which dev container?")
	for i, n := range names {
		fmt.Fprintf(io.ErrOut, "  %d) %s\n", i+1, n)
	}
	fmt.Fprint(io.ErrOut, "Number: ")
	var n int
	if _, err := fmt.Fscanln(io.In, &n); err != nil || n < 1 || n > len(names) {
		return "", cmdutil.FlagErrorf("no dev container chosen: name one, for example 'devtool up %s'", names[0])
	}
	return names[n-1], nil
}

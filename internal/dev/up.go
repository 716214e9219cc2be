package dev

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/devtool/devtool/internal/devssh"
	"github.com/devtool/devtool/internal/kube"
	"github.com/devtool/devtool/internal/manifest"
)

// Up is the cluster half of `devtool up`: activation, agent install, state reporting and the
// watcher. The connection half (SSH session, forwards, sync) uses the PodDialer it returns.
type Up struct {
	Kube      *kube.Client
	Namespace string
	Dev       *manifest.Dev
	Env       map[string]string // --env
	State     *StateDir
	Agent     AgentSource
	// AuthorizedKey is the dev container's public key (authorized_keys format).
	AuthorizedKey []byte
	// HostKey is the agent host key the CLI keeps for this dev container (OpenSSH PEM);
	// KnownHostsFile is where its public half is pinned each time Install places it in a new
	// pod (see InstallResult.HostKeyInstalled). Both empty: the agent makes its own key.
	HostKey        []byte
	KnownHostsFile string
	// Progress gets every state change (after it is written to the state file); may be nil.
	Progress func(Event)
	// LazyInstall leaves the agent install of the first pod to the dialer: on a warm dev
	// volume its first dial goes straight to the agent (PodDialer.WarmVolume), saving the
	// install's exec on every up; the caller then checks the agent's version with CheckAgent.
	// A cold volume costs one failed dial before the install.
	LazyInstall bool
	// FreshHome is told when Install found a pod's dev home without any agent or without a
	// host key (another release's agent replaced is an upgrade, not a fresh home): the volume
	// is new or was emptied (an emptyDir home after a pod restart, a volume deleted
	// elsewhere), so whatever the sync engine remembers of the remote side is gone, and a
	// file missing there is no deletion to carry over. May be nil.
	FreshHome func(pod string)
	Logger    *slog.Logger

	onReport  func(Event)  // Run's own hook (the ready state starts the dev command)
	onRebuilt func(string) // Run's own hook: Follow rebuilt the dev container, its new pod
	stateMu   sync.Mutex   // the state file is read, changed and written by several goroutines

	// installMu makes installs one at a time: two uploads at once would write the same
	// temporary file.
	installMu sync.Mutex
	sumsOnce  sync.Once
	sums      map[string]string // this CLI's agent binaries' sha256 by architecture
}

// StoppedError ends `up` when something outside changed the dev container.
type StoppedError struct{ Change Change }

func (e *StoppedError) Error() string { return e.Change.String() }

// Report records a state change in the state file and passes it on.
func (u *Up) Report(e Event) {
	if u.State != nil {
		u.stateMu.Lock()
		r, _ := u.State.ReadState()
		r.State, r.Message, r.Namespace, r.PID = e.State, e.Message, u.Namespace, os.Getpid()
		err := u.State.WriteState(r)
		u.stateMu.Unlock()
		if err != nil && u.Logger != nil {
			u.Logger.Warn("writing the state file", "err", err)
		}
	}
	if u.Logger != nil {
		u.Logger.Info("state", "state", e.State, "message", e.Message)
	}
	if u.onReport != nil {
		u.onReport(e)
	}
	if u.Progress != nil {
		u.Progress(e)
	}
}

func (u *Up) activateOptions() ActivateOptions {
	return ActivateOptions{Client: u.Kube.Clientset, Namespace: u.Namespace, Dev: u.Dev, Env: u.Env, Progress: u.Report}
}

// Start activates the dev container, installs the agent and the key in its pod and returns
// a dialer to its agent. A failure is reported as the failed state.
func (u *Up) Start(ctx context.Context) (*Active, *PodDialer, error) {
	a, err := Activate(ctx, u.activateOptions())
	if err != nil {
		u.fail(err)
		return nil, nil, err
	}
	u.recordPod(a)
	persistent := u.Dev.PersistentVolume == nil || u.Dev.PersistentVolume.Enabled
	lazy := u.LazyInstall && persistent
	if lazy {
		u.Report(Event{State: StateAttaching, Message: "connecting to the agent in pod " + a.Pod})
	} else {
		u.Report(Event{State: StateAttaching, Message: "installing the agent in pod " + a.Pod})
		if err := u.install(ctx, a.Pod, a.Container); err != nil {
			u.fail(err)
			return nil, nil, err
		}
	}
	d := NewPodDialer(u.Kube, u.Namespace, a, u.install)
	d.Logger = u.Logger
	// The agent and keys are on a persistent dev volume (installed now, or by an earlier up
	// when lazy): new pods find them there.
	d.WarmVolume = persistent
	if lazy {
		delete(d.installed, a.PodUID)
	}
	return a, d, nil
}

// CheckAgent makes sure the agent on the dev volume is this CLI's when a dial skipped the
// install (PodDialer.InstallSkipped): it reads the recorded hash and the machine over the SSH
// connection and, when the hash differs, installs this CLI's agent (it runs from the pod's
// next start; the running one keeps serving). It returns whether it installed.
func (u *Up) CheckAgent(ctx context.Context, c *devssh.Client, pod, container string) (bool, error) {
	have, machine, err := volumeAgent(ctx, c)
	if err != nil {
		return false, err
	}
	_, sum, err := u.Agent(goarch(machine, ""))
	if err != nil {
		return false, err
	}
	if have == sum {
		return false, nil
	}
	if u.Logger != nil {
		u.Logger.Warn("the agent on the dev volume is another version: installing this one (it runs from the next pod start)", "pod", pod, "have", have, "want", sum)
	}
	return true, u.install(ctx, pod, container)
}

// volumeAgent reads, over the SSH connection, the sha256 recorded for the agent binary on
// the dev volume and the machine (uname -m).
func volumeAgent(ctx context.Context, c *devssh.Client) (have, machine string, err error) {
	var out bytes.Buffer
	code, err := c.Exec(ctx, devssh.ExecOptions{Command: []string{"sh", "-c",
		"echo \"sha=$(cat " + AgentPath + ".sha256 2>/dev/null)\"; echo \"arch=$(uname -m 2>/dev/null)\""}, Stdout: &out})
	if err != nil {
		return "", "", fmt.Errorf("checking the agent's version: %w", err)
	}
	if code != 0 {
		return "", "", fmt.Errorf("checking the agent's version: exit code %d", code)
	}
	for _, line := range strings.Split(out.String(), "\n") {
		if v, ok := strings.CutPrefix(line, "sha="); ok {
			have = strings.TrimSpace(v)
		}
		if v, ok := strings.CutPrefix(line, "arch="); ok {
			machine = strings.TrimSpace(v)
		}
	}
	return have, machine, nil
}

func (u *Up) fail(err error) {
	if !errors.Is(err, context.Canceled) {
		u.Report(Event{State: StateFailed, Message: err.Error()})
	}
}

func (u *Up) recordPod(a *Active) {
	if u.State == nil {
		return
	}
	u.stateMu.Lock()
	defer u.stateMu.Unlock()
	r, _ := u.State.ReadState()
	r.Pod, r.Workload = a.Pod, a.Original.String()
	_ = u.State.WriteState(r)
}

func (u *Up) install(ctx context.Context, pod, container string) error {
	u.installMu.Lock()
	defer u.installMu.Unlock()
	res, err := Install(ctx, InstallOptions{Exec: u.Kube, Namespace: u.Namespace, Pod: pod, Container: container,
		Agent: u.Agent, AuthorizedKey: u.AuthorizedKey, HostKey: u.HostKey, LookupNodeArch: func(ctx context.Context) string { return NodeArch(ctx, u.Kube, u.Namespace, pod) }})
	if err != nil {
		return fmt.Errorf("dev %s: %w", u.Dev.Name, err)
	}
	if res.HostKeyInstalled && u.KnownHostsFile != "" {
		if err := PinHostKey(u.KnownHostsFile, u.HostKey); err != nil {
			return fmt.Errorf("dev %s: pinning the agent's host key: %w", u.Dev.Name, err)
		}
	}
	if u.Logger != nil {
		u.Logger.Info("agent installed", "pod", pod, "arch", res.Arch, "uploaded", res.Uploaded, "hostKeyInstalled", res.HostKeyInstalled)
	}
	// Another release's agent replaced is no new home: only a volume without an agent or
	// without a host key is.
	if (res.Fresh || res.HostKeyInstalled) && u.FreshHome != nil {
		u.FreshHome(pod)
	}
	return nil
}

// Follow runs the watcher until ctx ends or the dev container stops: a redeployed original
// rebuilds the mirror (the dialer moves to its pod, so the session reconnects); a deleted
// original or a `down` elsewhere returns a *StoppedError.
func (u *Up) Follow(ctx context.Context, a *Active, d *PodDialer) error {
	for {
		ch, err := Watch(ctx, u.Kube.Clientset, u.Namespace, a)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			// A broken watch (API server restart) is retried after a pause.
			if u.Logger != nil {
				u.Logger.Warn("watch failed", "err", err)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(2 * time.Second):
			}
			continue
		}
		if ch != OriginalChanged {
			return &StoppedError{Change: ch}
		}
		u.Report(Event{State: StateActivating, Message: ch.String() + ": rebuilding the dev container"})
		na, err := Activate(ctx, u.activateOptions())
		if err != nil {
			u.fail(err)
			return err
		}
		u.recordPod(na)
		a = na
		d.SetActive(na)
		// Ready again once the session is connected to the new pod (Run reports it).
		u.Report(Event{State: StateAttaching, Message: "rebuilt; connecting to pod " + na.Pod})
		if u.onRebuilt != nil {
			u.onRebuilt(na.Pod)
		}
	}
}

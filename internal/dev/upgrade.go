package dev

import (
	"context"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devtool/devtool/internal/agentversion"
	"github.com/devtool/devtool/internal/devssh"
	"github.com/devtool/devtool/internal/filesync"
)

// Upgrading an older agent in place. Each new connection's SSH banner says the running
// agent's release, newest sync protocol and binary (agentversion); an agent older than
// this CLI's (agentversion.Outdated) is replaced before the connection is used:
//
//  1. this CLI's agent is put on the dev volume (Install, unless it is there already);
//  2. the running agent is asked to re-execute it in its own place (restart@devtool:
//     same process, the container keeps running). An agent of this release or later hands
//     its kept commands (the dev command run with a terminal, which an earlier up may have
//     left running) to the new binary when that binary takes them (`devtool-agent
//     capabilities`): the processes stay the agent's children across the exec, their
//     terminals stay open, and the next connection attaches to the same process as after a
//     reconnection (internal/agent/handoff_linux.go); its reply says so
//     (agentversion.RestartReply). An agent of a release before the handoff ends its
//     commands before the exec. An agent of a release before the request (protocol 2) gets
//     SIGTERM instead, and the container restarts with its pod: the volume, the sync state
//     and the pod stay, the commands end;
//  3. the next connection must come from this CLI's agent; if the same pod still runs the
//     old one (or none answers within upgradeWait), the pod is deleted and its workload
//     makes a new one (a persistent dev volume keeps the sync state); after that, `up`
//     goes on with whatever agent answers (the sync protocol is negotiated down).
//
// Commands that were not handed over end, as at a reconnection to a new pod (the dev
// command runs again on the next connection). One line is printed: the upgrade done (and
// whether the dev command kept running), or why not.

// upgradeWait bounds the wait for an agent's connection after its restart was asked.
const upgradeWait = 2 * time.Minute

// upgradeResult is what agentUpgrader.check decided for a connection.
type upgradeResult int

const (
	upgradeNone       upgradeResult = iota // the agent is current: use the connection
	upgradeRestarting                      // the agent restarts: wait for the next connection
	upgradeDone                            // the agent was just upgraded: use the connection
)

// agentUpgrader upgrades the agents of one `up` session.
type agentUpgrader struct {
	u         *Up
	d         *PodDialer
	container func() string
	notify    func(format string, args ...any)

	mu      sync.Mutex
	pending *upgradeAttempt // a restart asked, its next connection not seen yet
	tries   map[string]int  // restarts asked per pod
}

type upgradeAttempt struct {
	pod   string
	from  agentversion.Info
	how   string
	timer *time.Timer
}

func newAgentUpgrader(u *Up, d *PodDialer, container func() string, notify func(string, ...any)) *agentUpgrader {
	return &agentUpgrader{u: u, d: d, container: container, notify: notify, tries: map[string]int{}}
}

// restarting reports whether an agent restart is under way (its connection loss is no news).
func (g *agentUpgrader) restarting() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.pending != nil
}

// agentSums are the sha256 of the agents this CLI carries, by architecture (those it can load).
func (u *Up) agentSums() map[string]string {
	u.sumsOnce.Do(func() {
		u.sums = map[string]string{}
		if u.Agent == nil {
			return
		}
		for _, arch := range []string{"amd64", "arm64"} {
			if _, sum, err := u.Agent(arch); err == nil {
				u.sums[arch] = sum
			}
		}
	})
	return u.sums
}

// current reports whether the running agent (banner i) is this CLI's, without asking the
// pod: its binary's sum is one this CLI carries, or it speaks a newer protocol.
func (g *agentUpgrader) current(i agentversion.Info) bool {
	for _, sum := range g.u.agentSums() {
		if !agentversion.Outdated(i, filesync.ProtocolVersion, sum) {
			return true
		}
	}
	return false
}

// check looks at a new connection's agent before it is used (see the top of this file).
func (g *agentUpgrader) check(ctx context.Context, c *devssh.Client) upgradeResult {
	pod := g.d.Pod()
	info, err := agentversion.Parse(string(c.SSH().ServerVersion()))
	if err != nil {
		g.u.logWarn("not checking the agent's version", "pod", pod, "err", err)
		return upgradeNone
	}
	g.mu.Lock()
	p := g.pending
	g.pending = nil
	g.mu.Unlock()
	if p != nil {
		p.timer.Stop()
	}
	if g.current(info) {
		if p != nil {
			g.u.logInfo("agent upgraded", "pod", pod, "from", p.from.String(), "to", info.String(), "how", p.how)
			where := "in pod " + pod
			if pod != p.pod {
				where = fmt.Sprintf("in pod %s (replacing %s)", pod, p.pod)
			}
			g.notify("upgraded the dev container's agent %s from %s to %s: %s", where, p.from, info, p.how)
			return upgradeDone
		}
		return upgradeNone
	}
	if g.container == nil {
		return upgradeNone
	}
	container := g.container()
	g.mu.Lock()
	tries := g.tries[pod]
	g.tries[pod]++
	g.mu.Unlock()
	if tries >= 3 {
		if tries == 3 {
			g.notify("the dev container's agent in pod %s is still %s after an upgrade; going on with it (the sync protocol is negotiated)", pod, info)
		}
		return upgradeNone
	}
	// The binary on the volume first (the running agent restarts into it).
	have, machine, err := volumeAgent(ctx, c)
	if err != nil {
		g.u.logWarn("upgrading the agent: reading its volume", "pod", pod, "err", err)
		return upgradeNone
	}
	_, sum, err := g.u.Agent(goarch(machine, ""))
	if err != nil {
		g.u.logWarn("upgrading the agent", "pod", pod, "err", err)
		return upgradeNone
	}
	if !agentversion.Outdated(info, filesync.ProtocolVersion, sum) {
		return upgradeNone
	}
	if have != sum {
		if err := g.u.install(ctx, pod, container); err != nil {
			g.u.logWarn("upgrading the agent: installing it", "pod", pod, "err", err)
			g.notify("could not upgrade the dev container's agent in pod %s (%s): %v; going on with it", pod, info, err)
			g.mu.Lock()
			g.tries[pod] = 4
			g.mu.Unlock()
			return upgradeNone
		}
	}
	how := ""
	switch {
	case tries == 0 && info.Banner:
		ok, reply, err := c.SSH().SendRequest(agentversion.RestartRequest, true, nil)
		if err == nil && ok {
			how = restartedHow(agentversion.ParseRestartReply(reply))
			break
		}
		g.u.logWarn("the agent refused to restart in place", "pod", pod, "err", err, "reply", string(reply))
		fallthrough
	case tries <= 1:
		// SIGTERM to the agent (the parent of the command run here): it ends, and the
		// container restarts with the pod, running the new binary.
		ectx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, _ = c.Exec(ectx, devssh.ExecOptions{Command: []string{"sh", "-c", "kill -TERM $PPID"}})
		cancel()
		how = "its container restarted; the pod, its volume and the sync state kept"
		if tries == 0 {
			g.mu.Lock()
			g.tries[pod] = 2
			g.mu.Unlock()
		}
	default:
		if err := g.deletePod(ctx, pod); err != nil {
			g.notify("could not upgrade the dev container's agent in pod %s (%s): %v; going on with it", pod, info, err)
			return upgradeNone
		}
		how = fmt.Sprintf("pod %s deleted after its agent did not restart (a persistent dev volume keeps the sync state)", pod)
	}
	g.u.logInfo("upgrading the agent", "pod", pod, "from", info.String(), "how", how)
	a := &upgradeAttempt{pod: pod, from: info, how: how}
	a.timer = time.AfterFunc(upgradeWait, func() {
		g.mu.Lock()
		late := g.pending == a
		g.mu.Unlock()
		if late && ctx.Err() == nil {
			g.u.logWarn("no agent answered after its restart: deleting the pod", "pod", pod)
			if err := g.deletePod(ctx, pod); err != nil {
				g.u.logWarn("deleting the pod", "pod", pod, "err", err)
			}
		}
	})
	g.mu.Lock()
	g.pending = a
	g.mu.Unlock()
	c.Close()
	return upgradeRestarting
}

// restartedHow says how an agent that accepted a restart in place went on (its reply).
func restartedHow(r agentversion.RestartReply) string {
	const kept = "the pod, its volume and the sync state kept"
	switch {
	case r.Handoff && r.Kept == 1:
		return "restarted in place, the dev command kept running; " + kept
	case r.Handoff && r.Kept > 1:
		return fmt.Sprintf("restarted in place, its %d kept commands (the dev command) kept running; %s", r.Kept, kept)
	case r.Handoff:
		return "restarted in place; " + kept
	}
	return "restarted in place (the commands it ran ended: the dev command starts again); " + kept
}

func (g *agentUpgrader) deletePod(ctx context.Context, pod string) error {
	err := g.u.Kube.Clientset.CoreV1().Pods(g.u.Namespace).Delete(ctx, pod, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// stop ends a pending attempt's timer (the session ends).
func (g *agentUpgrader) stop() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.pending != nil {
		g.pending.timer.Stop()
		g.pending = nil
	}
}

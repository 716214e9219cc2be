//go:build integration

package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devtool/devtool/internal/kube"
	"github.com/devtool/devtool/internal/testcluster"
	"github.com/devtool/devtool/internal/testrelease"
)

// startBin is user.start with another devtool binary and its own agent binary (the
// previous release's).
func (u *user) startBin(bin, agent string, args ...string) *bg {
	u.t.Helper()
	return u.startCmd(exec.Command(bin, args...), bin+" "+strings.Join(args, " "), "DEVTOOL_AGENT_BINARY="+agent)
}

// interrupt ends an up with SIGINT and waits for it.
func (b *bg) interrupt(t *testing.T) {
	t.Helper()
	_ = b.cmd.Process.Signal(syscall.SIGINT)
	select {
	case err := <-b.done:
		b.done <- err
		if err != nil {
			t.Fatalf("up after SIGINT: %v\n%s", err, b.output())
		}
	case <-time.After(time.Minute):
		t.Fatalf("up did not end after SIGINT:\n%s", b.output())
	}
}

// devPod is the live pod of dev container web, with its dev container's restart count.
func devPod(t *testing.T, c *testcluster.Cluster, ns string) (*corev1.Pod, int32) {
	t.Helper()
	return devPodOf(t, c, ns, "web")
}

// devPodOf is the live pod of dev container dev, with its containers' restart count.
func devPodOf(t *testing.T, c *testcluster.Cluster, ns, dev string) (*corev1.Pod, int32) {
	t.Helper()
	pods, err := c.Clientset.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "dev.devtool/dev=" + dev})
	if err != nil {
		t.Fatal(err)
	}
	var live []*corev1.Pod
	for i := range pods.Items {
		if pods.Items[i].DeletionTimestamp == nil {
			live = append(live, &pods.Items[i])
		}
	}
	if len(live) != 1 {
		t.Fatalf("%d live pods of dev container %s, want one", len(live), dev)
	}
	var restarts int32
	for _, s := range live[0].Status.ContainerStatuses {
		restarts += s.RestartCount
	}
	return live[0], restarts
}

// agentLog is the agent's log on the dev volume of pod (dev container web).
func agentLog(t *testing.T, c *testcluster.Cluster, ns string, pod *corev1.Pod) string {
	t.Helper()
	return agentLogOf(t, c, ns, pod, "web")
}

// agentLogOf is the agent's log on the dev volume of pod, read in container.
func agentLogOf(t *testing.T, c *testcluster.Cluster, ns string, pod *corev1.Pod, container string) string {
	t.Helper()
	var out, errb bytes.Buffer
	err := c.Exec(context.Background(), kube.ExecOptions{Namespace: ns, Pod: pod.Name, Container: container,
		Command: []string{"cat", "/devtool/agent.log"}, Stdout: &out, Stderr: &errb})
	if err != nil {
		t.Fatalf("reading the agent's log: %v %s", err, errb.String())
	}
	return out.String()
}

// agentIdle waits until the agent has seen every connection close. An up that just ended
// may still look connected to the agent for about a second (the port-forward's close takes
// that long to reach it), and its dev command (httpd on 8080) ends only then: the next up's
// dev command would find the port taken. That race is not this test's subject.
func agentIdle(t *testing.T, c *testcluster.Cluster, ns string, pod *corev1.Pod) {
	t.Helper()
	eventually(t, time.Minute, "the agent sees the previous up's connection closed", func() error {
		log := agentLog(t, c, ns, pod)
		if o, cl := strings.Count(log, "connection opened"), strings.Count(log, "connection closed"); o != cl {
			return fmt.Errorf("%d connections opened, %d closed", o, cl)
		}
		return nil
	})
}

// TestDevUpUpgradesPreviousAgent: the previous release's up (built from the git history)
// starts a dev container; this release's up finds its older agent by the SSH banner and
// upgrades it in the same pod (one line says so), the sync working on the new protocol;
// then the previous release's up works with the new agent (the protocol negotiated down).
func TestDevUpUpgradesPreviousAgent(t *testing.T) {
	c := testcluster.Connect(t)
	ns := c.Namespace(t)
	rel := testrelease.Build(t, testrelease.Previous,
		testrelease.Target{Name: "devtool", Package: "./cmd/devtool"},
		testrelease.Target{Name: "devtool-agent", Package: "./cmd/devtool-agent", Linux: true})
	u := newUser(t, c)
	port := freePort(t)
	writeHello(t, u, port)
	withAgent(t, u)
	u.mustRun("deploy", "--namespace", ns, "--wait", "--timeout", "4m")

	// The previous release's up starts the dev container with its agent.
	old := u.startBin(rel.Bin("devtool"), rel.Bin("devtool-agent"), "up", "web", "--namespace", ns)
	old.waitLine(t, "ready", 3*time.Minute)
	eventually(t, time.Minute, "the previous up serves the synced file", bodyContains(port, "hello from the dev container"))
	old.interrupt(t)
	pod, restarts := devPod(t, c, ns)
	agentIdle(t, c, ns, pod)
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		// What the agent and the pod went through.
		if p, err := c.Clientset.CoreV1().Pods(ns).Get(context.Background(), pod.Name, metav1.GetOptions{}); err == nil {
			for _, cs := range p.Status.ContainerStatuses {
				t.Logf("container %s: restarts %d, state %+v, last state %+v", cs.Name, cs.RestartCount, cs.State, cs.LastTerminationState)
			}
			var out, errb bytes.Buffer
			_ = c.Exec(context.Background(), kube.ExecOptions{Namespace: ns, Pod: pod.Name, Container: "web",
				Command: []string{"sh", "-c", "cat /devtool/agent.log; ps -o pid,ppid,args 2>/dev/null || ps"}, Stdout: &out, Stderr: &errb})
			t.Logf("agent log and processes:\n%s%s", out.String(), errb.String())
		}
	})
	if log := agentLog(t, c, ns, pod); strings.Count(log, "devtool-agent starting") != 1 || strings.Contains(log, "protocol=") {
		t.Fatalf("the previous release's agent is not the one running:\n%s", log)
	}

	// This release's up upgrades it in place: same pod, the agent restarted (its
	// container restarted: the previous agent cannot re-execute itself).
	up := u.start("up", "web", "--namespace", ns)
	up.waitLine(t, "upgraded the dev container's agent in pod "+pod.Name, 3*time.Minute)
	up.waitLine(t, "ready", 3*time.Minute)
	if n := strings.Count(up.output(), "upgraded the dev container's agent"); n != 1 {
		t.Errorf("%d upgrade lines, want one:\n%s", n, up.output())
	}
	if strings.Contains(up.output(), "connection lost") || strings.Contains(up.output(), "reconnected") {
		t.Errorf("the upgrade's restart was announced as a lost connection:\n%s", up.output())
	}
	after, _ := devPod(t, c, ns)
	if after.UID != pod.UID {
		t.Fatalf("the dev container moved to pod %s: the upgrade was not in place", after.Name)
	}
	// The kubelet publishes the restart count in the pod's status after the
	// restarted container already answers (up is ready by then): wait for it.
	eventually(t, 30*time.Second, "the restart in the pod's status", func() error {
		if _, restarts2 := devPod(t, c, ns); restarts2 != restarts+1 {
			return fmt.Errorf("container restarts %d -> %d, want one more (SIGTERM to the previous agent)", restarts, restarts2)
		}
		return nil
	})
	u.write("web/index.html", "<h1>synced by the new release</h1>\n")
	eventually(t, time.Minute, "an edit after the upgrade", bodyContains(port, "synced by the new release"))
	log := agentLog(t, c, ns, after)
	if strings.Count(log, "devtool-agent starting") != 2 || !strings.Contains(log, "protocol=3") {
		t.Fatalf("the new agent is not running after the upgrade:\n%s", log)
	}
	up.interrupt(t)
	agentIdle(t, c, ns, after)

	// The previous release's up with the new agent: it puts its own binary on the volume
	// (for the next start) but talks to the running new agent, on protocol 2.
	old2 := u.startBin(rel.Bin("devtool"), rel.Bin("devtool-agent"), "up", "web", "--namespace", ns)
	old2.waitLine(t, "ready", 3*time.Minute)
	u.write("web/index.html", "<h1>synced by the previous release again</h1>\n")
	eventually(t, time.Minute, "an edit through the previous up", bodyContains(port, "synced by the previous release again"))
	log = agentLog(t, c, ns, after)
	if strings.Count(log, "devtool-agent starting") != 2 {
		t.Errorf("the agent restarted under the previous up:\n%s", log)
	}
	if !strings.Contains(log, "protocol=2") {
		t.Errorf("no protocol 2 session in the new agent's log:\n%s", log)
	}
	old2.interrupt(t)
	if p, _ := devPod(t, c, ns); p.UID != pod.UID {
		t.Errorf("the dev container moved to pod %s", p.Name)
	}
	u.mustRun("down", "web", "--namespace", ns)
}

// TestDevUpUpgradeKeepsDevCommand: an up on a terminal whose agent is outdated (this release's
// code with another binary sum, as the next release will find this one) attaches to the dev
// shell an earlier up left running, after upgrading the agent in place: the agent restarts into
// the new binary in the same process and hands the shell over (same pid, its background job
// counting on), and up says the dev command kept running.
func TestDevUpUpgradeKeepsDevCommand(t *testing.T) {
	c := testcluster.Connect(t)
	ns := c.Namespace(t)
	u := newUser(t, c)
	shellFixture(u)
	withAgent(t, u)
	// The agent of the first up: the same code, another sum (outdated for this CLI's agent).
	b, err := os.ReadFile(agentPath)
	if err != nil {
		t.Fatal(err)
	}
	older := filepath.Join(t.TempDir(), "devtool-agent")
	if err := os.WriteFile(older, append(b, []byte("an older build")...), 0o755); err != nil {
		t.Fatal(err)
	}
	u.mustRun("deploy", "--namespace", ns, "--wait", "--timeout", "4m")

	up1 := u.startPTY(t, []string{"DEVTOOL_AGENT_BINARY=" + older}, "up", "shell", "--namespace", ns)
	up1.wait(t, `ready: `, 4*time.Minute)
	up1.typeLine(t, "echo PID=$$")
	pid := up1.wait(t, `PID=(\d+)`, time.Minute)
	up1.typeLine(t, "(i=0; while :; do i=$((i+1)); echo $i > /tmp/counter; sleep 0.2; done) >/dev/null 2>&1 &")
	counter := func() int {
		out, _, err := u.run("exec", "shell", "--namespace", ns, "--", "cat", "/tmp/counter")
		if err != nil {
			return -1
		}
		n, _ := strconv.Atoi(strings.TrimSpace(out))
		return n
	}
	eventually(t, time.Minute, "the background job counts", func() error {
		if counter() < 1 {
			return fmt.Errorf("no count yet")
		}
		return nil
	})
	pod, restarts := devPodOf(t, c, ns, "shell")
	// The first up dies (it does not release its shell): the agent keeps the shell for its client.
	_ = up1.cmd.Process.Kill()
	<-up1.done
	eventually(t, time.Minute, "the agent sees the first up's connection closed", func() error {
		log := agentLogOf(t, c, ns, pod, "shell")
		if !strings.Contains(log, "kept command detached") {
			return fmt.Errorf("not detached yet")
		}
		return nil
	})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("agent log:\n%s", agentLogOf(t, c, ns, pod, "shell"))
		}
	})

	up2 := u.startPTY(t, nil, "up", "shell", "--namespace", ns)
	up2.wait(t, `upgraded the dev container's agent in pod `+pod.Name+`.*the dev command kept running`, 4*time.Minute)
	up2.wait(t, `attached to the dev command left running by an earlier up \(pid `+pid+`\)`, 2*time.Minute)
	up2.typeLine(t, "echo AFTER=$$")
	if got := up2.wait(t, `AFTER=(\d+)`, time.Minute); got != pid {
		t.Errorf("after the upgrade the shell is pid %s, before it was %s", got, pid)
	}
	at := counter()
	eventually(t, time.Minute, "the background job counting on after the upgrade", func() error {
		if n := counter(); n <= at+3 {
			return fmt.Errorf("counter %d, %d before", n, at)
		}
		return nil
	})
	after, restarts2 := devPodOf(t, c, ns, "shell")
	if after.UID != pod.UID || restarts2 != restarts {
		t.Errorf("pod %s (restarts %d -> %d): the upgrade was not in place", after.Name, restarts, restarts2)
	}
	log := agentLogOf(t, c, ns, after, "shell")
	if !strings.Contains(log, "kept commands handed over to the next agent") || !strings.Contains(log, "kept command taken over") {
		t.Errorf("the agent's log does not show the handoff:\n%s", log)
	}
	up2.typeLine(t, "kill %1; exit 3")
	select {
	case err := <-up2.done:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 3 {
			t.Errorf("up after the shell's exit 3: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatalf("up did not end with the shell")
	}
	u.mustRun("down", "shell", "--namespace", ns, "--volumes")
}

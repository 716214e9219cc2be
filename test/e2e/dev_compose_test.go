//go:build integration

package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devtool/devtool/internal/deploy"
	"github.com/devtool/devtool/internal/testcluster"
)

// composeOnlySite is a folder with nothing but a Compose file: one service serving its host
// volume ./src (mounted at /app) on 8080, published on the local port.
func composeOnlySite(u *user, port int, extra string) {
	u.write("docker-compose.yml", fmt.Sprintf(`services:
  site:
    image: docker.io/library/busybox:local
    command: ["sh", "-c", "mkdir -p /app && exec httpd -f -p 8080 -h /app"]
    ports: ["%d:8080"]
    stop_grace_period: 2s
    volumes: ["./src:/app"%s]
`, port, extra))
	u.write("src/index.html", "<h1>site v1</h1>\n")
}

// TestDevUpComposeOnly: a folder with only a docker-compose.yml; deploy, then up its service
// without a terminal. The dev entry comes from the Compose service: its host volume ./src is the
// synced folder, its published port the forward, its command the dev command (so the app serves
// the synced files). A local edit is visible through exec and served through the forward; exec
// gives its exit code; down restores the Deployment exactly.
func TestDevUpComposeOnly(t *testing.T) {
	c := testcluster.Connect(t)
	ns := c.Namespace(t)
	u := newUser(t, c)
	port := freePort(t)
	composeOnlySite(u, port, "")
	withAgent(t, u)
	ctx := context.Background()
	cs := c.Clientset
	u.mustRun("deploy", "--namespace", ns, "--wait", "--timeout", "4m")
	before, err := cs.AppsV1().Deployments(ns).Get(ctx, "site", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	// One service: no name needed.
	up := u.start("up", "--namespace", ns)
	up.waitLine(t, "ready", 3*time.Minute)
	if !strings.Contains(up.output(), fmt.Sprintf("forwarding 127.0.0.1:%d -> 8080", port)) {
		t.Errorf("the published port is not forwarded on loopback:\n%s", up.output())
	}
	eventually(t, time.Minute, "the forward serves the synced ./src", bodyContains(port, "site v1"))

	u.write("src/index.html", "<h1>edited in ./src</h1>\n")
	eventually(t, time.Minute, "the local edit inside the container", func() error {
		out, _, err := u.run("exec", "site", "--namespace", ns, "--", "cat", "/app/index.html")
		if err != nil || !strings.Contains(out, "edited in ./src") {
			return fmt.Errorf("exec cat: %v %q", err, out)
		}
		return nil
	})
	eventually(t, time.Minute, "the local edit served by the app", bodyContains(port, "edited in ./src"))

	_, _, err = u.run("exec", "site", "--namespace", ns, "--", "sh", "-c", "test -f /app/index.html && exit 5")
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 5 {
		t.Errorf("exec exit code: %v, want 5", err)
	}

	// The agent removed from the dev volume, then the pod deleted: up's first dial to the new
	// pod (which skips the install when the volume is warm) fails, the next installs the agent
	// again, and the forward answers on the same port.
	u.mustRun("exec", "site", "--namespace", ns, "--", "rm", "-f", "/devtool/bin/devtool-agent", "/devtool/bin/devtool-agent.sha256")
	deleteDevPod(t, cs, ns, "site")
	up.waitLine(t, "reconnected", 3*time.Minute)
	eventually(t, time.Minute, "the forward after the agent was installed again", bodyContains(port, "edited in ./src"))

	// Another agent version recorded on the volume, then the pod deleted: the dial to the new
	// pod skips the install (warm volume), and the version check over SSH installs this one.
	u.mustRun("exec", "site", "--namespace", ns, "--", "sh", "-c", "echo other-version > /devtool/bin/devtool-agent.sha256")
	deleteDevPod(t, cs, ns, "site")
	eventually(t, 2*time.Minute, "the agent's version recorded again", func() error {
		out, _, err := u.run("exec", "site", "--namespace", ns, "--", "cat", "/devtool/bin/devtool-agent.sha256")
		if err != nil || strings.Contains(out, "other-version") || len(strings.TrimSpace(out)) != 64 {
			return fmt.Errorf("%q %v", out, err)
		}
		return nil
	})
	eventually(t, time.Minute, "the forward after the version check", bodyContains(port, "edited in ./src"))

	_ = up.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-up.done:
	case <-time.After(30 * time.Second):
		t.Fatal("up did not end after SIGINT")
	}
	u.mustRun("down", "site", "--namespace", ns, "--volumes")
	after, err := cs.AppsV1().Deployments(ns).Get(ctx, "site", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sameWorkload(t, before.ObjectMeta, after.ObjectMeta, before.Spec, after.Spec)
	if _, err := cs.AppsV1().Deployments(ns).Get(ctx, "site-devtool", metav1.GetOptions{}); err == nil {
		t.Error("mirror left after down")
	}

	// up again on a new volume (down --volumes) with the local sync state of the first one:
	// the files missing on the new volume are uploaded, never deleted here.
	up = u.start("up", "site", "--namespace", ns)
	up.waitLine(t, "ready", 3*time.Minute)
	eventually(t, time.Minute, "the forward on a new volume", bodyContains(port, "edited in ./src"))
	if b, err := os.ReadFile(filepath.Join(u.dir, "src", "index.html")); err != nil || !strings.Contains(string(b), "edited in ./src") {
		t.Errorf("the local file after up on a new volume: %q %v", b, err)
	}
	_ = up.cmd.Process.Signal(syscall.SIGINT)
	<-up.done
	u.mustRun("down", "site", "--namespace", ns, "--volumes")
}

// sameWorkload fails unless the spec, labels and annotations after down equal those before up.
func sameWorkload(t *testing.T, beforeMeta, afterMeta metav1.ObjectMeta, before, after any) {
	t.Helper()
	if !equality.Semantic.DeepEqual(before, after) {
		t.Errorf("spec after down differs:\nbefore %+v\nafter  %+v", before, after)
	}
	if !equality.Semantic.DeepEqual(beforeMeta.Labels, afterMeta.Labels) {
		t.Errorf("labels after down %v, before %v", afterMeta.Labels, beforeMeta.Labels)
	}
	if !equality.Semantic.DeepEqual(beforeMeta.Annotations, afterMeta.Annotations) {
		t.Errorf("annotations after down %v, before %v", afterMeta.Annotations, beforeMeta.Annotations)
	}
}

// TestDevUpDeploysFirst: up in a Compose-only folder that was never deployed deploys it first
// (in-process, through environment.Deployer), then starts the dev container; --file and --name
// (the flag group of deploy) reach both.
func TestDevUpDeploysFirst(t *testing.T) {
	c := testcluster.Connect(t)
	ns := c.Namespace(t)
	u := newUser(t, c)
	port := freePort(t)
	composeOnlySite(u, port, "")
	// Another file name than the default ones: only --file finds it.
	u.write("site.compose.yml", mustRead(t, u, "docker-compose.yml"))
	u.write("docker-compose.yml", "services:\n  other:\n    image: docker.io/library/busybox:local\n")
	withAgent(t, u)
	ctx := context.Background()

	up := u.start("up", "site", "--namespace", ns, "-f", "site.compose.yml", "--name", "first")
	up.waitLine(t, "ready", 4*time.Minute)
	if !strings.Contains(up.output(), "Deploying first to namespace "+ns+" first") {
		t.Errorf("up did not say it deploys first:\n%s", up.output())
	}
	eventually(t, time.Minute, "the forward serves the synced ./src", bodyContains(port, "site v1"))
	if _, err := c.Clientset.AppsV1().Deployments(ns).Get(ctx, "site", metav1.GetOptions{}); err != nil {
		t.Errorf("the original was not deployed: %v", err)
	}
	// The environment is recorded under the --name.
	if st, err := (&deploy.StateStore{Clientset: c.Clientset, Namespace: ns}).Get(ctx, "first"); err != nil || st == nil || st.Status != deploy.StatusDeployed {
		t.Errorf("deploy state of environment first: %+v %v", st, err)
	}
	_ = up.cmd.Process.Signal(syscall.SIGINT)
	<-up.done
	u.mustRun("down", "site", "--namespace", ns, "-f", "site.compose.yml", "--name", "first", "--volumes")
	if _, err := c.Clientset.AppsV1().Deployments(ns).Get(ctx, "site-devtool", metav1.GetOptions{}); err == nil {
		t.Error("mirror left after down")
	}
}

func mustRead(t *testing.T, u *user, name string) string {
	b, err := os.ReadFile(filepath.Join(u.dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

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

	"github.com/devtool/devtool/internal/testcluster"
)

// writeStore is a devtool.yml deploying a Compose service with a named volume (which makes a
// StatefulSet) and a dev entry for it: ./src synced to /app, served on 8080, forwarded on port.
func writeStore(u *user, port int) { writeStoreVolume(u, port, "size: 100Mi") }

// writeStoreVolume is writeStore with the dev entry's persistentVolume settings.
func writeStoreVolume(u *user, port int, pv string) {
	u.write("compose.yml", `name: store
services:
  store:
    image: docker.io/library/busybox:local
    command: ["sh", "-c", "mkdir -p /data/www && echo 'rows: 7' > /data/www/rows.txt && echo original > /data/www/index.html && exec httpd -f -p 8080 -h /data/www"]
    ports: ["8080"]
    stop_grace_period: 2s
    volumes: ["data:/data"]
volumes:
  data:
    driver_opts: {size: 100Mi}
`)
	u.write("devtool.yml", fmt.Sprintf(`name: store
deploy:
  compose: compose.yml
dev:
  store:
    command: ["httpd", "-f", "-p", "8080", "-h", "/app"]
    sync:
      - src:/app
    forward:
      - %d:8080
    persistentVolume: {%s}
`, port, pv))
	u.write("src/index.html", "<h1>store in dev</h1>\n")
}

// TestDevUpStatefulSet: the same main job for a StatefulSet: up (the mirror is a StatefulSet
// using the original's volume), a local edit seen by exec and served through the forward, exec's
// exit code, the pod deleted and the forward back on the same port, the original redeployed and
// the mirror following, down restoring the StatefulSet's spec, replicas, labels and annotations.
func TestDevUpStatefulSet(t *testing.T) {
	c := testcluster.Connect(t)
	ns := c.Namespace(t)
	u := newUser(t, c)
	port := freePort(t)
	writeStore(u, port)
	withAgent(t, u)
	ctx := context.Background()
	cs := c.Clientset
	u.mustRun("deploy", "--namespace", ns, "--wait", "--timeout", "4m")
	before, err := cs.AppsV1().StatefulSets(ns).Get(ctx, "store", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the named volume should make a StatefulSet: %v", err)
	}

	up := u.start("up", "store", "--namespace", ns)
	up.waitLine(t, "ready", 3*time.Minute)
	if _, err := cs.AppsV1().StatefulSets(ns).Get(ctx, "store-devtool", metav1.GetOptions{}); err != nil {
		t.Errorf("the mirror is not a StatefulSet: %v", err)
	}
	eventually(t, time.Minute, "the forward serves the synced file", bodyContains(port, "store in dev"))

	u.write("src/index.html", "<h1>store edited</h1>\n")
	eventually(t, time.Minute, "the local edit inside the container", func() error {
		out, _, err := u.run("exec", "store", "--namespace", ns, "--", "cat", "/app/index.html")
		if err != nil || !strings.Contains(out, "store edited") {
			return fmt.Errorf("exec cat: %v %q", err, out)
		}
		return nil
	})
	eventually(t, time.Minute, "the local edit served", bodyContains(port, "store edited"))

	// The dev container sees the original's volume; exec gives the command's exit code.
	out, _, err := u.run("exec", "store", "--namespace", ns, "--", "sh", "-c", "cat /data/www/rows.txt; exit 4")
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 4 || !strings.Contains(out, "rows: 7") {
		t.Errorf("exec: exit %v, output %q (want 4 and the original's data)", err, out)
	}

	// Delete the dev pod: the forward answers again on the same port.
	deleteDevPod(t, cs, ns, "store")
	up.waitLine(t, "reconnected", 3*time.Minute)
	eventually(t, time.Minute, "the forward after the pod was deleted", bodyContains(port, "store edited"))

	// Redeploy the original with another environment: the mirror follows.
	compose, _ := os.ReadFile(filepath.Join(u.dir, "compose.yml"))
	u.write("compose.yml", strings.Replace(string(compose), "    stop_grace_period: 2s\n",
		"    stop_grace_period: 2s\n    environment: {GREETING: redeployed}\n", 1))
	u.mustRun("deploy", "--namespace", ns, "--timeout", "4m")
	eventually(t, 3*time.Minute, "the mirror follows the redeploy", mirrorHasEnv(cs, ns, "statefulset", "store-devtool", "GREETING", "redeployed"))
	eventually(t, 2*time.Minute, "the forward after the rebuild", bodyContains(port, "store edited"))
	redeployed, err := cs.AppsV1().StatefulSets(ns).Get(ctx, "store", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if *redeployed.Spec.Replicas != 0 {
		t.Errorf("the original runs again next to the dev container: replicas %d", *redeployed.Spec.Replicas)
	}

	_ = up.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-up.done:
	case <-time.After(30 * time.Second):
		t.Fatal("up did not end after SIGINT")
	}
	u.mustRun("down", "store", "--namespace", ns, "--volumes")
	after, err := cs.AppsV1().StatefulSets(ns).Get(ctx, "store", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The redeploy changed the template on purpose; everything else is as before up.
	want := redeployed.Spec.DeepCopy()
	want.Replicas = before.Spec.Replicas
	if !equality.Semantic.DeepEqual(*want, after.Spec) {
		t.Errorf("spec after down differs:\nwant %+v\ngot  %+v", *want, after.Spec)
	}
	if *after.Spec.Replicas != *before.Spec.Replicas {
		t.Errorf("replicas after down %d, before %d", *after.Spec.Replicas, *before.Spec.Replicas)
	}
	if !equality.Semantic.DeepEqual(before.Labels, after.Labels) {
		t.Errorf("labels after down %v, before %v", after.Labels, before.Labels)
	}
	// Annotations: the redeployed ones without up's dev.devtool/* marks.
	wantAnn := map[string]string{}
	for k, v := range redeployed.Annotations {
		if !strings.HasPrefix(k, "dev.devtool/") {
			wantAnn[k] = v
		}
	}
	if !equality.Semantic.DeepEqual(wantAnn, after.Annotations) && !(len(wantAnn) == 0 && len(after.Annotations) == 0) {
		t.Errorf("annotations after down %v, want %v", after.Annotations, wantAnn)
	}
	if _, err := cs.AppsV1().StatefulSets(ns).Get(ctx, "store-devtool", metav1.GetOptions{}); err == nil {
		t.Error("mirror left after down")
	}
}

// TestDevStatefulSetDownRestoresExactly: a dev container without a persistent volume (its home
// is an emptyDir): its pod deleted, the new pod (same name, as a StatefulSet's pods have) gets the
// agent again and up reconnects; after kill -9 of up, down leaves the StatefulSet exactly as
// before (spec, replicas, labels, annotations).
func TestDevStatefulSetDownRestoresExactly(t *testing.T) {
	c := testcluster.Connect(t)
	ns := c.Namespace(t)
	u := newUser(t, c)
	port := freePort(t)
	writeStoreVolume(u, port, "enabled: false")
	withAgent(t, u)
	ctx := context.Background()
	cs := c.Clientset
	u.mustRun("deploy", "--namespace", ns, "--wait", "--timeout", "4m")
	before, err := cs.AppsV1().StatefulSets(ns).Get(ctx, "store", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	up := u.start("up", "store", "--namespace", ns)
	up.waitLine(t, "ready", 3*time.Minute)
	if err := cs.CoreV1().Pods(ns).Delete(ctx, "store-devtool-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	up.waitLine(t, "reconnected", 3*time.Minute)
	// The new pod's home is empty: the sync must upload the local files again, never take
	// their absence there for deletions to carry over here.
	eventually(t, time.Minute, "the forward after the pod was deleted", bodyContains(port, "store in dev"))
	if b, err := os.ReadFile(filepath.Join(u.dir, "src", "index.html")); err != nil || !strings.Contains(string(b), "store in dev") {
		t.Errorf("the local file after the pod with an empty home came back: %q %v", b, err)
	}
	_, _, err = u.run("exec", "store", "--namespace", ns, "--", "sh", "-c", "exit 9")
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 9 {
		t.Errorf("exec exit code: %v, want 9", err)
	}
	_ = up.cmd.Process.Kill() // as after kill -9: down needs nothing local
	<-up.done
	u.mustRun("down", "store", "--namespace", ns, "--volumes")
	after, err := cs.AppsV1().StatefulSets(ns).Get(ctx, "store", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sameWorkload(t, before.ObjectMeta, after.ObjectMeta, before.Spec, after.Spec)
}

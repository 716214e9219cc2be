//go:build integration

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devtool/devtool/internal/testcluster"
)

// TestDevUpComposeBindMountsFiltered: in a folder with only a Compose file, up syncs only the
// service's host volumes that are folders of the project mounted read-write. A single file, a
// read-only mount, a folder outside the project and the Docker socket are left out, named in
// warnings (one for the socket, a system path, one for the rest); the sync runs on ./src alone.
// The workload is made with the API directly (deployed by other means), so only up reads the
// Compose file.
func TestDevUpComposeBindMountsFiltered(t *testing.T) {
	c := testcluster.Connect(t)
	ns := c.Namespace(t)
	u := newUser(t, c)
	u.dir = filepath.Join(u.dir, "project")
	outside := filepath.Join(filepath.Dir(u.dir), "outside")
	if err := os.MkdirAll(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	u.write("docker-compose.yml", `services:
  site:
    image: docker.io/library/busybox:local
    command: ["sh", "-c", "trap 'exit 0' TERM; while :; do sleep 1; done"]
    volumes:
      - ./src:/app
      - ./conf/app.conf:/etc/app.conf
      - ./ro:/ro:ro
      - ../outside:/outside
      - /var/run/docker.sock:/var/run/docker.sock
`)
	u.write("src/index.html", "site\n")
	u.write("conf/app.conf", "conf\n")
	u.write("ro/data.txt", "read only\n")
	withAgent(t, u)
	labels := map[string]string{"app": "site-filter"}
	one := int32(1)
	grace := int64(1)
	_, err := c.Clientset.AppsV1().Deployments(ns).Create(context.Background(), &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "site"},
		Spec: appsv1.DeploymentSpec{Replicas: &one, Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
				TerminationGracePeriodSeconds: &grace,
				Containers: []corev1.Container{{Name: "site", Image: "docker.io/library/busybox:local",
					Command: []string{"sh", "-c", "trap 'exit 0' TERM; while :; do sleep 1; done"}}}}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	up := u.start("up", "site", "--namespace", ns, "--allow-outside-volumes")
	up.waitLine(t, "ready:", 4*time.Minute)
	out := up.output()
	var leftOut string
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "not synced") {
			if leftOut != "" {
				t.Errorf("more than one warning for the host volumes left out:\n%s", out)
			}
			leftOut = l
		}
	}
	for _, want := range []string{"./conf/app.conf (a file)", "./ro (read-only)", outside + " (outside the project)"} {
		if !strings.Contains(leftOut, want) {
			t.Errorf("the warning %q does not name %s", leftOut, want)
		}
	}
	if strings.Contains(leftOut, "./src") {
		t.Errorf("./src is named as left out: %q", leftOut)
	}
	if !strings.Contains(out, "docker.sock") {
		t.Errorf("the Docker socket is not named:\n%s", out)
	}
	st, _, err := u.run("status", "site", "-o", "json")
	var doc struct {
		Sync struct {
			Folders []struct {
				Local, Remote string
			} `json:"folders"`
		} `json:"sync"`
	}
	if err != nil || json.Unmarshal([]byte(st), &doc) != nil {
		t.Fatalf("status -o json: %v\n%s", err, st)
	}
	if len(doc.Sync.Folders) != 1 || doc.Sync.Folders[0].Remote != "/app" {
		t.Errorf("synced folders %+v, want ./src -> /app alone", doc.Sync.Folders)
	}
	eventually(t, time.Minute, "./src in the pod", func() error {
		got, _, err := u.run("exec", "site", "--namespace", ns, "--", "cat", "/app/index.html")
		if err != nil || got != "site\n" {
			return fmt.Errorf("%q %v", got, err)
		}
		return nil
	})
	stopUp(t, up)
	u.mustRun("down", "site", "--namespace", ns, "--volumes")
}

//go:build integration

package e2e

import (
	"archive/zip"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devtool/devtool/internal/dev"
	"github.com/devtool/devtool/internal/manifest"
	"github.com/devtool/devtool/internal/testcluster"
)

// TestDevDownDoctorRestart: examples/hello deployed from its devtool.yml, its web service
// replaced by a dev container (activated through the library, as a killed `up` leaves it),
// then the built binary: doctor writes a zip without secrets, restart names what it restarted,
// down restores the original exactly.
func TestDevDownDoctorRestart(t *testing.T) {
	c := testcluster.Connect(t)
	ns := c.Namespace(t)
	u := newUser(t, c)
	writeHello(t, u, freePort(t))
	devyml, _ := os.ReadFile(filepath.Join(u.dir, "devtool.yml"))
	u.write("devtool.yml", strings.Replace(string(devyml), "    workdir: /app\n", "    workdir: /app\n    services: [db]\n    environment: {API_TOKEN: very-secret-value-1}\n", 1))
	ctx := context.Background()
	cs := c.Clientset
	u.mustRun("deploy", "--namespace", ns, "--wait", "--timeout", "4m")
	before, err := cs.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	actx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	if _, err := dev.Activate(actx, dev.ActivateOptions{Client: cs, Namespace: ns,
		Dev: &manifest.Dev{Name: "web", Environment: map[string]string{"API_TOKEN": "very-secret-value-1"}}}); err != nil {
		t.Fatal(err)
	}

	// exec: a second process, its output and exit code.
	stdout, _, err := u.run("exec", "web", "--namespace", ns, "--", "sh", "-c", "echo in-dev-$FROM_EXEC$API_TOKEN; test -d /devtool; exit 7")
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 7 || !strings.Contains(stdout, "in-dev-very-secret-value-1") {
		t.Errorf("exec: %v %q", err, stdout)
	}

	out := u.mustRun("doctor", "web", "--namespace", ns)
	zipPath := strings.TrimSpace(out)
	zr, err := zip.OpenReader(zipPath)
	if err != nil {
		t.Fatalf("doctor zip %q: %v", zipPath, err)
	}
	files := map[string]string{}
	for _, f := range zr.File {
		rc, _ := f.Open()
		b, _ := io.ReadAll(rc)
		rc.Close()
		files[f.Name] = string(b)
		if strings.Contains(string(b), "very-secret-value-1") {
			t.Errorf("%s holds the secret value", f.Name)
		}
	}
	zr.Close()
	if !strings.Contains(files["pods.yaml"], "web-devtool") || !strings.Contains(files["dev.yaml"], "API_TOKEN=<redacted>") || files["metadata.json"] == "" {
		t.Errorf("doctor content: %v", files)
	}

	_, errOut, err := u.run("restart", "web", "--namespace", ns)
	if err != nil || !strings.Contains(errOut, "Restarted StatefulSet/db") && !strings.Contains(errOut, "Restarted Deployment/db") {
		t.Errorf("restart: %v %s", err, errOut)
	}

	_, errOut, err = u.run("down", "web", "--namespace", ns, "--volumes")
	if err != nil || !strings.Contains(errOut, "Restored Deployment/web") {
		t.Fatalf("down: %v %s", err, errOut)
	}
	after, err := cs.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(before.Spec, after.Spec) || !equality.Semantic.DeepEqual(before.Labels, after.Labels) {
		t.Errorf("not restored exactly:\n%+v\n%+v", before.Spec, after.Spec)
	}
	for k := range after.Annotations {
		if strings.HasPrefix(k, "dev.devtool/") {
			t.Errorf("annotation %s left", k)
		}
	}
	if _, errOut, _ := u.run("down", "web", "--namespace", ns); !strings.Contains(errOut, "not active") {
		t.Errorf("second down: %s", errOut)
	}
	if _, errOut, err := u.run("exec", "web", "--namespace", ns, "--", "true"); err == nil || !strings.Contains(errOut, "no active dev container web") {
		t.Errorf("exec after down: %v %s", err, errOut)
	}
}

//go:build integration

package e2e

import (
	"archive/tar"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devtool/devtool/internal/buildtest"
	"github.com/devtool/devtool/internal/testcluster"
)

// TestDestroyTimedOutOnCluster is issue 18's "a destroy command stopped by --timeout says the
// destroy timed out", on the built binary against the local cluster: a destroy command that sleeps
// ten minutes, run with --timeout 3s, makes destroy exit 1 with that message, and the sleep process
// is gone once destroy has returned (not left running behind it).
func TestDestroyTimedOutOnCluster(t *testing.T) {
	c := testcluster.Connect(t)
	ns := c.Namespace(t)
	u := newUser(t, c)
	pidFile := filepath.Join(u.dir, "sleep.pid")
	// bash -c runs the line; exec makes the sleep the process whose pid was written.
	u.write("devtool.yml", "deploy:\n  - echo deployed\ndestroy:\n  - name: slow cleanup\n    command: echo $$ > sleep.pid && exec sleep 600\n")
	u.mustRun("deploy", "--namespace", ns)

	start := time.Now()
	_, errOut, err := u.run("destroy", "--namespace", ns, "--timeout", "3s")
	took := time.Since(start)
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("destroy: %v, want exit 1; stderr:\n%s", err, errOut)
	}
	if !strings.Contains(errOut, `command "slow cleanup" was stopped: the destroy timed out`) {
		t.Errorf("stderr does not say the destroy timed out:\n%s", errOut)
	}
	if strings.Contains(errOut, "deploy timed out") {
		t.Errorf("stderr speaks of the deploy:\n%s", errOut)
	}
	t.Logf("destroy returned after %v", took)
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatalf("the destroy command never started: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	if alive, what := running(pid); alive {
		t.Errorf("the destroy command's process %d (%s) still runs after destroy returned", pid, what)
	}
}

// running reports whether pid is a live process (a zombie waiting for a parent that is not devtool
// counts as gone) and its command line.
func running(pid int) (bool, string) {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false, ""
	}
	cmdline, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	what := strings.TrimSpace(strings.ReplaceAll(string(cmdline), "\x00", " "))
	// The state follows the command name in parentheses: "pid (comm) S ...".
	s := string(stat)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) && s[i+2] == 'Z' {
		return false, what
	}
	return strings.Contains(what, "sleep 600"), what
}

// TestRealWorldSystemPathsOnCluster is issue 18's "real-world Compose files that mount system paths
// deploy with one warning each", really deployed (a dry run never reaches the API server): immich
// (/etc/localtime) and supabase's vector service (/var/run/docker.sock, and a single-file bind
// mount of its configuration), as in internal/compose/testdata/realworld, with only their image
// names swapped for a busybox that sleeps, pushed to the local registry (the cluster cannot pull
// ghcr.io). Each deploy exits 0 with exactly one system-path warning naming the file, line, field
// and path, and no workload of the namespace mounts a host path.
func TestRealWorldSystemPathsOnCluster(t *testing.T) {
	c := testcluster.Connect(t)
	image, err := buildtest.PushSleepingBusybox(clusterRegistry + "/e2e/busybox:sleeping")
	if err != nil {
		t.Fatal(err)
	}
	imageLine := regexp.MustCompile(`(?m)^(\s+image:).*$`)
	for _, tc := range []struct {
		name, field, path string
		line              int
		// baked: a workload whose image must hold a host file at a path (the host volumes are
		// baked into a derived image): supabase's single-file bind mount of vector.yml.
		baked, bakedPath, bakedFile string
	}{
		{name: "immich", field: "services.immich-server.volumes[1]", path: "/etc/localtime", line: 22,
			baked: "immich-server", bakedPath: "usr/src/app/upload/.keep", bakedFile: "library/.keep"},
		{name: "supabase", field: "services.vector.volumes[1]", path: "/var/run/docker.sock", line: 17,
			baked: "vector", bakedPath: "etc/vector/vector.yml", bakedFile: "volumes/logs/vector.yml"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := c.Namespace(t)
			u := newUser(t, c)
			u.extra = []string{"DEVTOOL_REGISTRY=" + clusterRegistry}
			if err := os.CopyFS(u.dir, os.DirFS(filepath.Join("..", "..", "internal", "compose", "testdata", "realworld", tc.name))); err != nil {
				t.Fatal(err)
			}
			file := filepath.Join(u.dir, "docker-compose.yml")
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			swapped := imageLine.ReplaceAllString(string(data), "${1} "+image)
			if err := os.WriteFile(file, []byte(swapped), 0o644); err != nil {
				t.Fatal(err)
			}
			_, errOut, err := u.run("deploy", "--namespace", ns, "--timeout", "4m")
			if err != nil {
				t.Fatalf("deploy: %v\nstderr:\n%s", err, errOut)
			}
			if n := strings.Count(errOut, "not mounted: system paths of the Docker host"); n != 1 {
				t.Errorf("%d system-path warnings, want 1:\n%s", n, errOut)
			}
			if n := strings.Count(errOut, tc.path); n != 1 {
				t.Errorf("%s named %d times, want once:\n%s", tc.path, n, errOut)
			}
			if want := "docker-compose.yml:" + strconv.Itoa(tc.line); !strings.Contains(errOut, want) || !strings.Contains(errOut, tc.field+": "+tc.path) {
				t.Errorf("the warning does not name %s and %s: %s:\n%s", want, tc.field, tc.path, errOut)
			}
			checkNoHostPath(t, c, ns)
			d, err := c.Clientset.AppsV1().Deployments(ns).Get(context.Background(), tc.baked, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			ref := d.Spec.Template.Spec.Containers[0].Image
			if !strings.Contains(ref, ":vol-") {
				t.Fatalf("%s runs %s, not a derived image holding its host volumes", tc.baked, ref)
			}
			want, err := os.ReadFile(filepath.Join(u.dir, tc.bakedFile))
			if err != nil {
				t.Fatal(err)
			}
			if got, ok := imageFile(t, ref, tc.bakedPath); !ok || got != string(want) {
				t.Errorf("%s's image %s: /%s = %q (present %v), want the content of %s", tc.baked, ref, tc.bakedPath, got, ok, tc.bakedFile)
			}
		})
	}
}

// checkNoHostPath fails the test when a workload of ns mounts a host path, and when it has none.
func checkNoHostPath(t *testing.T, c *testcluster.Cluster, ns string) {
	t.Helper()
	ctx := context.Background()
	var specs []corev1.PodSpec
	var names []string
	deps, err := c.Clientset.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range deps.Items {
		specs, names = append(specs, d.Spec.Template.Spec), append(names, "Deployment/"+d.Name)
	}
	sts, err := c.Clientset.AppsV1().StatefulSets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range sts.Items {
		specs, names = append(specs, s.Spec.Template.Spec), append(names, "StatefulSet/"+s.Name)
	}
	if len(specs) == 0 {
		t.Fatal("no workload was deployed")
	}
	t.Logf("workloads: %s", strings.Join(names, ", "))
	for i, spec := range specs {
		for _, v := range spec.Volumes {
			if v.HostPath != nil {
				t.Errorf("%s mounts the host path %s (volume %s)", names[i], v.HostPath.Path, v.Name)
			}
		}
	}
}

// imageFile reads one regular file of an image in the local registry.
func imageFile(t *testing.T, ref, path string) (string, bool) {
	t.Helper()
	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	img, err := remote.Image(r)
	if err != nil {
		t.Fatalf("reading %s: %v", ref, err)
	}
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return "", false
		}
		if err != nil {
			t.Fatal(err)
		}
		if strings.TrimPrefix(h.Name, "/") == path && h.Typeflag == tar.TypeReg {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			return string(b), true
		}
	}
}

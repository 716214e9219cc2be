//go:build integration

package e2e

import (
	"context"
	"os"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devtool/devtool/internal/buildtest"
	"github.com/devtool/devtool/internal/kube"
	"github.com/devtool/devtool/internal/testcluster"
)

// clusterRegistry is the local cluster's registry (hack/cluster), which its containerd pulls from.
const clusterRegistry = "127.0.0.1:25000"

var buildkit struct {
	once sync.Once
	addr string
	stop func()
	err  error
}

// buildkitd starts one private buildkitd for the package (stopped by TestMain's cleanup list).
func buildkitd(t *testing.T) string {
	t.Helper()
	buildkit.once.Do(func() {
		buildkit.addr, buildkit.stop, buildkit.err = buildtest.StartBuildkitd(clusterRegistry)
		if buildkit.err == nil {
			cleanups = append(cleanups, buildkit.stop)
		}
	})
	if buildkit.err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("buildkitd (CI=true): %v", buildkit.err)
		}
		t.Skipf("SKIP: buildkitd: %v", buildkit.err)
	}
	return buildkit.addr
}

// TestDeployBuildsImagesAndAddsHostVolumes: deploy builds a service's image with BuildKit, pushes it
// to the cluster's registry, adds the service's host folder to a derived image, and the pod runs it.
func TestDeployBuildsImagesAndAddsHostVolumes(t *testing.T) {
	c := testcluster.Connect(t)
	ns := c.Namespace(t)
	addr := buildkitd(t)
	base, err := buildtest.PushBusyboxBase(clusterRegistry + "/e2e/busybox:base")
	if err != nil {
		t.Fatal(err)
	}
	u := newUser(t, c)
	u.extra = []string{"BUILDKIT_HOST=" + strings.TrimPrefix(addr, "tcp://"), "DEVTOOL_REGISTRY=" + clusterRegistry}
	u.write("app/Dockerfile", "FROM "+base+"\nCOPY greeting.txt /greeting.txt\nCMD [\"sh\", \"-c\", \"cat /greeting.txt /config/settings.txt; exec sleep 3600\"]\n")
	u.write("app/greeting.txt", "built by devtool\n")
	u.write("config/settings.txt", "mode=host-volume\n")
	u.write("compose.yml", "services:\n  app:\n    build: ./app\n    volumes: [\"./config:/config\"]\n")

	u.mustRun("deploy", "--namespace", ns, "--name", "built", "--wait", "--timeout", "3m")
	ctx := context.Background()
	d, err := c.Clientset.AppsV1().Deployments(ns).Get(ctx, "app", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	image := d.Spec.Template.Spec.Containers[0].Image
	if want := clusterRegistry + "/" + ns + "/built-app:vol-"; !strings.HasPrefix(image, want) {
		t.Errorf("deployed image %q, want the derived image %s…", image, want)
	}
	pods, err := kube.WaitForPods(ctx, c.Clientset, ns, "app.kubernetes.io/name=app", func(ps []corev1.Pod) bool { return len(ps) == 1 })
	if err != nil {
		t.Fatal(err)
	}
	logs, err := c.Clientset.CoreV1().Pods(ns).GetLogs(pods[0].Name, &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"built by devtool", "mode=host-volume"} {
		if !strings.Contains(string(logs), want) {
			t.Errorf("pod logs %q lack %q (from the built image and the host folder)", logs, want)
		}
	}

	// Unchanged: a second deploy reuses both images (same content-hash tags).
	u.mustRun("deploy", "--namespace", ns, "--name", "built", "--timeout", "3m")
	d2, _ := c.Clientset.AppsV1().Deployments(ns).Get(ctx, "app", metav1.GetOptions{})
	if got := d2.Spec.Template.Spec.Containers[0].Image; got != image {
		t.Errorf("unchanged redeploy changed the image: %s -> %s", image, got)
	}
	// A changed host folder makes a new derived image.
	u.write("config/settings.txt", "mode=changed\n")
	u.mustRun("deploy", "--namespace", ns, "--name", "built", "--build", "--wait", "--timeout", "3m")
	d3, _ := c.Clientset.AppsV1().Deployments(ns).Get(ctx, "app", metav1.GetOptions{})
	if got := d3.Spec.Template.Spec.Containers[0].Image; got == image {
		t.Errorf("changing the host folder did not change the image (%s)", got)
	}
}

//go:build integration

package e2e

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/devtool/devtool/internal/kube"
	"github.com/devtool/devtool/internal/testcluster"
)

const shop = `
x-image: &image
  image: docker.io/library/busybox:local
services:
  db:
    <<: *image
    command: sh -c 'mkdir -p /data && echo ok > /data/index.html && exec httpd -f -p 5432 -h /data'
    ports: ["5432"]
    volumes: ["data:/data"]
    labels:
      dev.devtool/policy: keep
  migrate:
    <<: *image
    command: ["sh", "-c", "echo migrated"]
    restart: "no"
    depends_on:
      db: {condition: service_healthy}
  web:
    <<: *image
    command: sh -c 'echo "hello ${GREETING:-nobody}" > /tmp/index.html && exec httpd -f -p 8080 -h /tmp'
    ports: ["8080:8080"]
    healthcheck:
      http: {path: /, port: 8080}
      interval: 1s
    depends_on:
      migrate: {condition: service_completed_successfully}
  worker:
    <<: *image
    command: sleep 3600
volumes:
  data: {}
`

// TestComposeLifecycle deploys a Compose file with all three depends_on conditions, redeploys it
// with a service removed (pruned), lists endpoints, and destroys it (keep policy and volumes honoured).
func TestComposeLifecycle(t *testing.T) {
	c := testcluster.Connect(t)
	ns := c.Namespace(t)
	u := newUser(t, c)
	u.extra = []string{"DEVTOOL_CLUSTER_DOMAIN=devtool.test", "GREETING=devs"}
	u.write("compose.yml", shop)
	ctx := context.Background()
	cs := c.Clientset

	out := u.mustRun("deploy", "--namespace", ns, "--name", "shop", "--wait", "--timeout", "3m")
	if want := "https://web-" + ns + ".devtool.test/"; !strings.Contains(out, want) {
		t.Errorf("deploy output %q does not list the public endpoint %s", out, want)
	}
	job, err := cs.BatchV1().Jobs(ns).Get(ctx, "migrate", metav1.GetOptions{})
	if err != nil || job.Status.Succeeded != 1 {
		t.Fatalf("migrate job: %v (succeeded %d)", err, job.Status.Succeeded)
	}
	db, err := cs.AppsV1().StatefulSets(ns).Get(ctx, "db", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("db statefulset: %v", err)
	}
	web, err := cs.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil || web.Status.ReadyReplicas != 1 {
		t.Fatalf("web deployment not ready: %v", err)
	}
	// depends_on order: web was created after migrate completed, migrate after db was up.
	if !job.CreationTimestamp.After(db.CreationTimestamp.Time) && !job.CreationTimestamp.Equal(&db.CreationTimestamp) {
		t.Errorf("migrate (%s) created before db (%s)", job.CreationTimestamp, db.CreationTimestamp)
	}
	if job.Status.CompletionTime == nil || web.CreationTimestamp.Before(job.Status.CompletionTime) {
		t.Errorf("web (%s) created before migrate completed (%v)", web.CreationTimestamp, job.Status.CompletionTime)
	}
	for _, o := range []metav1.Object{job, db, web} {
		if o.GetLabels()["dev.devtool/deployed-by"] != "shop" || o.GetLabels()["app.kubernetes.io/managed-by"] != "devtool" {
			t.Errorf("%s lacks the devtool labels: %v", o.GetName(), o.GetLabels())
		}
	}
	state, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "devtool-env-shop", metav1.GetOptions{})
	if err != nil || state.Data["status"] != "deployed" || !strings.Contains(state.Data["manifest"], "migrate") {
		t.Fatalf("state configmap: %v %v", err, state.Data["status"])
	}

	// Endpoints, in all three output formats.
	if out := u.mustRun("endpoints", "--namespace", ns, "--name", "shop", "-o", "json"); !strings.Contains(out, `"https://web-`+ns+`.devtool.test/"`) {
		t.Errorf("endpoints -o json: %q", out)
	}
	if out := u.mustRun("endpoints", "--namespace", ns, "--name", "shop", "-o", "md"); !strings.Contains(out, " - https://web-") {
		t.Errorf("endpoints -o md: %q", out)
	}

	// Redeploy without the worker: it is pruned, the rest stays.
	u.write("compose.yml", strings.Replace(shop, "  worker:\n    <<: *image\n    command: sleep 3600\n", "", 1))
	u.mustRun("deploy", "--namespace", ns, "--name", "shop", "--timeout", "3m")
	if _, err := cs.AppsV1().Deployments(ns).Get(ctx, "worker", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("worker should have been pruned, got %v", err)
	}
	if _, err := cs.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{}); err != nil {
		t.Errorf("web should remain after redeploy: %v", err)
	}

	// Destroy: db carries policy keep, the PVC stays without --volumes.
	u.mustRun("destroy", "--namespace", ns, "--name", "shop", "--wait")
	if _, err := cs.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("web should be destroyed, got %v", err)
	}
	if _, err := cs.BatchV1().Jobs(ns).Get(ctx, "migrate", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("migrate should be destroyed, got %v", err)
	}
	if _, err := cs.AppsV1().StatefulSets(ns).Get(ctx, "db", metav1.GetOptions{}); err != nil {
		t.Errorf("db has policy keep and must survive destroy: %v", err)
	}
	if _, err := cs.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data", metav1.GetOptions{}); err != nil {
		t.Errorf("volume data must survive destroy without --volumes: %v", err)
	}
	if _, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "devtool-env-shop", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("state configmap should be gone, got %v", err)
	}
}

// TestDeployRefusesForeignObject: an object of the same name that devtool did not create is not taken over.
func TestDeployRefusesForeignObject(t *testing.T) {
	c := testcluster.Connect(t)
	ns := c.Namespace(t)
	u := newUser(t, c)
	u.write("compose.yml", "services:\n  web:\n    image: docker.io/library/busybox:local\n    command: sleep 3600\n")
	labels := map[string]string{"app": "mine"}
	_, err := c.Clientset.AppsV1().Deployments(ns).Create(context.Background(), &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](0),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: testcluster.Image}}},
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, errOut, err := u.run("deploy", "--namespace", ns, "--name", "app", "--timeout", "1m")
	if err == nil {
		t.Fatal("deploy over a foreign deployment succeeded")
	}
	if !strings.Contains(errOut, `deployment "web" already exists`) || !strings.Contains(errOut, "was not created by devtool") {
		t.Errorf("error does not explain the ownership conflict:\n%s", errOut)
	}
	d, _ := c.Clientset.AppsV1().Deployments(ns).Get(context.Background(), "web", metav1.GetOptions{})
	if d.Labels["dev.devtool/deployed-by"] != "" || d.Spec.Template.Spec.Containers[0].Name != "c" {
		t.Errorf("the foreign deployment was modified: %v", d.Labels)
	}
}

// TestDeployTimeoutExplains: a crashing service makes --wait fail, naming it and showing its last log lines.
func TestDeployTimeoutExplains(t *testing.T) {
	c := testcluster.Connect(t)
	ns := c.Namespace(t)
	u := newUser(t, c)
	u.write("compose.yml", `services:
  crasher:
    image: docker.io/library/busybox:local
    command: ["sh", "-c", "echo 'fatal: config missing'; exit 3"]
    # A check that never passes keeps the crasher from flashing Ready in the instant it runs, which
    # a loaded kubelet can report for longer than deploy's settle time: the test stays deterministic.
    healthcheck:
      test: ["CMD", "false"]
      interval: 1s
  fine:
    image: docker.io/library/busybox:local
    command: sleep 3600
`)
	start := time.Now()
	_, errOut, err := u.run("deploy", "--namespace", ns, "--name", "crashy", "--wait", "--timeout", "25s")
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("want exit code 1, got %v", err)
	}
	if time.Since(start) > 90*time.Second {
		t.Errorf("deploy ignored --timeout: took %s", time.Since(start))
	}
	for _, want := range []string{"timed out", "not ready: crasher", "fatal: config missing", "exit code 3"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("error output lacks %q:\n%s", want, errOut)
		}
	}
	if strings.Contains(errOut, "not ready: crasher, fine") {
		t.Errorf("the healthy service is reported as not ready:\n%s", errOut)
	}
	state, err := c.Clientset.CoreV1().ConfigMaps(ns).Get(context.Background(), "devtool-env-crashy", metav1.GetOptions{})
	if err != nil || state.Data["status"] != "error" {
		t.Errorf("state should record the error: %v %v", err, state.Data)
	}
}

// TestDeployDryRunTouchesNothing prints YAML and creates nothing.
func TestDeployDryRunTouchesNothing(t *testing.T) {
	c := testcluster.Connect(t)
	ns := c.Namespace(t)
	u := newUser(t, c)
	u.write("docker-compose.yaml", "services:\n  api:\n    image: docker.io/library/busybox:local\n    ports: [\"9000:9000\"]\n")
	out := u.mustRun("deploy", "--namespace", ns, "--dry-run")
	for _, want := range []string{"kind: Deployment", "kind: Service", "name: api", "dev.devtool/deployed-by"} {
		if !strings.Contains(out, want) {
			t.Errorf("dry-run output lacks %q", want)
		}
	}
	l, err := c.Clientset.AppsV1().Deployments(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil || len(l.Items) != 0 {
		t.Errorf("dry run created deployments: %v %d", err, len(l.Items))
	}
	cms, _ := c.Clientset.CoreV1().ConfigMaps(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "dev.devtool/environment"})
	if len(cms.Items) != 0 {
		t.Errorf("dry run recorded state")
	}
}

// TestDeployBadComposeFile: a clear error naming file:line, nothing applied.
func TestDeployBadComposeFile(t *testing.T) {
	c := testcluster.Connect(t)
	ns := c.Namespace(t)
	u := newUser(t, c)
	u.write("compose.yml", "services:\n  web:\n    image: docker.io/library/busybox:local\n    volumes: [\"missing:/data\"]\n")
	_, errOut, err := u.run("deploy", "--namespace", ns)
	if err == nil {
		t.Fatal("deploy of an invalid file succeeded")
	}
	if !strings.Contains(errOut, "compose.yml:4:") || !strings.Contains(errOut, "missing") {
		t.Errorf("error does not name file:line and the volume:\n%s", errOut)
	}
	l, _ := c.Clientset.AppsV1().Deployments(ns).List(context.Background(), metav1.ListOptions{})
	if len(l.Items) != 0 {
		t.Errorf("objects were created from an invalid file")
	}
}

// TestExampleHello deploys examples/hello (the README's demo) as a user would, then destroys it
// with --volumes: nothing of the environment is left.
func TestExampleHello(t *testing.T) {
	c := testcluster.Connect(t)
	ns := c.Namespace(t)
	u := newUser(t, c)
	src, err := os.ReadFile(filepath.Join("..", "..", "examples", "hello", "compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	u.write("compose.yml", string(src))
	ctx := context.Background()
	u.mustRun("deploy", "--namespace", ns, "--wait", "--timeout", "3m")
	pods, err := c.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "dev.devtool/deployed-by=hello"})
	if err != nil {
		t.Fatal(err)
	}
	var ready, done int
	for _, p := range pods.Items {
		switch {
		case p.Status.Phase == corev1.PodSucceeded:
			done++
		case kube.PodReady(&p):
			ready++
		}
	}
	if ready != 2 || done != 1 {
		t.Errorf("want db and web Ready and the migrate job done, got %d ready, %d succeeded", ready, done)
	}
	logs, err := c.Clientset.CoreV1().Pods(ns).GetLogs(jobPod(t, c, ns, "migrate"), &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil || !strings.Contains(string(logs), "rows: 42") || !strings.Contains(string(logs), "schema migrated") {
		t.Errorf("migrate did not reach db through its Service before running: %q %v", logs, err)
	}
	u.mustRun("destroy", "--namespace", ns, "--volumes", "--wait")
	left, err := c.Objects()
	if err != nil {
		t.Fatal(err)
	}
	items, err := left.ListLabelled(ctx, ns, "dev.devtool/deployed-by=hello")
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range items {
		t.Errorf("left after destroy --volumes: %s %s", it.GetKind(), it.GetName())
	}
}

func jobPod(t *testing.T, c *testcluster.Cluster, ns, job string) string {
	t.Helper()
	l, err := c.Clientset.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "job-name=" + job})
	if err != nil || len(l.Items) == 0 {
		t.Fatalf("no pod for job %s: %v", job, err)
	}
	return l.Items[0].Name
}

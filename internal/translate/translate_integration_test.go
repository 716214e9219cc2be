//go:build integration

package translate

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"

	"github.com/devtool/devtool/internal/compose"
	"github.com/devtool/devtool/internal/kube"
	"github.com/devtool/devtool/internal/testcluster"
)

// create sends one translated object to the API server, for real or as a server-side dry run
// (validation, defaulting and admission all run; nothing is stored).
func create(ctx context.Context, cs kubernetes.Interface, obj runtime.Object, dryRun bool) error {
	o := metav1.CreateOptions{FieldManager: "devtool"}
	if dryRun {
		o.DryRun = []string{metav1.DryRunAll}
	}
	var err error
	switch x := obj.(type) {
	case *corev1.Secret:
		_, err = cs.CoreV1().Secrets(x.Namespace).Create(ctx, x, o)
	case *corev1.ConfigMap:
		_, err = cs.CoreV1().ConfigMaps(x.Namespace).Create(ctx, x, o)
	case *corev1.PersistentVolumeClaim:
		_, err = cs.CoreV1().PersistentVolumeClaims(x.Namespace).Create(ctx, x, o)
	case *corev1.Service:
		_, err = cs.CoreV1().Services(x.Namespace).Create(ctx, x, o)
	case *appsv1.Deployment:
		_, err = cs.AppsV1().Deployments(x.Namespace).Create(ctx, x, o)
	case *appsv1.StatefulSet:
		_, err = cs.AppsV1().StatefulSets(x.Namespace).Create(ctx, x, o)
	case *batchv1.Job:
		_, err = cs.BatchV1().Jobs(x.Namespace).Create(ctx, x, o)
	case *networkingv1.Ingress:
		_, err = cs.NetworkingV1().Ingresses(x.Namespace).Create(ctx, x, o)
	default:
		return fmt.Errorf("unexpected object type %T", obj)
	}
	return err
}

// TestServerDryRun: the API server accepts every object of every golden case.
func TestServerDryRun(t *testing.T) {
	c := testcluster.Connect(t)
	ns := c.Namespace(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, tc := range goldenCases {
		t.Run(tc.name, func(t *testing.T) {
			opts := tc.opts
			opts.Namespace = ns
			res, err := Translate(tc.project(), opts)
			if err != nil {
				t.Fatalf("Translate: %v", err)
			}
			for _, o := range res.Objects {
				if err := create(ctx, c.Clientset, o, true); err != nil {
					m, _ := o.(metav1.Object)
					t.Errorf("%s %s rejected: %v", o.GetObjectKind().GroupVersionKind().Kind, m.GetName(), err)
				}
			}
		})
	}
}

// TestCorpusServerDryRun: the API server accepts every object translated from every loadable
// file of the shared Compose corpus.
func TestCorpusServerDryRun(t *testing.T) {
	projects := loadCorpus(t)
	c := testcluster.Connect(t)
	ns := c.Namespace(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	names := make([]string, 0, len(projects))
	for n := range projects {
		names = append(names, n)
	}
	sort.Strings(names)
	sent := 0
	for _, name := range names {
		res, err := Translate(projects[name], Options{Name: "corpus", Namespace: ns, ClusterDomain: "devtool.test"})
		if err != nil {
			continue // TestCorpus judges refusals
		}
		for _, o := range res.Objects {
			sent++
			if err := create(ctx, c.Clientset, o, true); err != nil {
				m, _ := o.(metav1.Object)
				t.Errorf("%s: %s %s rejected: %v", name, o.GetObjectKind().GroupVersionKind().Kind, m.GetName(), err)
			}
		}
	}
	t.Logf("%d files, %d objects accepted by server-side dry run", len(names), sent)
}

// TestRunsOnCluster deploys a small project for real: a named volume seeded from the image by
// the init container (a server reads the image's /www through the volume mounted over it), a
// second service and a Job co-scheduled on the same ReadWriteOnce volume, and a readiness probe.
func TestRunsOnCluster(t *testing.T) {
	c := testcluster.Connect(t)
	ns := c.Namespace(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	site := []compose.VolumeMount{{Kind: compose.VolumeNamed, Source: "site", Target: "/www"}}
	ready := &compose.Healthcheck{Exec: []string{"sh", "-c", "grep -q 'hello from busybox' /www/index.html"}, Interval: time.Second, Readiness: true}
	p := &compose.Project{
		Volumes: []*compose.Volume{{Name: "site", Size: "16Mi"}},
		Services: []*compose.Service{
			{Name: "web", Image: testcluster.Image, Scale: 1, Volumes: site, Healthcheck: ready,
				Command: []string{"httpd", "-f", "-p", "8080", "-h", "/www"}, Ports: []compose.Port{{ContainerPort: 8080}}},
			{Name: "reader", Image: testcluster.Image, Scale: 1, Volumes: site, Healthcheck: ready,
				Command: []string{"sleep", "3600"}, StopGracePeriod: durp("1s")},
			{Name: "check", Image: testcluster.Image, Scale: 1, Volumes: site,
				Restart: compose.Restart{Policy: compose.RestartNever},
				Command: []string{"grep", "-q", "hello from busybox", "/www/index.html"}},
		},
	}
	res, err := Translate(p, Options{Name: "it", Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range res.Objects {
		if err := create(ctx, c.Clientset, o, false); err != nil {
			t.Fatalf("creating %s: %v", o.GetObjectKind().GroupVersionKind().Kind, err)
		}
	}
	for _, s := range res.Services {
		done := func(pods []corev1.Pod) bool {
			for _, p := range pods {
				if (s.Kind == KindJob && p.Status.Phase == corev1.PodSucceeded) || (s.Kind != KindJob && kube.PodReady(&p)) {
					return true
				}
			}
			return false
		}
		pods, err := kube.WaitForPods(ctx, c.Clientset, ns, s.PodSelector, done)
		if err != nil {
			t.Fatalf("service %s: %v (pods: %s)", s.Name, err, describe(pods))
		}
	}
}

// TestMergedFilesWithSecretsOnCluster loads two merged Compose files (the override adds a
// secret, a config and a check Job) and runs them for real: the Job succeeds only when the
// mounted secret and config files hold the expected content inside the pod.
func TestMergedFilesWithSecretsOnCluster(t *testing.T) {
	c := testcluster.Connect(t)
	ns := c.Namespace(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	files := map[string]string{
		"compose.yaml": "services:\n  app:\n    image: " + testcluster.Image + "\n    command: [sleep, \"3600\"]\n    stop_grace_period: 1s\n",
		"compose.override.yaml": `services:
  check:
    image: ` + testcluster.Image + `
    restart: "no"
    command: [sh, -c, "grep -qx s3cret-value /run/secrets/db_password && grep -qx 'mode=dev' /etc/app.ini && test \"$$(stat -c %a /run/secrets/db_password)\" = 440"]
    secrets: [{source: db_password, mode: 0440}]
    configs: [{source: app_ini, target: /etc/app.ini}]
  app:
    secrets: [db_password]
secrets:
  db_password: {file: ./db_password.txt}
configs:
  app_ini: {content: "mode=dev"}
`,
		"db_password.txt": "s3cret-value\n",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	list, err := compose.FindFiles(dir)
	if err != nil || len(list) != 2 {
		t.Fatalf("FindFiles = %v, %v", list, err)
	}
	p, err := compose.Load(compose.LoadOptions{Files: list, Environ: map[string]string{}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := Translate(p, Options{Name: "it", Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range res.Objects {
		if err := create(ctx, c.Clientset, o, false); err != nil {
			t.Fatalf("creating %s: %v", o.GetObjectKind().GroupVersionKind().Kind, err)
		}
	}
	for _, s := range res.Services {
		done := func(pods []corev1.Pod) bool {
			for _, p := range pods {
				if (s.Kind == KindJob && p.Status.Phase == corev1.PodSucceeded) || (s.Kind != KindJob && kube.PodReady(&p)) {
					return true
				}
				if s.Kind == KindJob && p.Status.Phase == corev1.PodFailed {
					t.Errorf("the check Job failed: the mounted secret or config is not as expected (%s)", describe(pods))
					return true
				}
			}
			return false
		}
		pods, err := kube.WaitForPods(ctx, c.Clientset, ns, s.PodSelector, done)
		if err != nil {
			t.Fatalf("service %s: %v (pods: %s)", s.Name, err, describe(pods))
		}
	}
}

func describe(pods []corev1.Pod) string {
	out := ""
	for _, p := range pods {
		out += fmt.Sprintf("%s phase=%s", p.Name, p.Status.Phase)
		for _, cs := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
			if w := cs.State.Waiting; w != nil {
				out += fmt.Sprintf(" %s waiting %s %s;", cs.Name, w.Reason, w.Message)
			}
			if x := cs.State.Terminated; x != nil {
				out += fmt.Sprintf(" %s exited %d %s;", cs.Name, x.ExitCode, x.Reason)
			}
		}
		out += " "
	}
	return out
}

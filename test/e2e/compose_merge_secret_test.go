//go:build integration

package e2e

import (
	"bytes"
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devtool/devtool/internal/kube"
	"github.com/devtool/devtool/internal/testcluster"
)

// TestComposeMergedFilesWithSecret deploys two Compose files given with two --file flags (the
// second overrides a variable, adds another and adds a service) whose service mounts a secret
// read from a file; inside the pod the secret holds the file's content at /run/secrets/<name>
// and the merged settings took effect. destroy leaves nothing labelled for the environment.
func TestComposeMergedFilesWithSecret(t *testing.T) {
	c := testcluster.Connect(t)
	ns := c.Namespace(t)
	u := newUser(t, c)
	const secret = "s3cr3t from a file\nsecond line"
	u.write("api_key.txt", secret)
	u.write("base.yml", `name: mergesec
services:
  web:
    image: docker.io/library/busybox:local
    command: sleep 3600
    environment:
      GREETING: base
      KEPT: from-base
    secrets:
      - api_key
secrets:
  api_key:
    file: ./api_key.txt
`)
	u.write("override.yml", `services:
  web:
    environment:
      GREETING: merged
      EXTRA: added
  worker:
    image: docker.io/library/busybox:local
    command: sleep 3600
`)
	ctx := context.Background()
	u.mustRun("deploy", "--file", "base.yml", "--file", "override.yml", "--namespace", ns, "--wait", "--timeout", "4m")

	pods, err := c.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=web,dev.devtool/deployed-by=mergesec"})
	if err != nil || len(pods.Items) == 0 {
		t.Fatalf("no pod for web: %v", err)
	}
	var pod *corev1.Pod
	for i := range pods.Items {
		if kube.PodReady(&pods.Items[i]) {
			pod = &pods.Items[i]
		}
	}
	if pod == nil {
		t.Fatal("no ready pod for web after deploy --wait")
	}
	run := func(script string) string {
		t.Helper()
		var out, errb bytes.Buffer
		err := c.Exec(ctx, kube.ExecOptions{Namespace: ns, Pod: pod.Name, Container: pod.Spec.Containers[0].Name,
			Command: []string{"sh", "-c", script}, Stdout: &out, Stderr: &errb})
		if err != nil {
			t.Fatalf("exec %q: %v\n%s", script, err, errb.String())
		}
		return out.String()
	}
	if got := run("cat /run/secrets/api_key"); got != secret {
		t.Errorf("/run/secrets/api_key holds %q, want %q", got, secret)
	}
	if got := strings.TrimSpace(run(`echo "$GREETING $KEPT $EXTRA"`)); got != "merged from-base added" {
		t.Errorf("merged environment: %q, want %q", got, "merged from-base added")
	}
	if _, err := c.Clientset.AppsV1().Deployments(ns).Get(ctx, "worker", metav1.GetOptions{}); err != nil {
		t.Errorf("the service added by the second file: %v", err)
	}

	u.mustRun("destroy", "--file", "base.yml", "--file", "override.yml", "--namespace", ns, "--wait")
	objs, err := c.Objects()
	if err != nil {
		t.Fatal(err)
	}
	items, err := objs.ListLabelled(ctx, ns, "dev.devtool/deployed-by=mergesec")
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range items {
		if it.GetKind() == "Pod" && it.GetDeletionTimestamp() != nil {
			continue // terminating
		}
		t.Errorf("left after destroy: %s %s", it.GetKind(), it.GetName())
	}
	cms, err := c.Clientset.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{LabelSelector: "dev.devtool/environment"})
	if err != nil || len(cms.Items) != 0 {
		t.Errorf("state left after destroy: %v %d", err, len(cms.Items))
	}
}

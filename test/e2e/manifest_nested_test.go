//go:build integration

package e2e

import (
	"context"
	"path/filepath"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devtool/devtool/internal/labels"
	"github.com/devtool/devtool/internal/testcluster"
)

// TestManifestKeepsNestedComposeObjects: a devtool.yml without compose or endpoints parts whose
// command itself deploys a Compose file keeps those objects, deploy after deploy (they carry the
// environment's labels through the labelling proxy, but the state record says this environment's
// deploys applied no Compose objects of their own).
func TestManifestKeepsNestedComposeObjects(t *testing.T) {
	c := testcluster.Connect(t)
	ns := c.Namespace(t)
	u := nestedUser(t, c, "nester", "nester")
	ctx := context.Background()
	for i := 0; i < 2; i++ {
		u.mustRun("deploy", "--namespace", ns, "--timeout", "4m")
		d, err := c.Clientset.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("deploy %d: the nested deploy's Deployment is gone: %v", i+1, err)
		}
		t.Logf("deploy %d: web labels %v", i+1, d.Labels)
	}
	u.mustRun("destroy", "--namespace", ns, "--wait")
}

// TestManifestNestedDeployOfAnotherEnvironment: a devtool.yml command that deploys a Compose file
// under another --name makes that other environment. Its objects and their selectors carry the
// other name (the outer deploy's labelling proxy keeps what devtool itself sets; it used to
// relabel the pod template, and the API server refused the Deployment: selector does not match).
// Destroying the outer environment leaves them; destroying the other removes them.
func TestManifestNestedDeployOfAnotherEnvironment(t *testing.T) {
	c := testcluster.Connect(t)
	ns := c.Namespace(t)
	u := nestedUser(t, c, "outer", "inner-env")
	ctx := context.Background()
	u.mustRun("deploy", "--namespace", ns, "--timeout", "4m")
	d, err := c.Clientset.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the nested deploy's Deployment: %v", err)
	}
	if got := d.Labels[labels.DeployedBy]; got != "inner-env" {
		t.Errorf("Deployment deployed-by %q, want inner-env", got)
	}
	if got := d.Spec.Template.Labels[labels.DeployedBy]; got != "inner-env" {
		t.Errorf("pod template deployed-by %q, want inner-env", got)
	}
	u.mustRun("destroy", "--namespace", ns, "--wait")
	if _, err := c.Clientset.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{}); err != nil {
		t.Fatalf("destroying the outer environment removed the other environment's Deployment: %v", err)
	}
	inner := *u
	inner.dir = filepath.Join(u.dir, "inner")
	inner.mustRun("destroy", "--namespace", ns, "--name", "inner-env", "--wait")
	if _, err := c.Clientset.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("after destroying inner-env: %v", err)
	}
}

// nestedUser is a folder whose devtool.yml (name outer) has one deploy command: a devtool deploy,
// under --name inner, of inner/compose.yml (one busybox Deployment, web).
func nestedUser(t *testing.T, c *testcluster.Cluster, outer, inner string) *user {
	u := newUser(t, c)
	u.extra = append(u.extra, "DEVTOOL_BIN="+devtoolBin)
	u.write("inner/compose.yml", `services:
  web:
    image: docker.io/library/busybox:local
    command: sleep 3600
`)
	u.write("devtool.yml", "name: "+outer+`
deploy:
  - cd inner && "$DEVTOOL_BIN" deploy --namespace "$DEVTOOL_NAMESPACE" --name `+inner+"\n")
	return u
}

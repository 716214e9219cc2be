//go:build integration

package e2e

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devtool/devtool/internal/testcluster"
)

// TestManifestKeepsNestedComposeObjects: a devtool.yml without compose or endpoints parts whose
// command itself deploys a Compose file keeps those objects, deploy after deploy (they carry the
// environment's labels through the labelling proxy, but the state record says this environment's
// deploys applied no Compose objects of their own).
func TestManifestKeepsNestedComposeObjects(t *testing.T) {
	c := testcluster.Connect(t)
	ns := c.Namespace(t)
	u := newUser(t, c)
	u.extra = append(u.extra, "DEVTOOL_BIN="+devtoolBin)
	u.write("inner/compose.yml", `services:
  web:
    image: docker.io/library/busybox:local
    command: sleep 3600
`)
	u.write("devtool.yml", `name: nester
deploy:
  - cd inner && "$DEVTOOL_BIN" deploy --namespace "$DEVTOOL_NAMESPACE" --name nester
`)
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

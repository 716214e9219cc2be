//go:build integration

package e2e

import (
	"context"
	"sort"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devtool/devtool/internal/platform/api"
	"github.com/devtool/devtool/internal/platform/client"
	"github.com/devtool/devtool/internal/platform/store"
	"github.com/devtool/devtool/internal/testcluster"
)

// removePlatformUserAfter removes platform user name when the test ends, with every namespace it
// owns then: its personal namespace and those it created (and their pods). The namespaces are
// deleted with the cluster's own kubeconfig too, since the platform under test may keep a removed
// user's namespaces (releases before this one did) and the user may have left namespaces the
// platform cannot tell are a test's. Call it right after making the user (admin is used when the
// test's cleanups run; its Close only drops idle connections).
func removePlatformUserAfter(t *testing.T, admin *client.Client, name string) {
	t.Helper()
	c := testcluster.Connect(t)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		owned := platformUserNamespaces(ctx, t, c, name) // before its bindings go with it
		if err := admin.DeleteUser(ctx, name); err != nil && !client.IsNotFound(err) {
			t.Errorf("removing platform user %s: %v", name, err)
		}
		bg := metav1.DeletePropagationBackground
		for _, ns := range owned {
			if err := c.Clientset.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("deleting namespace %s of platform user %s: %v", ns, name, err)
			}
		}
	})
}

// platformUserNamespaces are the platform's namespaces user owns: its personal one and those where
// it has the owner's membership binding.
func platformUserNamespaces(ctx context.Context, t *testing.T, c *testcluster.Cluster, user string) []string {
	t.Helper()
	set := map[string]bool{}
	if ns, err := c.Clientset.CoreV1().Namespaces().Get(ctx, user, metav1.GetOptions{}); err == nil && ns.Labels[store.LabelPersonal] == user {
		set[user] = true
	}
	rbs, err := c.Clientset.RbacV1().RoleBindings("").List(ctx, metav1.ListOptions{LabelSelector: store.LabelMember + "=" + user + "," + store.LabelRole + "=" + api.RoleOwner})
	if err != nil {
		t.Errorf("listing the namespaces of platform user %s: %v", user, err)
	}
	if rbs != nil {
		for _, rb := range rbs.Items {
			ns, err := c.Clientset.CoreV1().Namespaces().Get(ctx, rb.Namespace, metav1.GetOptions{})
			if err == nil && ns.Labels[store.LabelManaged] == "true" {
				set[rb.Namespace] = true
			}
		}
	}
	out := make([]string, 0, len(set))
	for ns := range set {
		out = append(out, ns)
	}
	sort.Strings(out)
	return out
}

//go:build integration

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/devtool/devtool/internal/kube"
	"github.com/devtool/devtool/internal/testcluster"
)

// clusterManifest's deploy command creates cluster-scoped objects with kubectl (through the
// labelling proxy): a ClusterRole named after the namespace (kubectl create: protobuf), one
// applied from YAML, and one annotated dev.devtool/policy: keep.
const clusterManifest = `name: shop
deploy:
  commands:
    - name: role
      command: kubectl create clusterrole "e2e-$DEVTOOL_NAMESPACE" --verb=get --resource=pods
    - name: apply
      command: |
        cat <<YAML | kubectl apply -f -
        apiVersion: rbac.authorization.k8s.io/v1
        kind: ClusterRole
        metadata:
          name: e2e-applied-$DEVTOOL_NAMESPACE
        rules: []
        ---
        apiVersion: rbac.authorization.k8s.io/v1
        kind: ClusterRole
        metadata:
          name: e2e-kept-$DEVTOOL_NAMESPACE
          annotations:
            dev.devtool/policy: keep
        rules: []
        YAML
    - name: config
      command: kubectl create configmap settings --from-literal=a=b
`

// deleteClusterRolesAfter removes the test's ClusterRoles when it ends: a namespace's deletion
// does not remove cluster-scoped objects.
func deleteClusterRolesAfter(t *testing.T, c *testcluster.Cluster, names ...string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, n := range names {
			if err := c.Clientset.RbacV1().ClusterRoles().Delete(ctx, n, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("deleting clusterrole %s: %v", n, err)
			}
		}
	})
}

// TestDestroyDeletesClusterScopedObjects: a deploy command's cluster-scoped objects carry the
// environment's name and namespace; destroy deletes them, and keeps those of the same-named
// environment of another namespace and those annotated policy keep.
func TestDestroyDeletesClusterScopedObjects(t *testing.T) {
	c := testcluster.Connect(t)
	nsA, nsB := c.Namespace(t), c.Namespace(t)
	var all []string
	for _, ns := range []string{nsA, nsB} {
		all = append(all, "e2e-"+ns, "e2e-applied-"+ns, "e2e-kept-"+ns)
	}
	deleteClusterRolesAfter(t, c, all...)
	ctx := context.Background()
	crs := c.Clientset.RbacV1().ClusterRoles()

	u := newUser(t, c)
	u.write("devtool.yml", clusterManifest)
	for _, ns := range []string{nsA, nsB} {
		u.mustRun("deploy", "--namespace", ns, "--timeout", "3m")
		for _, n := range []string{"e2e-" + ns, "e2e-applied-" + ns, "e2e-kept-" + ns} {
			cr, err := crs.Get(ctx, n, metav1.GetOptions{})
			if err != nil {
				t.Fatalf("clusterrole %s after deploy: %v", n, err)
			}
			if cr.Labels[kube.LabelDeployedBy] != "shop" || cr.Labels[kube.LabelDeployedNamespace] != ns {
				t.Errorf("clusterrole %s labels %v: want deployed-by=shop, deployed-namespace=%s", n, cr.Labels, ns)
			}
		}
		cm, err := c.Clientset.CoreV1().ConfigMaps(ns).Get(ctx, "settings", metav1.GetOptions{})
		if err != nil || cm.Labels[kube.LabelDeployedBy] != "shop" || cm.Labels[kube.LabelDeployedNamespace] != "" {
			t.Errorf("configmap settings in %s: %v, labels %v: want deployed-by only", ns, err, cm.Labels)
		}
	}

	_, errOut, err := u.run("destroy", "--namespace", nsA, "--wait")
	if err != nil {
		t.Fatalf("destroy: %v", err)
	}
	if !strings.Contains(errOut, "deleting clusterrole e2e-"+nsA) {
		t.Errorf("destroy did not say it deletes the ClusterRole:\n%s", errOut)
	}
	for _, n := range []string{"e2e-" + nsA, "e2e-applied-" + nsA} {
		if _, err := crs.Get(ctx, n, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("clusterrole %s after destroy: %v (want it deleted)", n, err)
		}
	}
	for _, n := range []string{"e2e-kept-" + nsA, "e2e-" + nsB, "e2e-applied-" + nsB, "e2e-kept-" + nsB} {
		if _, err := crs.Get(ctx, n, metav1.GetOptions{}); err != nil {
			t.Errorf("clusterrole %s after destroying %s's environment: %v (want it kept)", n, nsA, err)
		}
	}
	if _, err := c.Clientset.CoreV1().ConfigMaps(nsB).Get(ctx, "settings", metav1.GetOptions{}); err != nil {
		t.Errorf("configmap settings of %s: %v", nsB, err)
	}
}

// TestDestroyWithoutClusterRights: a user with rights in the namespace only destroys the
// environment without an error; the cluster-scoped kinds it may not list are skipped with a debug log.
func TestDestroyWithoutClusterRights(t *testing.T) {
	c := testcluster.Connect(t)
	ns := c.Namespace(t)
	deleteClusterRolesAfter(t, c, "e2e-"+ns, "e2e-applied-"+ns, "e2e-kept-"+ns)
	ctx := context.Background()
	u := newUser(t, c)
	u.write("devtool.yml", clusterManifest)
	u.mustRun("deploy", "--namespace", ns, "--timeout", "3m")

	u.extra = []string{"KUBECONFIG=" + namespaceOnlyKubeconfig(t, c, ns)}
	_, errOut, err := u.run("destroy", "--namespace", ns, "--wait", "--loglevel", "debug")
	if err != nil {
		t.Fatalf("destroy by a user without cluster rights: %v", err)
	}
	if !strings.Contains(errOut, "skipping a cluster-scoped kind") || !strings.Contains(errOut, "clusterroles") {
		t.Errorf("no debug log of the skipped cluster-scoped kinds:\n%s", errOut)
	}
	if _, err := c.Clientset.CoreV1().ConfigMaps(ns).Get(ctx, "settings", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("configmap settings after destroy: %v", err)
	}
	// What that user cannot see stays: an admin's destroy would remove it.
	if _, err := c.Clientset.RbacV1().ClusterRoles().Get(ctx, "e2e-"+ns, metav1.GetOptions{}); err != nil {
		t.Errorf("clusterrole e2e-%s: %v", ns, err)
	}
}

// namespaceOnlyKubeconfig is a kubeconfig for a ServiceAccount of ns that may do anything in ns
// and nothing outside it.
func namespaceOnlyKubeconfig(t *testing.T, c *testcluster.Cluster, ns string) string {
	t.Helper()
	ctx := context.Background()
	cs := c.Clientset
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "dev"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "all"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "dev-all"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "all"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "dev", Namespace: ns}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	exp := int64(3600)
	tok, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "dev", &authv1.TokenRequest{Spec: authv1.TokenRequestSpec{ExpirationSeconds: &exp}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := clientcmdapi.NewConfig()
	ca := c.Config.CAData
	if len(ca) == 0 && c.Config.CAFile != "" {
		if ca, err = os.ReadFile(c.Config.CAFile); err != nil {
			t.Fatal(err)
		}
	}
	cfg.Clusters["c"] = &clientcmdapi.Cluster{Server: c.Config.Host, CertificateAuthorityData: ca}
	cfg.AuthInfos["dev"] = &clientcmdapi.AuthInfo{Token: tok.Status.Token}
	cfg.Contexts["dev"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "dev", Namespace: ns}
	cfg.CurrentContext = "dev"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

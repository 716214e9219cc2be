// Package contexttest builds, for integration tests, a kubeconfig with two contexts on the test
// cluster and a devtool home folder, so commands can switch contexts and namespaces for real.
package contexttest

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/devtool/devtool/internal/testcluster"
)

// Env is a kubeconfig with two contexts on the test cluster and a temp DEVTOOL_HOME:
//
//   - ContextA ("dev-a"): the cluster's own (admin) credentials, default namespace NamespaceA; current.
//   - ContextB ("dev-b"): the same credentials impersonating ServiceAccount "limited" of NamespaceB,
//     which may only get and list pods in NamespaceB; default namespace NamespaceB.
type Env struct {
	Cluster                *testcluster.Cluster
	Kubeconfig, Home       string
	NamespaceA, NamespaceB string
	Vars                   map[string]string
}

const (
	ContextA = "dev-a"
	ContextB = "dev-b"
)

// LimitedUser is the identity ContextB acts as.
func (e *Env) LimitedUser() string { return "system:serviceaccount:" + e.NamespaceB + ":limited" }

// Getenv reads Vars (KUBECONFIG and DEVTOOL_HOME).
func (e *Env) Getenv(k string) string { return e.Vars[k] }

// New connects to the test cluster (skipping or failing as testcluster does), makes two namespaces
// and writes the kubeconfig.
func New(t *testing.T) *Env {
	t.Helper()
	c := testcluster.Connect(t)
	e := &Env{Cluster: c, NamespaceA: c.Namespace(t), NamespaceB: c.Namespace(t)}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs := c.Clientset
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(cs.CoreV1().ServiceAccounts(e.NamespaceB).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "limited"}}, metav1.CreateOptions{}))
	must(cs.RbacV1().Roles(e.NamespaceB).Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "pods-reader"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list"}}},
	}, metav1.CreateOptions{}))
	must(cs.RbacV1().RoleBindings(e.NamespaceB).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "limited-pods-reader"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "limited", Namespace: e.NamespaceB}},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "pods-reader"},
	}, metav1.CreateOptions{}))

	// Paths inside the cluster's kubeconfig become absolute, so the copy works from anywhere.
	src, err := (&clientcmd.ClientConfigLoadingRules{ExplicitPath: c.Kubeconfig}).Load()
	if err != nil {
		t.Fatal(err)
	}
	cur := src.Contexts[src.CurrentContext]
	if cur == nil {
		t.Fatalf("%s has no current context", c.Kubeconfig)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["test"] = src.Clusters[cur.Cluster]
	admin := src.AuthInfos[cur.AuthInfo]
	limited := admin.DeepCopy()
	limited.Impersonate = e.LimitedUser()
	cfg.AuthInfos["admin"], cfg.AuthInfos["limited"] = admin, limited
	cfg.Contexts[ContextA] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "admin", Namespace: e.NamespaceA}
	cfg.Contexts[ContextB] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "limited", Namespace: e.NamespaceB}
	cfg.CurrentContext = ContextA
	dir := t.TempDir()
	e.Kubeconfig, e.Home = filepath.Join(dir, "kubeconfig"), filepath.Join(dir, "home")
	if err := clientcmd.WriteToFile(*cfg, e.Kubeconfig); err != nil {
		t.Fatal(err)
	}
	e.Vars = map[string]string{"KUBECONFIG": e.Kubeconfig, "DEVTOOL_HOME": e.Home}
	return e
}

// WhoAmI is the user the API server sees for cs.
func WhoAmI(t *testing.T, cs kubernetes.Interface) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authnv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("whoami: %v", err)
	}
	return r.Status.UserInfo.Username
}

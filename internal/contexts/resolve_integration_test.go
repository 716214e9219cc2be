//go:build integration

package contexts_test

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devtool/devtool/internal/contexts"
	"github.com/devtool/devtool/internal/contexts/contexttest"
)

// TestResolveAgainstCluster checks the precedence with real credentials: which identity and which
// namespace the API server sees for each combination of flags and stored context.
func TestResolveAgainstCluster(t *testing.T) {
	e := contexttest.New(t)
	r := &contexts.Resolver{Getenv: e.Getenv}
	admin := contexttest.WhoAmI(t, e.Cluster.Clientset)

	check := func(name string, flags contexts.Flags, wantUser, wantNS string) {
		t.Helper()
		tg, err := r.Resolve(flags)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := contexttest.WhoAmI(t, tg.Kube.Clientset); got != wantUser {
			t.Errorf("%s: API server sees %q, want %q", name, got, wantUser)
		}
		if tg.Namespace != wantNS || tg.Kube.Namespace != wantNS {
			t.Errorf("%s: namespace %q, want %q", name, tg.Namespace, wantNS)
		}
		// The namespace is really usable with those credentials.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if wantUser == admin || wantNS == e.NamespaceB {
			if _, err := tg.Kube.Clientset.CoreV1().Pods(tg.Namespace).List(ctx, metav1.ListOptions{}); err != nil {
				t.Errorf("%s: listing pods in %s: %v", name, tg.Namespace, err)
			}
		}
	}

	// Nothing stored: the kubeconfig's current context (dev-a) and its namespace.
	check("kubeconfig", contexts.Flags{}, admin, e.NamespaceA)
	check("--context dev-b", contexts.Flags{Context: contexttest.ContextB}, e.LimitedUser(), e.NamespaceB)
	check("--namespace", contexts.Flags{Namespace: e.NamespaceB}, admin, e.NamespaceB)

	// A current devtool context beats the kubeconfig; flags beat both.
	kc, err := contexts.LoadKubeconfig(e.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	store, _ := r.Store()
	if _, err := contexts.Use(store, kc, contexts.UseOptions{Name: contexttest.ContextB}); err != nil {
		t.Fatal(err)
	}
	check("current devtool context", contexts.Flags{}, e.LimitedUser(), e.NamespaceB)
	check("--context over current", contexts.Flags{Context: contexttest.ContextA}, admin, e.NamespaceA)
	check("--context and --namespace", contexts.Flags{Context: contexttest.ContextA, Namespace: e.NamespaceB}, admin, e.NamespaceB)
	check("--namespace over current", contexts.Flags{Namespace: e.NamespaceA}, e.LimitedUser(), e.NamespaceA)
}

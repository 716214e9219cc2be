// Package storetest starts a platform store on fake clients, for the tests
// of the packages built on it.
package storetest

import (
	"context"
	"maps"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	kfake "k8s.io/client-go/kubernetes/fake"

	"github.com/devtool/devtool/internal/kubefake"
	"github.com/devtool/devtool/internal/platform/store"
)

// New starts a store on a fresh fake clientset and a fake dynamic client
// (kubefake.Dynamic: its DeleteCollection deletes) serving the store's
// resources and extra (resource: list kind), impersonating nobody (every user
// acts with the clientset). It runs until the test ends. The clientset is
// returned for the caller's assertions and other components; the dynamic
// client is the store's Dyn.
func New(t testing.TB, extra map[schema.GroupVersionResource]string) (*store.Store, *kfake.Clientset) {
	t.Helper()
	kinds := map[schema.GroupVersionResource]string{
		store.UserResource: "UserList", store.TokenResource: "AccessTokenList", store.SessionResource: "SessionList",
	}
	maps.Copy(kinds, extra)
	kc := kfake.NewClientset()
	st := &store.Store{Namespace: store.DefaultNamespace, Limits: store.DefaultLimits, Kube: kc, Dyn: kubefake.Dynamic(kinds),
		Impersonate: func(string) (kubernetes.Interface, error) { return kc, nil }}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := st.Start(ctx); err != nil {
		t.Fatal(err)
	}
	return st, kc
}

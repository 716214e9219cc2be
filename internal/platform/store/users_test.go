package store

import (
	"context"
	"errors"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	dynfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes"
	kfake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/devtool/devtool/internal/kubefake"
	"github.com/devtool/devtool/internal/platform/api"
)

// newFakeStore is a Store on fake Kubernetes clients (no RBAC: the integration test on the local
// cluster proves isolation); each of prepare may add reactors to the dynamic client before the
// store starts.
func newFakeStore(t *testing.T, prepare ...func(*dynfake.FakeDynamicClient)) *Store {
	t.Helper()
	kc := kfake.NewClientset()
	dc := kubefake.Dynamic(map[schema.GroupVersionResource]string{
		UserResource: "UserList", TokenResource: "AccessTokenList", SessionResource: "SessionList",
	})
	for _, p := range prepare {
		p(dc)
	}
	st := &Store{Namespace: DefaultNamespace, Limits: DefaultLimits, Kube: kc, Dyn: dc,
		Impersonate: func(string) (kubernetes.Interface, error) { return kc, nil }}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := st.Start(ctx); err != nil {
		t.Fatal(err)
	}
	return st
}

// TestDeleteUserDeletesItsPersonalNamespace: removing a user deletes its personal namespace (with
// what runs there) and its stored secrets; a namespace it created and shared stays with its other
// member, and a namespace of the user's name that is not its personal one is never deleted. A user
// made again with the same name starts with nothing of the removed one.
func TestDeleteUserDeletesItsPersonalNamespace(t *testing.T) {
	st := newFakeStore(t)
	ctx := context.Background()
	for _, n := range []string{"alice", "bob", "carol"} {
		if _, _, err := st.CreateUser(ctx, n, false, ""); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.CreateNamespace(ctx, "alice", "team-a"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Kube.RbacV1().RoleBindings("team-a").Create(ctx, st.binding("team-a", "bob", api.RoleEditor), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	alice := &User{Name: "alice"}
	if err := st.SetSecret(ctx, alice, SecretScope{}, "DB_PASS", "s3cret"); err != nil {
		t.Fatal(err)
	}
	// carol's namespace is no longer marked as her personal one (an admin took it over).
	carolNS, err := st.Kube.CoreV1().Namespaces().Get(ctx, "carol", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	delete(carolNS.Labels, LabelPersonal)
	if _, err := st.Kube.CoreV1().Namespaces().Update(ctx, carolNS, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	if err := st.DeleteUser(ctx, "alice"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Kube.CoreV1().Namespaces().Get(ctx, "alice", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("alice's personal namespace after her removal: %v, want it deleted", err)
	}
	if _, err := st.Kube.CoreV1().Secrets(DefaultNamespace).Get(ctx, UserSecretPrefix+"alice", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("alice's stored secrets after her removal: %v, want them deleted", err)
	}
	if _, err := st.Kube.CoreV1().Namespaces().Get(ctx, "team-a", metav1.GetOptions{}); err != nil {
		t.Errorf("team-a, which alice created and shared with bob: %v, want it kept", err)
	}
	if _, err := st.Kube.RbacV1().RoleBindings("team-a").Get(ctx, BindingPrefix+"bob", metav1.GetOptions{}); err != nil {
		t.Errorf("bob's membership of team-a: %v", err)
	}
	if _, err := st.Kube.CoreV1().Namespaces().Get(ctx, "bob", metav1.GetOptions{}); err != nil {
		t.Errorf("bob's personal namespace: %v", err)
	}

	if err := st.DeleteUser(ctx, "carol"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Kube.CoreV1().Namespaces().Get(ctx, "carol", metav1.GetOptions{}); err != nil {
		t.Errorf("namespace carol, not her personal one any more, after her removal: %v, want it kept", err)
	}

	// alice again: a new personal namespace, no secrets of the removed alice.
	if _, _, err := st.CreateUser(ctx, "alice", false, ""); err != nil {
		t.Fatal(err)
	}
	vals, err := st.ResolveSecrets(ctx, alice, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(vals) != 0 {
		t.Errorf("the new alice resolves the removed alice's secrets: %v", vals)
	}
	ns, err := st.Kube.CoreV1().Namespaces().Get(ctx, "alice", metav1.GetOptions{})
	if err != nil || ns.Labels[LabelPersonal] != "alice" {
		t.Errorf("the new alice's personal namespace: %v %v", err, ns)
	}

	// A personal namespace still being deleted: making the user again is a conflict that says so.
	now := metav1.Now()
	ns.DeletionTimestamp = &now
	if _, err := st.Kube.CoreV1().Namespaces().Update(ctx, ns, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := st.DeleteUser(ctx, "alice"); err != nil {
		t.Fatal(err)
	}
	_, _, err = st.CreateUser(ctx, "alice", false, "")
	if !errors.Is(err, ErrConflict) {
		t.Errorf("alice again while her namespace is being deleted: %v, want a conflict", err)
	}
}

// TestNewUserBeforeTheCacheSeesIt: a user's first token and first web session work before the
// informer has delivered the user (here it never does: the users watch is frozen), and removing
// the user revokes both at once, whatever the cache still holds. On a loaded machine the informer
// lags by more than the time between "create user" and its first request, which made the token
// endpoint answer invalid_grant for a user it had just made.
func TestNewUserBeforeTheCacheSeesIt(t *testing.T) {
	frozen := watch.NewFake()
	t.Cleanup(frozen.Stop)
	st := newFakeStore(t, func(dc *dynfake.FakeDynamicClient) {
		dc.PrependWatchReactor("users", func(k8stesting.Action) (bool, watch.Interface, error) { return true, frozen, nil })
	})
	ctx := context.Background()
	_, tok, err := st.CreateUser(ctx, "alice", false, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.GetUser("alice"); err == nil {
		t.Fatal("the cache saw alice: the users watch was meant to be frozen")
	}
	if u, _, err := st.Authenticate(ctx, tok); err != nil || u.Name != "alice" {
		t.Fatalf("alice's first token before the cache saw her: %v, %v", u, err)
	}
	_, cookie, err := st.CreateSession(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if u, _, err := st.SessionUser(ctx, cookie); err != nil || u.Name != "alice" {
		t.Fatalf("alice's first session before the cache saw her: %v, %v", u, err)
	}
	if err := st.DeleteUser(ctx, "alice"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.Authenticate(ctx, tok); !errors.Is(err, ErrBadToken) {
		t.Fatalf("a removed user's token: %v, want ErrBadToken", err)
	}
	if _, _, err := st.SessionUser(ctx, cookie); !errors.Is(err, ErrBadSession) {
		t.Fatalf("a removed user's session: %v, want ErrBadSession", err)
	}
}

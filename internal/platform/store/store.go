package store

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	rbaclisters "k8s.io/client-go/listers/rbac/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// Limits are the ResourceQuota and LimitRange defaults every namespace gets.
type Limits struct {
	QuotaCPU, QuotaMemory, QuotaPods, QuotaStorage string // hard limits of the namespace
	DefaultCPU, DefaultMemory                      string // a container's limits when it sets none
	DefaultRequestCPU, DefaultRequestMemory        string // a container's requests when it sets none
}

// DefaultLimits fit a developer's environment on a small cluster.
var DefaultLimits = Limits{
	QuotaCPU: "8", QuotaMemory: "16Gi", QuotaPods: "50", QuotaStorage: "50Gi",
	DefaultCPU: "1", DefaultMemory: "1Gi", DefaultRequestCPU: "50m", DefaultRequestMemory: "64Mi",
}

// Store reads and writes the platform's state.
type Store struct {
	Namespace string
	Limits    Limits
	Kube      kubernetes.Interface
	Dyn       dynamic.Interface
	// Config is the platform's own rest.Config; impersonating clients are made from it.
	Config *rest.Config
	// Impersonate returns a client acting as the given Kubernetes user (nil: from Config).
	Impersonate func(username string) (kubernetes.Interface, error)
	Now         func() time.Time

	users, tokens cache.GenericLister
	namespaces    corelisters.NamespaceLister
	bindings      rbaclisters.RoleBindingLister
	synced        []cache.InformerSynced
	sign          signing
}

// New makes a Store; call Start before reads.
func New(cfg *rest.Config, namespace string) (*Store, error) {
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &Store{Namespace: namespace, Limits: DefaultLimits, Kube: kc, Dyn: dc, Config: cfg}, nil
}

func (s *Store) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// Start runs the informers until ctx ends and waits until they have synced.
func (s *Store) Start(ctx context.Context) error {
	dyn := dynamicinformer.NewFilteredDynamicSharedInformerFactory(s.Dyn, 0, s.Namespace, nil)
	ui := dyn.ForResource(UserResource)
	ti := dyn.ForResource(TokenResource)
	s.users, s.tokens = ui.Lister(), ti.Lister()
	nsf := informers.NewSharedInformerFactoryWithOptions(s.Kube, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = LabelManaged + "=true" }))
	nsi := nsf.Core().V1().Namespaces()
	s.namespaces = nsi.Lister()
	rbf := informers.NewSharedInformerFactoryWithOptions(s.Kube, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = LabelMember }))
	rbi := rbf.Rbac().V1().RoleBindings()
	s.bindings = rbi.Lister()
	s.synced = []cache.InformerSynced{ui.Informer().HasSynced, ti.Informer().HasSynced, nsi.Informer().HasSynced, rbi.Informer().HasSynced}
	dyn.Start(ctx.Done())
	nsf.Start(ctx.Done())
	rbf.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), s.synced...) {
		return fmt.Errorf("the platform's caches did not sync: %w", ctx.Err())
	}
	return nil
}

// Synced says whether every informer has synced (readiness).
func (s *Store) Synced() bool {
	if len(s.synced) == 0 {
		return false
	}
	for _, f := range s.synced {
		if !f() {
			return false
		}
	}
	return true
}

func (s *Store) impersonate(user string) (kubernetes.Interface, error) {
	name := s.SAUsername(user)
	if s.Impersonate != nil {
		return s.Impersonate(name)
	}
	cfg := rest.CopyConfig(s.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: name}
	return kubernetes.NewForConfig(cfg)
}

// --- conversions between the custom resources and the Go types

func userFrom(u *unstructured.Unstructured) *User {
	spec, _, _ := unstructured.NestedMap(u.Object, "spec")
	status, _, _ := unstructured.NestedMap(u.Object, "status")
	out := &User{Name: u.GetName(), Created: u.GetCreationTimestamp().Time, ResourceVersion: u.GetResourceVersion()}
	out.Admin, _ = spec["admin"].(bool)
	out.PasswordHash, _ = spec["passwordHash"].(string)
	out.Subject, _ = spec["subject"].(string)
	switch n := status["failedLogins"].(type) {
	case int64:
		out.FailedLogins = int(n)
	case float64:
		out.FailedLogins = int(n)
	}
	if v, ok := status["lockedUntil"].(string); ok {
		out.LockedUntil, _ = time.Parse(time.RFC3339, v)
	}
	if v, ok := status["lastFailure"].(string); ok {
		out.LastFailure, _ = time.Parse(time.RFC3339, v)
	}
	return out
}

func (s *Store) userObject(u *User) *unstructured.Unstructured {
	spec := map[string]any{"admin": u.Admin}
	if u.PasswordHash != "" {
		spec["passwordHash"] = u.PasswordHash
	}
	if u.Subject != "" {
		spec["subject"] = u.Subject
	}
	obj := map[string]any{
		"apiVersion": Group + "/" + Version, "kind": "User",
		"metadata": map[string]any{"name": u.Name, "namespace": s.Namespace},
		"spec":     spec,
	}
	status := map[string]any{}
	if u.FailedLogins > 0 {
		status["failedLogins"] = int64(u.FailedLogins)
	}
	if !u.LockedUntil.IsZero() {
		status["lockedUntil"] = u.LockedUntil.UTC().Format(time.RFC3339)
	}
	if !u.LastFailure.IsZero() {
		status["lastFailure"] = u.LastFailure.UTC().Format(time.RFC3339)
	}
	if len(status) > 0 {
		obj["status"] = status
	}
	out := &unstructured.Unstructured{Object: obj}
	if u.ResourceVersion != "" {
		out.SetResourceVersion(u.ResourceVersion)
	}
	return out
}

func tokenFrom(u *unstructured.Unstructured) *AccessToken {
	spec, _, _ := unstructured.NestedMap(u.Object, "spec")
	status, _, _ := unstructured.NestedMap(u.Object, "status")
	t := &AccessToken{ID: u.GetName(), Created: u.GetCreationTimestamp().Time, ResourceVersion: u.GetResourceVersion()}
	t.Name, _ = spec["name"].(string)
	t.Owner, _ = spec["owner"].(string)
	t.Hash, _ = spec["hash"].(string)
	if v, ok := spec["expires"].(string); ok {
		t.Expires, _ = time.Parse(time.RFC3339, v)
	}
	if v, ok := status["lastUsed"].(string); ok {
		t.LastUsed, _ = time.Parse(time.RFC3339, v)
	}
	return t
}

func (s *Store) tokenObject(t *AccessToken) *unstructured.Unstructured {
	obj := map[string]any{
		"apiVersion": Group + "/" + Version, "kind": "AccessToken",
		"metadata": map[string]any{"name": t.ID, "namespace": s.Namespace, "labels": map[string]any{LabelOwner: t.Owner}},
		"spec": map[string]any{
			"name": t.Name, "owner": t.Owner, "hash": t.Hash,
			"expires": t.Expires.UTC().Format(time.RFC3339),
		},
	}
	if !t.LastUsed.IsZero() {
		obj["status"] = map[string]any{"lastUsed": t.LastUsed.UTC().Format(time.RFC3339)}
	}
	out := &unstructured.Unstructured{Object: obj}
	if t.ResourceVersion != "" {
		out.SetResourceVersion(t.ResourceVersion)
	}
	return out
}

// --- users

// GetUser reads a user from the cache.
func (s *Store) GetUser(name string) (*User, error) {
	o, err := s.users.ByNamespace(s.Namespace).Get(name)
	if apierrors.IsNotFound(err) {
		return nil, notFound("user %q", name)
	} else if err != nil {
		return nil, err
	}
	return userFrom(o.(*unstructured.Unstructured)), nil
}

// GetUserNow is GetUser that asks the API server when the cache has not seen the user: a user made
// a moment ago (on this replica or another) may sign in or use its first token before the
// informer's event arrives. A removed user is not let back in by a stale cache: its tokens and
// sessions are deleted before its User object, and both are read live.
func (s *Store) GetUserNow(ctx context.Context, name string) (*User, error) {
	u, err := s.GetUser(name)
	if errors.Is(err, ErrNotFound) {
		return s.getUserLive(ctx, name)
	}
	return u, err
}

// Users lists every user, by name.
func (s *Store) Users() ([]*User, error) {
	objs, err := s.users.ByNamespace(s.Namespace).List(labels.Everything())
	if err != nil {
		return nil, err
	}
	out := make([]*User, 0, len(objs))
	for _, o := range objs {
		out = append(out, userFrom(o.(*unstructured.Unstructured)))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// UpdateUser writes u back, guarded by its ResourceVersion (ErrConflict when it changed meanwhile).
func (s *Store) UpdateUser(ctx context.Context, u *User) (*User, error) {
	o, err := s.Dyn.Resource(UserResource).Namespace(s.Namespace).Update(ctx, s.userObject(u), metav1.UpdateOptions{})
	if err != nil {
		return nil, fromAPI(err, "user "+u.Name)
	}
	return userFrom(o), nil
}

// --- membership (read from the caches)

// Membership is a user's role in a namespace.
type Membership struct {
	Namespace, User, Role string
}

// bindingMembership reads a membership RoleBinding; one that binds another platform's
// ServiceAccount (a second install on the same cluster, whose users' names may be the same) is none.
func (s *Store) bindingMembership(rb *rbacv1.RoleBinding) (Membership, bool) {
	user, role := rb.Labels[LabelMember], rb.Labels[LabelRole]
	if user == "" || rb.Name != BindingPrefix+user || rb.RoleRef.Kind != "ClusterRole" || rb.RoleRef.Name != RolePrefix+role {
		return Membership{}, false
	}
	if len(rb.Subjects) != 1 || rb.Subjects[0].Kind != rbacv1.ServiceAccountKind || rb.Subjects[0].Namespace != s.Namespace || rb.Subjects[0].Name != SAName(user) {
		return Membership{}, false
	}
	return Membership{Namespace: rb.Namespace, User: user, Role: role}, true
}

// MembershipsOf lists the namespaces user is a member of.
func (s *Store) MembershipsOf(user string) ([]Membership, error) {
	sel := labels.SelectorFromSet(labels.Set{LabelMember: user})
	rbs, err := s.bindings.List(sel)
	if err != nil {
		return nil, err
	}
	var out []Membership
	for _, rb := range rbs {
		if m, ok := s.bindingMembership(rb); ok {
			out = append(out, m)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Namespace < out[j].Namespace })
	return out, nil
}

// Members lists the members of a namespace.
func (s *Store) Members(namespace string) ([]Membership, error) {
	rbs, err := s.bindings.RoleBindings(namespace).List(labels.Everything())
	if err != nil {
		return nil, err
	}
	var out []Membership
	for _, rb := range rbs {
		if m, ok := s.bindingMembership(rb); ok {
			out = append(out, m)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].User < out[j].User })
	return out, nil
}

// RoleIn is user's role in namespace ("" when not a member), from the cache.
func (s *Store) RoleIn(user, namespace string) string {
	rb, err := s.bindings.RoleBindings(namespace).Get(BindingPrefix + user)
	if err != nil {
		return ""
	}
	m, ok := s.bindingMembership(rb)
	if !ok {
		return ""
	}
	return m.Role
}

// ManagedNamespace reads a namespace the platform made from the cache (nil when it is not one).
func (s *Store) ManagedNamespace(name string) *corev1.Namespace {
	ns, err := s.namespaces.Get(name)
	if err != nil {
		return nil
	}
	return ns
}

package store

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devtool/devtool/internal/platform/api"
)

// ValidRole says whether role is one a member may hold.
func ValidRole(role string) bool {
	return role == api.RoleOwner || role == api.RoleEditor || role == api.RoleViewer
}

func (s *Store) binding(namespace, user, role string) *rbacv1.RoleBinding {
	return &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: BindingPrefix + user, Namespace: namespace,
			Labels: map[string]string{LabelMember: user, LabelRole: role}},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: RolePrefix + role},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: SAName(user), Namespace: s.Namespace}},
	}
}

// CreateNamespace makes namespace name owned by user; created is false when user already owned it
// (idempotent). A namespace that exists and that user does not own is ErrConflict.
func (s *Store) CreateNamespace(ctx context.Context, user, name string) (created bool, err error) {
	if why := ValidNamespaceName(name); why != "" {
		return false, &InputError{Field: "name", Reason: why}
	}
	return s.ensureNamespace(ctx, name, user, false)
}

// ensureNamespace creates the namespace with its quota, limits and owner binding, or finds it made
// for owner before. The namespace itself is created with the platform's rights (no user may create
// namespaces); everything in it is made only when the platform created it or owner owns it.
func (s *Store) ensureNamespace(ctx context.Context, name, owner string, personal bool) (bool, error) {
	lbl := map[string]string{LabelManaged: "true"}
	if personal {
		lbl[LabelPersonal] = owner
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbl,
		Annotations: map[string]string{AnnotationPlatform: s.Namespace, AnnotationCreatedBy: owner}}}
	created := true
	got, err := s.Kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		created = false
		got, err = s.Kube.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		switch {
		case got.Labels[LabelManaged] != "true":
			return false, conflict("namespace %q exists and is not one of the platform's", name)
		case got.DeletionTimestamp != nil:
			return false, conflict("namespace %q is being deleted", name)
		case personal && got.Labels[LabelPersonal] == owner:
			// the personal namespace of a user made again: adopt it
		case got.Annotations[AnnotationCreatedBy] == owner && !s.hasOwner(ctx, name):
			// this user's own create repeated, or one cut off before its binding (no owner at all
			// yet): finish it. A namespace that has an owner is never taken back this way.
		default:
			rb, err := s.Kube.RbacV1().RoleBindings(name).Get(ctx, BindingPrefix+owner, metav1.GetOptions{})
			if err != nil || rb.RoleRef.Name != RolePrefix+api.RoleOwner {
				return false, conflict("namespace %q exists and you do not own it", name)
			}
		}
	} else if err != nil {
		return false, fmt.Errorf("creating namespace %s: %w", name, err)
	}
	if err := s.ensureDefaults(ctx, name); err != nil {
		return created, err
	}
	rb := s.binding(name, owner, api.RoleOwner)
	if _, err := s.Kube.RbacV1().RoleBindings(name).Create(ctx, rb, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return created, fmt.Errorf("binding %s as owner of %s: %w", owner, name, err)
	}
	return created, nil
}

func (s *Store) ensureDefaults(ctx context.Context, ns string) error {
	l, err := s.EffectiveLimits(ctx)
	if err != nil {
		return err
	}
	q := func(v string) resource.Quantity { return resource.MustParse(v) }
	quota := &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: QuotaName, Namespace: ns, Labels: map[string]string{LabelManaged: "true"}},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{
			corev1.ResourceLimitsCPU: q(l.QuotaCPU), corev1.ResourceLimitsMemory: q(l.QuotaMemory),
			corev1.ResourcePods: q(l.QuotaPods), corev1.ResourceRequestsStorage: q(l.QuotaStorage),
		}},
	}
	if _, err := s.Kube.CoreV1().ResourceQuotas(ns).Create(ctx, quota, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the ResourceQuota of %s: %w", ns, err)
	}
	limits := &corev1.LimitRange{
		ObjectMeta: metav1.ObjectMeta{Name: LimitsName, Namespace: ns, Labels: map[string]string{LabelManaged: "true"}},
		Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{
			Type:           corev1.LimitTypeContainer,
			Default:        corev1.ResourceList{corev1.ResourceCPU: q(l.DefaultCPU), corev1.ResourceMemory: q(l.DefaultMemory)},
			DefaultRequest: corev1.ResourceList{corev1.ResourceCPU: q(l.DefaultRequestCPU), corev1.ResourceMemory: q(l.DefaultRequestMemory)},
		}}},
	}
	if _, err := s.Kube.CoreV1().LimitRanges(ns).Create(ctx, limits, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the LimitRange of %s: %w", ns, err)
	}
	return nil
}

// visibleRole is the caller's role in namespace, or ErrNotFound when the caller is not a member (a
// non-member never learns whether the namespace exists).
func (s *Store) visibleRole(user, namespace string) (string, error) {
	if role := s.RoleIn(user, namespace); role != "" {
		return role, nil
	}
	return "", notFound("namespace %q", namespace)
}

// DeleteNamespace deletes namespace name, which user must own. Ownership is read from the API server
// (not the cache) right before the platform deletes it: no user may delete namespaces.
func (s *Store) DeleteNamespace(ctx context.Context, user, name string) error {
	role, err := s.visibleRole(user, name)
	if err != nil {
		return err
	}
	if role != api.RoleOwner {
		return forbidden("only an owner of namespace %q may delete it", name)
	}
	rb, err := s.Kube.RbacV1().RoleBindings(name).Get(ctx, BindingPrefix+user, metav1.GetOptions{})
	if m, ok := s.bindingMembership(rbOrNil(rb, err)); !ok || m.Role != api.RoleOwner {
		return forbidden("only an owner of namespace %q may delete it", name)
	}
	ns, err := s.Kube.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return notFound("namespace %q", name)
	} else if err != nil {
		return err
	}
	if ns.Labels[LabelManaged] != "true" {
		return notFound("namespace %q", name)
	}
	uid := ns.UID
	err = s.Kube.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if apierrors.IsNotFound(err) {
		return notFound("namespace %q", name)
	}
	return err
}

func rbOrNil(rb *rbacv1.RoleBinding, err error) *rbacv1.RoleBinding {
	if err != nil || rb == nil {
		return &rbacv1.RoleBinding{}
	}
	return rb
}

// Share gives target the role in namespace, on behalf of caller: the RoleBinding is written
// impersonating caller's ServiceAccount, so the API server refuses it unless caller owns the
// namespace (the owner ClusterRole may write RoleBindings and bind the platform's roles).
func (s *Store) Share(ctx context.Context, caller, namespace, target, role string) error {
	if !ValidRole(role) {
		return &InputError{Field: "role", Reason: "one of owner, editor, viewer"}
	}
	have, err := s.visibleRole(caller, namespace)
	if err != nil {
		return err
	}
	if have != api.RoleOwner {
		return forbidden("only an owner of namespace %q may share it", namespace)
	}
	if _, err := s.GetUserNow(ctx, target); err != nil {
		return err
	}
	if role != api.RoleOwner && s.RoleIn(target, namespace) == api.RoleOwner && s.ownerCount(namespace) == 1 {
		return conflict("%s is the only owner of namespace %q", target, namespace)
	}
	kc, err := s.impersonate(caller)
	if err != nil {
		return err
	}
	rbs := kc.RbacV1().RoleBindings(namespace)
	cur, err := rbs.Get(ctx, BindingPrefix+target, metav1.GetOptions{})
	switch {
	case err == nil:
		if m, ok := s.bindingMembership(cur); ok && m.Role == role {
			return nil
		}
		uid := cur.UID
		if err := rbs.Delete(ctx, cur.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}); err != nil && !apierrors.IsNotFound(err) {
			return fromAPI(err, "changing the role of "+target)
		}
	case !apierrors.IsNotFound(err):
		return fromAPI(err, "reading the membership of "+target)
	}
	_, err = rbs.Create(ctx, s.binding(namespace, target, role), metav1.CreateOptions{})
	return fromAPI(err, "sharing namespace "+namespace+" with "+target)
}

// Unshare removes target's membership of namespace, on behalf of caller (impersonated, as Share).
func (s *Store) Unshare(ctx context.Context, caller, namespace, target string) error {
	have, err := s.visibleRole(caller, namespace)
	if err != nil {
		return err
	}
	if have != api.RoleOwner {
		return forbidden("only an owner of namespace %q may change its members", namespace)
	}
	cur := s.RoleIn(target, namespace)
	if cur == "" {
		return notFound("user %q is not a member of namespace %q", target, namespace)
	}
	if cur == api.RoleOwner && s.ownerCount(namespace) == 1 {
		return conflict("%s is the only owner of namespace %q", target, namespace)
	}
	kc, err := s.impersonate(caller)
	if err != nil {
		return err
	}
	err = kc.RbacV1().RoleBindings(namespace).Delete(ctx, BindingPrefix+target, metav1.DeleteOptions{})
	return fromAPI(err, "removing "+target+" from namespace "+namespace)
}

func (s *Store) ownerCount(namespace string) int {
	ms, _ := s.Members(namespace)
	n := 0
	for _, m := range ms {
		if m.Role == api.RoleOwner {
			n++
		}
	}
	return n
}

// hasOwner reports whether any RoleBinding in ns grants the owner role (an error counts as yes:
// the caller then refuses). Not ownerCount: that reads the informer's cache and swallows errors, and
// a binding made a moment ago by the first of two creates must be seen, failing closed.
func (s *Store) hasOwner(ctx context.Context, ns string) bool {
	rbs, err := s.Kube.RbacV1().RoleBindings(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return true
	}
	for _, rb := range rbs.Items {
		if rb.RoleRef.Name == RolePrefix+api.RoleOwner {
			return true
		}
	}
	return false
}

package store

import (
	"context"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/devtool/devtool/internal/labels"
	"github.com/devtool/devtool/internal/platform/api"
)

// Previews' namespaces and secrets.
const (
	LabelPreview = "devtool.dev/preview" // on a preview's namespace: the preview
	// PreviewViewers binds every user to a global preview's namespace as viewer: the group of the
	// ServiceAccounts in the platform's namespace (each user's u-<name>).
	PreviewViewers = "devtool-preview-viewers"
	// PreviewSecretName holds the preview-scoped stored secrets (admins write them) in the platform's
	// namespace: previews read these and their own namespace's, never a user's or the admin-wide ones.
	PreviewSecretName = "devtool-preview-secrets"
)

// EnsurePreviewNamespace creates the namespace of preview name (the platform owns it: labelled
// managed and preview=<name>), with quota, limits, and owner as its owner; a global preview's gives
// every user the viewer role. Its endpoints are private unless public (the ingress reads the
// namespace's annotation). A namespace of that name that is not this preview's is ErrConflict.
func (s *Store) EnsurePreviewNamespace(ctx context.Context, name, owner string, global, public bool) error {
	if why := ValidNamespaceName(name); why != "" {
		return &InputError{Field: "name", Reason: why}
	}
	private := strconv.FormatBool(!public)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{LabelManaged: "true", LabelPreview: name},
		Annotations: map[string]string{labels.Private: private}}}
	if _, err := s.Kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
		got, err := s.Kube.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		switch {
		case got.Labels[LabelPreview] != name:
			return conflict("a namespace named %q exists: a preview's namespace takes the preview's name", name)
		case got.DeletionTimestamp != nil:
			return conflict("the namespace of preview %q is still being deleted: try again in a moment", name)
		case got.Annotations[labels.Private] != private:
			patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, labels.Private, private)
			if _, err := s.Kube.CoreV1().Namespaces().Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
				return fmt.Errorf("making the endpoints of preview %s %s: %w", name, map[bool]string{true: "public", false: "private"}[public], err)
			}
		}
	} else if err != nil {
		return fmt.Errorf("creating namespace %s: %w", name, err)
	}
	if err := s.ensureDefaults(ctx, name); err != nil {
		return err
	}
	if _, err := s.Kube.RbacV1().RoleBindings(name).Create(ctx, s.binding(name, owner, api.RoleOwner), metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("binding %s as owner of %s: %w", owner, name, err)
	}
	if global {
		rb := &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: PreviewViewers, Namespace: name, Labels: map[string]string{LabelManaged: "true"}},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: RolePrefix + api.RoleViewer},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "system:serviceaccounts:" + s.Namespace}},
		}
		if _, err := s.Kube.RbacV1().RoleBindings(name).Create(ctx, rb, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("giving every user the viewer role in %s: %w", name, err)
		}
	}
	return nil
}

// DeletePreviewNamespace deletes the namespace of preview name (only a namespace labelled as that
// preview's); gone already is not an error.
func (s *Store) DeletePreviewNamespace(ctx context.Context, name string) error {
	ns, err := s.Kube.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		return err
	}
	if ns.Labels[LabelPreview] != name {
		return conflict("namespace %q is not preview %q's", name, name)
	}
	uid := ns.UID
	err = s.Kube.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// ResolvePreviewSecrets are the stored secrets a preview's run sees: the preview-scoped ones, then
// its namespace's (read as the preview's creator, its owner, whose binding may be too new for the
// caches), never a user's or the admin-wide ones.
func (s *Store) ResolvePreviewSecrets(ctx context.Context, creator *User, namespace string) (map[string]string, error) {
	out := map[string]string{}
	pv, err := s.readScope(ctx, creator, SecretScope{Scope: api.ScopePreview})
	if err != nil {
		return nil, err
	}
	for k, v := range pv {
		out[k] = string(v)
	}
	kc, err := s.impersonate(creator.Name)
	if err != nil {
		return nil, err
	}
	sec, err := kc.CoreV1().Secrets(namespace).Get(ctx, NamespaceSecret, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err), apierrors.IsForbidden(err):
		return out, nil
	case err != nil:
		return nil, fmt.Errorf("reading the secrets of namespace %s: %w", namespace, err)
	}
	for k, v := range sec.Data {
		out[k] = string(v)
	}
	return out, nil
}

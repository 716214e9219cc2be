package store

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// LiveRoleIn is RoleIn read from the API server instead of the cache: for a namespace the caches
// may not show yet (made a moment ago on this or another replica). "" when user is not a member
// of a namespace the platform manages.
func (s *Store) LiveRoleIn(ctx context.Context, user, namespace string) (string, error) {
	ns, err := s.Kube.CoreV1().Namespaces().Get(ctx, namespace, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", nil
	} else if err != nil {
		return "", err
	}
	if ns.Labels[LabelManaged] != "true" {
		return "", nil
	}
	rb, err := s.Kube.RbacV1().RoleBindings(namespace).Get(ctx, BindingPrefix+user, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", nil
	} else if err != nil {
		return "", err
	}
	m, ok := s.bindingMembership(rb)
	if !ok {
		return "", nil
	}
	return m.Role, nil
}

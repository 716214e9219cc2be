package store

import (
	"context"
	"errors"
	"fmt"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// CreateUser makes a user: the User object, its ServiceAccount, its personal namespace (named after
// it, with quota, limits and the owner binding) and a first API token, returned as the only copy of
// its secret. When a step after the User object fails, what was made is removed again and the error
// says so.
func (s *Store) CreateUser(ctx context.Context, name string, admin bool, password string) (*User, string, error) {
	if why := ValidUserName(name); why != "" {
		return nil, "", &InputError{Field: "name", Reason: why}
	}
	if password != "" {
		if why := ValidPassword(password); why != "" {
			return nil, "", &InputError{Field: "password", Reason: why}
		}
	}
	// A namespace of that name that is not this user's personal one would make a personal namespace
	// impossible: refuse before anything is made.
	if ns, err := s.Kube.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{}); err == nil {
		if ns.Labels[LabelPersonal] != name {
			return nil, "", conflict("a namespace named %q exists: a user's personal namespace takes the user's name", name)
		}
		if ns.DeletionTimestamp != nil {
			return nil, "", conflict("the personal namespace %q of a removed user of that name is still being deleted: try again once it is gone", name)
		}
	} else if !apierrors.IsNotFound(err) {
		return nil, "", err
	}
	u := &User{Name: name, Admin: admin}
	if password != "" {
		h, err := HashPassword(ctx, password)
		if err != nil {
			return nil, "", err
		}
		u.PasswordHash = h
	}
	return s.createUser(ctx, u, true)
}

// createUser writes the User object and provisions the rest (with a first token when asked).
func (s *Store) createUser(ctx context.Context, u *User, firstToken bool) (*User, string, error) {
	name := u.Name
	o, err := s.Dyn.Resource(UserResource).Namespace(s.Namespace).Create(ctx, s.userObject(u), metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil, "", conflict("user %q exists", name)
	} else if err != nil {
		return nil, "", fmt.Errorf("creating user %s: %w", name, err)
	}
	u = userFrom(o)
	tok, err := s.provisionUser(ctx, name, firstToken)
	if err != nil {
		if derr := s.DeleteUser(ctx, name); derr != nil {
			return nil, "", fmt.Errorf("creating user %s: %w; removing what was made failed too (run DELETE /api/v1/users/%s): %v", name, err, name, derr)
		}
		return nil, "", fmt.Errorf("creating user %s (nothing of it was kept): %w", name, err)
	}
	return u, tok, nil
}

// OIDCUser returns the account of an OpenID Connect identity (subject "<issuer> <sub>") named name:
// made on first login when signUp allows (with its ServiceAccount and personal namespace, no
// token), refused when the name belongs to another identity or a built-in account. With syncAdmin,
// the account's admin flag follows admin (the provider's groups) at every login.
func (s *Store) OIDCUser(ctx context.Context, name, subject string, admin, syncAdmin, signUp bool) (*User, error) {
	u, err := s.getUserLive(ctx, name)
	if errors.Is(err, ErrNotFound) {
		if !signUp {
			return nil, forbidden("no account %q, and sign-up through the provider is off: ask an admin", name)
		}
		if ns, err := s.Kube.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{}); err == nil && ns.Labels[LabelPersonal] != name {
			return nil, conflict("a namespace named %q exists: ask an admin", name)
		}
		u, _, err = s.createUser(ctx, &User{Name: name, Admin: syncAdmin && admin, Subject: subject}, false)
		if errors.Is(err, ErrConflict) { // another replica made it just now
			return s.OIDCUser(ctx, name, subject, admin, syncAdmin, false)
		}
		return u, err
	} else if err != nil {
		return nil, err
	}
	if u.Subject != subject {
		return nil, conflict("the account %q exists and belongs to another identity", name)
	}
	if syncAdmin && u.Admin != admin {
		return s.updateUser(ctx, name, func(u *User) bool { u.Admin = admin; return true })
	}
	return u, nil
}

func (s *Store) provisionUser(ctx context.Context, name string, firstToken bool) (string, error) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: SAName(name), Namespace: s.Namespace, Labels: map[string]string{LabelUser: name}}}
	if _, err := s.Kube.CoreV1().ServiceAccounts(s.Namespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("creating its ServiceAccount: %w", err)
	}
	if _, err := s.ensureNamespace(ctx, name, name, true); err != nil {
		return "", fmt.Errorf("creating its personal namespace: %w", err)
	}
	if !firstToken {
		return "", nil
	}
	_, tok, err := s.CreateToken(ctx, name, "initial", 0)
	if err != nil {
		return "", fmt.Errorf("creating its first token: %w", err)
	}
	return tok, nil
}

// DeleteUser removes a user: its ServiceAccount first (so its Kubernetes tokens stop working at
// once), then its API tokens and web sessions, its RoleBindings in every namespace, its stored secrets, its personal
// namespace (with everything running in it; only the namespace the platform made for it, labelled
// so) and the User object, last, so a removal that failed half-way can be retried. The namespaces
// it created or was given stay, with their other members; a user made again with the same name
// starts with nothing of the removed one.
func (s *Store) DeleteUser(ctx context.Context, name string) error {
	if _, err := s.Dyn.Resource(UserResource).Namespace(s.Namespace).Get(ctx, name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		return notFound("user %q", name)
	} else if err != nil {
		return err
	}
	var errs []error
	if err := s.Kube.CoreV1().ServiceAccounts(s.Namespace).Delete(ctx, SAName(name), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("deleting its ServiceAccount: %w", err))
	}
	sel := metav1.ListOptions{LabelSelector: LabelOwner + "=" + name}
	if err := s.Dyn.Resource(TokenResource).Namespace(s.Namespace).DeleteCollection(ctx, metav1.DeleteOptions{}, sel); err != nil {
		errs = append(errs, fmt.Errorf("deleting its tokens: %w", err))
	}
	if err := s.EndSessionsOf(ctx, name); err != nil {
		errs = append(errs, fmt.Errorf("ending its web sessions: %w", err))
	}
	rbs, err := s.Kube.RbacV1().RoleBindings("").List(ctx, metav1.ListOptions{LabelSelector: LabelMember + "=" + name})
	if err != nil {
		errs = append(errs, fmt.Errorf("listing its RoleBindings: %w", err))
	} else {
		for _, rb := range rbs.Items {
			if rb.Name != BindingPrefix+name {
				continue
			}
			if err := s.Kube.RbacV1().RoleBindings(rb.Namespace).Delete(ctx, rb.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("deleting its RoleBinding in %s: %w", rb.Namespace, err))
			}
		}
	}
	if err := s.Kube.CoreV1().Secrets(s.Namespace).Delete(ctx, UserSecretPrefix+name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("deleting its stored secrets: %w", err))
	}
	if err := s.deletePersonalNamespace(ctx, name); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return fmt.Errorf("removing user %s (the User object is kept so the removal can be retried): %w", name, errors.Join(errs...))
	}
	if err := s.Dyn.Resource(UserResource).Namespace(s.Namespace).Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting user %s: %w", name, err)
	}
	return nil
}

// deletePersonalNamespace deletes the namespace named after user when the platform made it as
// user's personal one (labelled managed and personal=user; checked on the live object, deleted
// with its UID as precondition). Deletion runs in the background: the namespace goes once its pods
// have ended.
func (s *Store) deletePersonalNamespace(ctx context.Context, user string) error {
	ns, err := s.Kube.CoreV1().Namespaces().Get(ctx, user, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		return fmt.Errorf("reading its personal namespace: %w", err)
	}
	if ns.Labels[LabelManaged] != "true" || ns.Labels[LabelPersonal] != user || ns.DeletionTimestamp != nil {
		return nil
	}
	uid := ns.UID
	err = s.Kube.CoreV1().Namespaces().Delete(ctx, user, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting its personal namespace: %w", err)
	}
	return nil
}

// KubeToken is a TokenRequest for user's ServiceAccount.
func (s *Store) KubeToken(ctx context.Context, user string, seconds int64) (*authv1.TokenRequest, error) {
	if seconds == 0 {
		seconds = 3600
	}
	if seconds < 600 || seconds > 48*3600 {
		return nil, &InputError{Field: "expirationSeconds", Reason: "between 600 and 172800"}
	}
	tr := &authv1.TokenRequest{Spec: authv1.TokenRequestSpec{ExpirationSeconds: &seconds}}
	out, err := s.Kube.CoreV1().ServiceAccounts(s.Namespace).CreateToken(ctx, SAName(user), tr, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("requesting a token of ServiceAccount %s/%s: %w", s.Namespace, SAName(user), err)
	}
	return out, nil
}

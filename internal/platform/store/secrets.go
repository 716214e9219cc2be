package store

import (
	"context"
	"regexp"
	"sort"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/devtool/devtool/internal/platform/api"
)

// Stored secrets live in Kubernetes Secrets: a user's in devtool-user-<user> and the admin-wide ones
// in devtool-admin-secrets (both in the platform's namespace, which users cannot read), a
// namespace's in devtool-secrets in that namespace — read and written impersonating the caller, so
// only members whose role may read (write) Secrets there do.
const (
	UserSecretPrefix  = "devtool-user-"
	AdminSecretName   = "devtool-admin-secrets"
	NamespaceSecret   = "devtool-secrets"
	MaxSecretValueLen = 64 << 10
)

var secretName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)

// SecretScope says where a stored secret is: Scope is api.ScopeUser, ScopeNamespace (Namespace set)
// or ScopeAdmin.
type SecretScope struct {
	Scope, Namespace string
}

// secretsFor is the client and the Secret holding scope's values for caller, after checking the
// caller may address it (write: may change it).
func (s *Store) secretsFor(caller *User, sc SecretScope, write bool) (kubernetes.Interface, string, string, error) {
	switch sc.Scope {
	case "", api.ScopeUser:
		return s.Kube, s.Namespace, UserSecretPrefix + caller.Name, nil
	case api.ScopeAdmin:
		if write && !caller.Admin {
			return nil, "", "", forbidden("only an admin may change admin-wide secrets")
		}
		return s.Kube, s.Namespace, AdminSecretName, nil
	case api.ScopePreview:
		if write && !caller.Admin {
			return nil, "", "", forbidden("only an admin may change the secrets previews use")
		}
		return s.Kube, s.Namespace, PreviewSecretName, nil
	case api.ScopeNamespace:
		if sc.Namespace == "" {
			return nil, "", "", &InputError{Field: "namespace", Reason: "required for scope namespace"}
		}
		if _, err := s.visibleRole(caller.Name, sc.Namespace); err != nil {
			return nil, "", "", err
		}
		kc, err := s.impersonate(caller.Name)
		return kc, sc.Namespace, NamespaceSecret, err
	}
	return nil, "", "", &InputError{Field: "scope", Reason: "one of user, namespace, admin, preview"}
}

// SetSecret stores name=value in scope (resourceVersion-guarded, retried on conflict).
func (s *Store) SetSecret(ctx context.Context, caller *User, sc SecretScope, name, value string) error {
	if !secretName.MatchString(name) {
		return &InputError{Field: "name", Reason: "a variable name: letters, digits and '_', not starting with a digit, at most 128"}
	}
	if len(value) > MaxSecretValueLen {
		return &InputError{Field: "value", Reason: "at most 65536 bytes"}
	}
	kc, ns, obj, err := s.secretsFor(caller, sc, true)
	if err != nil {
		return err
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		sec, err := kc.CoreV1().Secrets(ns).Get(ctx, obj, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			sec = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: obj, Namespace: ns, Labels: map[string]string{LabelManaged: "true"}},
				Type: corev1.SecretTypeOpaque, Data: map[string][]byte{name: []byte(value)}}
			_, err = kc.CoreV1().Secrets(ns).Create(ctx, sec, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				return apierrors.NewConflict(corev1.Resource("secrets"), obj, err)
			}
			return fromAPI(err, "storing secret "+name)
		} else if err != nil {
			return fromAPI(err, "reading stored secrets")
		}
		if sec.Data == nil {
			sec.Data = map[string][]byte{}
		}
		sec.Data[name] = []byte(value)
		_, err = kc.CoreV1().Secrets(ns).Update(ctx, sec, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			return err
		}
		return fromAPI(err, "storing secret "+name)
	})
}

// DeleteSecret removes name from scope (ErrNotFound when it is not there).
func (s *Store) DeleteSecret(ctx context.Context, caller *User, sc SecretScope, name string) error {
	kc, ns, obj, err := s.secretsFor(caller, sc, true)
	if err != nil {
		return err
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		sec, err := kc.CoreV1().Secrets(ns).Get(ctx, obj, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return notFound("secret %q", name)
		} else if err != nil {
			return fromAPI(err, "reading stored secrets")
		}
		if _, ok := sec.Data[name]; !ok {
			return notFound("secret %q", name)
		}
		delete(sec.Data, name)
		_, err = kc.CoreV1().Secrets(ns).Update(ctx, sec, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			return err
		}
		return fromAPI(err, "deleting secret "+name)
	})
}

// readScope returns scope's values; a scope the caller may not read (a viewer's namespace) is empty.
func (s *Store) readScope(ctx context.Context, caller *User, sc SecretScope) (map[string][]byte, error) {
	kc, ns, obj, err := s.secretsFor(caller, sc, false)
	if err != nil {
		return nil, err
	}
	sec, err := kc.CoreV1().Secrets(ns).Get(ctx, obj, metav1.GetOptions{})
	if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	return sec.Data, nil
}

func scopes(namespace string) []SecretScope {
	out := []SecretScope{{Scope: api.ScopeAdmin}, {Scope: api.ScopeUser}}
	if namespace != "" {
		out = append(out, SecretScope{Scope: api.ScopeNamespace, Namespace: namespace})
	}
	return out
}

// Secrets lists the names (never the values) the caller sees: admin-wide, its own, and namespace's
// when given.
func (s *Store) Secrets(ctx context.Context, caller *User, namespace string) ([]api.SecretInfo, error) {
	var out []api.SecretInfo
	for _, sc := range scopes(namespace) {
		data, err := s.readScope(ctx, caller, sc)
		if err != nil {
			return nil, err
		}
		for k := range data {
			out = append(out, api.SecretInfo{Name: k, Scope: sc.Scope})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Name != out[j].Name {
			return out[i].Name < out[j].Name
		}
		return out[i].Scope < out[j].Scope
	})
	return out, nil
}

// ResolveSecrets merges the values the caller's commands use: namespace over user over admin.
func (s *Store) ResolveSecrets(ctx context.Context, caller *User, namespace string) (map[string]string, error) {
	out := map[string]string{}
	for _, sc := range scopes(namespace) { // later scopes win
		data, err := s.readScope(ctx, caller, sc)
		if err != nil {
			return nil, err
		}
		for k, v := range data {
			out[k] = string(v)
		}
	}
	return out, nil
}

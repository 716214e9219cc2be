package contexts

import (
	"fmt"
	"strings"
)

// UseOptions selects a context and optionally changes it.
type UseOptions struct {
	// Name is a devtool context name, a Kubernetes context name, or a platform URL.
	Name string
	// Namespace and Builder, when set, replace the context's values.
	Namespace string
	Builder   string
}

// UseResult says what Use did.
type UseResult struct {
	Context *Context
	Created bool
}

// Use makes a context current. A Kubernetes context seen for the first time becomes a devtool context
// named after it, with the kubeconfig's namespace for it ("default" when none). The kubeconfig is
// only read. A platform URL that is not already a stored context needs platform login, which this
// build does not have.
func Use(store *Store, kc *Kubeconfig, o UseOptions) (*UseResult, error) {
	if o.Name == "" {
		return nil, fmt.Errorf("no context name given")
	}
	if o.Namespace != "" {
		if err := ValidateNamespace(o.Namespace); err != nil {
			return nil, err
		}
	}
	res := &UseResult{}
	err := store.Update(func(cfg *Config) error {
		c := cfg.Contexts[o.Name]
		if c == nil {
			switch {
			case IsPlatformURL(o.Name):
				return fmt.Errorf("%s is a platform URL with no saved context: %w (log in with 'devtool context use %s --token <token>')", o.Name, ErrNoPlatformCredentials, o.Name)
			case kc == nil || !kc.HasContext(o.Name):
				if kc == nil {
					return fmt.Errorf("context %q not found", o.Name)
				}
				return kc.missingContextError(o.Name)
			}
			c = &Context{Name: o.Name, Namespace: firstNonEmpty(kc.Namespace(o.Name), "default")}
			cfg.Contexts[o.Name] = c
			res.Created = true
		}
		if o.Namespace != "" {
			c.Namespace = o.Namespace
		}
		if o.Builder != "" {
			c.Builder = o.Builder
		}
		cfg.CurrentContext = c.Name
		cp := *c
		res.Context = &cp
		return nil
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// Delete removes a context from the store (never from the kubeconfig). It reports whether it was the
// current one; if so no devtool context is current afterwards, and commands fall back to the
// kubeconfig's current context.
func Delete(store *Store, name string) (wasCurrent bool, err error) {
	err = store.Update(func(cfg *Config) error {
		if _, ok := cfg.Contexts[name]; !ok {
			if len(cfg.Contexts) == 0 {
				return fmt.Errorf("no devtool context %q: there are no devtool contexts", name)
			}
			return fmt.Errorf("no devtool context %q; the contexts are: %s", name, strings.Join(cfg.Names(), ", "))
		}
		delete(cfg.Contexts, name)
		if cfg.CurrentContext == name {
			cfg.CurrentContext = ""
			wasCurrent = true
		}
		return nil
	})
	return wasCurrent, err
}

// SetNamespace makes ns the namespace of the context name (a Selection's Name). A name that is not a
// devtool context yet (the selection came from the kubeconfig alone) becomes one, for the Kubernetes
// context of that name (the kubeconfig is never written); it becomes current when no devtool context was.
func SetNamespace(store *Store, name, ns string) error {
	if err := ValidateNamespace(ns); err != nil {
		return err
	}
	return store.Update(func(cfg *Config) error {
		c := cfg.Contexts[name]
		if c == nil {
			c = &Context{Name: name}
			cfg.Contexts[name] = c
		}
		c.Namespace = ns
		if cfg.CurrentContext == "" {
			cfg.CurrentContext = name
		}
		return nil
	})
}

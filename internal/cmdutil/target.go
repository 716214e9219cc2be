package cmdutil

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/devtool/devtool/internal/contexts"
	"github.com/devtool/devtool/internal/secretmask"
)

// KubeFlags is the --context/--namespace flag group of every command that touches the cluster.
type KubeFlags struct {
	Context   string
	Namespace string
}

// AddFlags registers --context and --namespace (-n) on cmd.
func (k *KubeFlags) AddFlags(cmd *cobra.Command) {
	cmd.Flags().StringVarP(&k.Namespace, "namespace", "n", "", "namespace to use (default: the current context's namespace)")
	cmd.Flags().StringVarP(&k.Context, "context", "c", "", "context to use (default: the current context)")
}

// Flags converts the group for the context resolver.
func (k KubeFlags) Flags() contexts.Flags {
	return contexts.Flags{Context: k.Context, Namespace: k.Namespace}
}

// Target is where a command runs (see contexts.Target).
type Target = contexts.Target

// TargetFunc adapts a context resolver to Factory.Target.
func TargetFunc(r *contexts.Resolver) func(KubeFlags) (*Target, error) {
	return func(k KubeFlags) (*Target, error) { return r.Resolve(k.Flags()) }
}

// StoredSecretsFunc adapts a context resolver to Factory.StoredSecrets: every value is added to mask
// (the set the process's stdout and stderr writers mask) before it is returned, so none can be
// printed, logged or shown in an error.
func StoredSecretsFunc(r *contexts.Resolver, mask *secretmask.Set) func(context.Context, KubeFlags) (map[string]string, error) {
	return func(ctx context.Context, k KubeFlags) (map[string]string, error) {
		vals, err := r.StoredSecrets(ctx, k.Flags())
		for _, v := range vals {
			mask.Add(v)
		}
		return vals, err
	}
}

// LoadStoredSecrets calls get (a Factory.StoredSecrets; nil: none).
func LoadStoredSecrets(ctx context.Context, get func(context.Context, KubeFlags) (map[string]string, error), k KubeFlags) (map[string]string, error) {
	if get == nil {
		return nil, nil
	}
	return get(ctx, k)
}

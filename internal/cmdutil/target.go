package cmdutil

import (
	"github.com/spf13/cobra"

	"github.com/devtool/devtool/internal/contexts"
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

// Package contexts stores devtool contexts (~/.devtool/context/config.json) and resolves where a
// command runs: flags first, then the current devtool context, then the kubeconfig.
package contexts

import (
	"github.com/devtool/devtool/internal/cmdutil"
	"github.com/devtool/devtool/internal/kube"
)

// Resolver builds the Target of a command from its flags and the environment.
type Resolver struct {
	Getenv func(string) string
}

// Resolve applies the precedence: flag, then current devtool context, then kubeconfig.
// (The devtool context store is not consulted yet: only flags and the kubeconfig.)
func (r *Resolver) Resolve(flags cmdutil.KubeFlags) (*cmdutil.Target, error) {
	c, err := kube.Load(kube.LoadOptions{Context: flags.Context, Namespace: flags.Namespace})
	if err != nil {
		return nil, err
	}
	return &cmdutil.Target{
		Kube:          c,
		Namespace:     c.Namespace,
		ContextName:   c.Context,
		Registry:      r.Getenv("DEVTOOL_REGISTRY"),
		ClusterDomain: r.Getenv("DEVTOOL_CLUSTER_DOMAIN"),
	}, nil
}

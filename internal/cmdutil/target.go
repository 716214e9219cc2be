package cmdutil

import (
	"github.com/spf13/cobra"

	"github.com/devtool/devtool/internal/kube"
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

// Target is where a command runs, resolved with one precedence everywhere:
// the flags, then the current devtool context, then the kubeconfig's current context and namespace.
type Target struct {
	Kube          *kube.Client
	Namespace     string // resolved namespace (also Kube.Namespace)
	ContextName   string // devtool context name, or the kubeconfig context name
	KubeContext   string // the kubeconfig context holding the credentials
	Registry      string // image registry host[:port], "" when none
	Builder       string // build service address, "docker", or ""
	ClusterDomain string // public domain for endpoints, "" when unknown
	IsPlatform    bool   // the context points to a devtool platform
	Token         string // platform API token; never printed
}

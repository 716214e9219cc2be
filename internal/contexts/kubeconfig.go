package contexts

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/devtool/devtool/internal/kube"
)

// Kubeconfig is the user's merged kubeconfig, read only: devtool never rewrites it.
type Kubeconfig struct {
	// Paths are the files it was merged from, in precedence order.
	Paths  []string
	Config *clientcmdapi.Config
}

// KubeconfigPaths is the KUBECONFIG list when set, else ~/.kube/config: the files kubectl merges,
// the first being the one it writes.
func KubeconfigPaths(getenv func(string) string) []string { return kubeconfigPaths(getenv) }

// kubeconfigPaths is the KUBECONFIG list when set, else ~/.kube/config.
func kubeconfigPaths(getenv func(string) string) []string {
	var paths []string
	if getenv != nil {
		for _, p := range filepath.SplitList(getenv("KUBECONFIG")) {
			if p != "" {
				paths = append(paths, p)
			}
		}
	}
	if len(paths) == 0 {
		paths = []string{clientcmd.RecommendedHomeFile}
	}
	return paths
}

// LoadKubeconfig reads and merges the kubeconfig files named by KUBECONFIG (several, separated
// like PATH), or ~/.kube/config. Missing files are skipped, as kubectl does.
func LoadKubeconfig(getenv func(string) string) (*Kubeconfig, error) {
	paths := kubeconfigPaths(getenv)
	if err := kube.CheckKubeconfigFiles(paths); err != nil {
		return nil, err
	}
	rules := &clientcmd.ClientConfigLoadingRules{Precedence: paths} // no MigrationRules: never write
	cfg, err := rules.Load()
	if err != nil {
		return nil, fmt.Errorf("reading kubeconfig (%s): %w", strings.Join(paths, string(filepath.ListSeparator)), err)
	}
	return &Kubeconfig{Paths: paths, Config: cfg}, nil
}

// Describe names the files, for messages.
func (k *Kubeconfig) Describe() string {
	return strings.Join(k.Paths, string(filepath.ListSeparator))
}

// ContextNames returns the kubeconfig's context names, sorted.
func (k *Kubeconfig) ContextNames() []string {
	names := make([]string, 0, len(k.Config.Contexts))
	for n := range k.Config.Contexts {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// HasContext reports whether the kubeconfig defines the context name.
func (k *Kubeconfig) HasContext(name string) bool {
	_, ok := k.Config.Contexts[name]
	return ok
}

// Namespace is the namespace the kubeconfig gives the context, or "".
func (k *Kubeconfig) Namespace(context string) string {
	if c, ok := k.Config.Contexts[context]; ok && c != nil {
		return c.Namespace
	}
	return ""
}

// missingContextError says a context is not in the kubeconfig and lists what is.
func (k *Kubeconfig) missingContextError(name string) error {
	names := k.ContextNames()
	if len(names) == 0 {
		return fmt.Errorf("Kubernetes context %q not found: the kubeconfig (%s) has no contexts", name, k.Describe())
	}
	return fmt.Errorf("Kubernetes context %q not found in the kubeconfig (%s); it has: %s",
		name, k.Describe(), strings.Join(names, ", "))
}

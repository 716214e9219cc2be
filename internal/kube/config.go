// Package kube is the narrow client layer over client-go: loading credentials, waiting by watch,
// exec, port-forward and logs. It never prints and never exits; callers decide what to show.
package kube

import (
	"fmt"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/devtool/devtool/internal/labels"
)

// Client bundles what the commands need to talk to one cluster as one user in one namespace.
type Client struct {
	Config    *rest.Config
	Clientset kubernetes.Interface
	Namespace string // the namespace to use when the caller gives none
	Context   string // the kubeconfig context in use

	objects *Objects // dynamic layer, created on first use
}

// LoadOptions selects a kubeconfig and, optionally, a context and namespace within it.
type LoadOptions struct {
	// Kubeconfig is an explicit kubeconfig path list (like KUBECONFIG); empty uses the default rules
	// (the KUBECONFIG variable, else ~/.kube/config).
	Kubeconfig string
	Context    string
	Namespace  string
	// CredentialPluginTimeout bounds the kubeconfig user's credential plugin (see
	// BoundCredentialPlugin): 0 means DefaultCredentialPluginTimeout, negative no deadline.
	CredentialPluginTimeout time.Duration
}

// Load builds a Client. The kubeconfig file is only read, never rewritten.
func Load(o LoadOptions) (*Client, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if o.Kubeconfig != "" {
		rules.ExplicitPath = ""
		rules.Precedence = splitPathList(o.Kubeconfig)
	}
	if err := CheckKubeconfigFiles(rules.GetLoadingPrecedence()); err != nil {
		return nil, err
	}
	overrides := &clientcmd.ConfigOverrides{CurrentContext: o.Context}
	if o.Namespace != "" {
		overrides.Context.Namespace = o.Namespace
	}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides)
	raw, err := cc.RawConfig()
	if err != nil {
		return nil, fmt.Errorf("reading kubeconfig: %w", err)
	}
	ctxName := o.Context
	if ctxName == "" {
		ctxName = raw.CurrentContext
	}
	if err := CheckReferencedFiles(&raw, ctxName); err != nil {
		return nil, err
	}
	cfg, err := cc.ClientConfig()
	if err != nil {
		if clientcmd.IsEmptyConfig(err) {
			return nil, fmt.Errorf("no Kubernetes cluster configured: set KUBECONFIG or create ~/.kube/config (for a local cluster run 'make cluster-up')")
		}
		return nil, fmt.Errorf("loading kubeconfig: %w", err)
	}
	ns, _, err := cc.Namespace()
	if err != nil {
		return nil, fmt.Errorf("reading the namespace from kubeconfig: %w", err)
	}
	if err := InlineCAFile(cfg, ctxName); err != nil {
		return nil, err
	}
	timeout := o.CredentialPluginTimeout
	if timeout == 0 {
		timeout = DefaultCredentialPluginTimeout
	}
	user := ""
	if c := raw.Contexts[ctxName]; c != nil {
		user = c.AuthInfo
	}
	if err := BoundCredentialPlugin(cfg, user, timeout); err != nil {
		return nil, err
	}
	return NewClient(cfg, ns, ctxName)
}

// NewClient wraps an existing rest.Config.
func NewClient(cfg *rest.Config, namespace, contextName string) (*Client, error) {
	cfg = rest.CopyConfig(cfg)
	if cfg.UserAgent == "" {
		cfg.UserAgent = labels.ClientUserAgent
	}
	// The defaults (QPS 5) make a deploy of a few dozen objects crawl; the API server's priority
	// and fairness protects it from us.
	if cfg.QPS == 0 {
		cfg.QPS, cfg.Burst = 50, 100
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating Kubernetes client: %w", err)
	}
	if namespace == "" {
		namespace = "default"
	}
	return &Client{Config: cfg, Clientset: cs, Namespace: namespace, Context: contextName}, nil
}

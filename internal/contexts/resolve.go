package contexts

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/devtool/devtool/internal/build"
	"github.com/devtool/devtool/internal/buildinfo"
	"github.com/devtool/devtool/internal/errs"
	"github.com/devtool/devtool/internal/kube"
	"github.com/devtool/devtool/internal/platform/api"
	"github.com/devtool/devtool/internal/platform/client"
)

// Resolver builds the Target of a command from its flags, the devtool context store and the
// kubeconfig, with one precedence everywhere:
//
//  1. the --context and --namespace flags;
//  2. the current devtool context (its Kubernetes context, namespace, builder, registry, domain);
//  3. the kubeconfig's current context and that context's namespace ("default" when it has none).
//
// Registry, Builder, ClusterDomain, IngressClass and EndpointPort come from the devtool context (a
// platform's from its /api/v1/info), else from DEVTOOL_REGISTRY, DEVTOOL_BUILDER,
// DEVTOOL_CLUSTER_DOMAIN, DEVTOOL_INGRESS_CLASS and DEVTOOL_ENDPOINT_PORT. (BUILDKIT_HOST is the
// build package's business.)
type Resolver struct {
	// Getenv reads the environment (DEVTOOL_HOME, KUBECONFIG, DEVTOOL_*); tests pass a map.
	Getenv func(string) string
	// Home is the folder holding .devtool; empty means DEVTOOL_HOME, else the user's home.
	Home string
}

// Flags are the --context and --namespace values a command was given ("" when not given).
type Flags struct {
	Context   string
	Namespace string
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
	IngressClass  string // ingressClassName of the endpoints' Ingresses, "" for the cluster's default
	EndpointPort  int    // HTTPS port endpoints answer on, 0 for 443
	IsPlatform    bool   // the context points to a devtool platform
	Token         string // platform API token; never printed
	// Platform is the platform context in use (IsPlatform), for commands that call its API.
	Platform *Context
	// Hosted is the platform's build service (nil when the context is not a platform, the platform
	// has none, or the context's builder is set to another one). BUILDKIT_HOST still wins (build.Select).
	Hosted *build.HostedService
	// RegistryAuth authenticates to the platform's registry (nil without one): commands pass it on
	// with build.WithRegistryAuth.
	RegistryAuth *build.RegistryAuth
}

// Selection is which contexts and namespace a command uses, decided without touching the network.
type Selection struct {
	// Context is the devtool context in use; nil when there is none (the kubeconfig decides).
	Context *Context
	// KubeContext is the kubeconfig context holding the credentials; "" for a platform context
	// that has no Kubernetes credentials yet.
	KubeContext string
	// Namespace is the resolved namespace.
	Namespace  string
	Kubeconfig *Kubeconfig
}

// Name is the context's name as the user knows it: the devtool context, else the kubeconfig context.
func (s *Selection) Name() string {
	if s.Context != nil {
		return s.Context.Name
	}
	return s.KubeContext
}

func (r *Resolver) getenv(k string) string {
	if r.Getenv == nil {
		return ""
	}
	return r.Getenv(k)
}

// Store is the devtool context store the resolver reads.
func (r *Resolver) Store() (*Store, error) {
	if r.Home != "" {
		return NewStore(r.Home), nil
	}
	return StoreFromEnv(r.Getenv)
}

// IsPlatformURL reports whether s names a platform (an http(s) URL) rather than a Kubernetes context.
func IsPlatformURL(s string) bool {
	l := strings.ToLower(s)
	return strings.HasPrefix(l, "https://") || strings.HasPrefix(l, "http://")
}

// ErrPlatformUnavailable is returned for everything that needs a platform connection.
var ErrPlatformUnavailable = fmt.Errorf("platform login is not available in this build of devtool")

// ValidateNamespace checks a namespace name is a valid Kubernetes namespace name.
func ValidateNamespace(ns string) error {
	if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
		return fmt.Errorf("%q is not a valid namespace name: %s", ns, strings.Join(errs, "; "))
	}
	return nil
}

// ErrNoCurrentContext is wrapped by the error of Select when nothing names a context: no --context,
// no current devtool context, and a kubeconfig (or none at all) without a current-context. Only
// then may a dry run render without a cluster; every other failure (a broken store, a context
// that left the kubeconfig, a bad --namespace) is an error there too.
var ErrNoCurrentContext = errors.New("no current context")

// Select applies the precedence without connecting to anything.
func (r *Resolver) Select(flags Flags) (*Selection, error) {
	if flags.Namespace != "" {
		if err := ValidateNamespace(flags.Namespace); err != nil {
			return nil, errs.FlagErrorf("--namespace: %v", err)
		}
	}
	store, err := r.Store()
	if err != nil {
		return nil, err
	}
	cfg, err := store.Load()
	if err != nil {
		return nil, err
	}
	kc, err := LoadKubeconfig(r.Getenv)
	if err != nil {
		return nil, err
	}
	sel := &Selection{Kubeconfig: kc}
	envURL := ""
	if u := r.getenv(api.EnvURL); u != "" {
		if envURL, err = client.NormalizeURL(u); err != nil {
			return nil, errs.WithHint(fmt.Errorf("%s: %w", api.EnvURL, err), "set it to the platform's address, as https://platform.example")
		}
	}
	switch {
	case flags.Context != "":
		sel.Context = cfg.Contexts[flags.Context]
		if sel.Context == nil && IsPlatformURL(flags.Context) {
			if u, err := client.NormalizeURL(flags.Context); err == nil {
				sel.Context = cfg.Contexts[u]
				if sel.Context == nil && u == envURL {
					if sel.Context, err = EnvContext(r.Getenv, cfg); err != nil {
						return nil, err
					}
				}
			}
		}
		if sel.Context == nil {
			if IsPlatformURL(flags.Context) {
				return nil, errs.WithHint(fmt.Errorf("--context %s: no devtool context for this platform", flags.Context),
					fmt.Sprintf("log in with 'devtool context use %s --token <token>', or set %s and %s", flags.Context, api.EnvURL, api.EnvToken))
			}
			if !kc.HasContext(flags.Context) {
				return nil, errs.WithHint(
					fmt.Errorf("--context %q is neither a devtool context nor a Kubernetes context: %w", flags.Context, kc.missingContextError(flags.Context)),
					"'devtool context list' shows the devtool contexts")
			}
			sel.KubeContext = flags.Context
		}
	case envURL != "":
		if sel.Context, err = EnvContext(r.Getenv, cfg); err != nil {
			return nil, err
		}
	case cfg.CurrentContext != "":
		sel.Context = cfg.Current()
		if sel.Context == nil {
			return nil, errs.WithHint(
				fmt.Errorf("the current devtool context %q is not in the context store %s", cfg.CurrentContext, store.Path()),
				"run 'devtool context use <name>' to choose a context")
		}
	default:
		sel.KubeContext = kc.Config.CurrentContext
		if sel.KubeContext == "" {
			msg := fmt.Sprintf("the kubeconfig (%s) sets no current-context and no devtool context is selected", kc.Describe())
			if len(kc.ContextNames()) == 0 {
				return nil, errs.WithHint(fmt.Errorf("%w: %s", ErrNoCurrentContext, msg),
					"set KUBECONFIG or create ~/.kube/config (for the local cluster run 'make cluster-up'), or set DEVTOOL_URL and DEVTOOL_TOKEN for a platform")
			}
			return nil, errs.WithHint(fmt.Errorf("%w: %s", ErrNoCurrentContext, msg),
				fmt.Sprintf("run 'devtool context use <name>' with one of: %s", strings.Join(kc.ContextNames(), ", ")))
		}
		if !kc.HasContext(sel.KubeContext) {
			return nil, fmt.Errorf("the kubeconfig's current-context: %w", kc.missingContextError(sel.KubeContext))
		}
	}
	// DEVTOOL_TOKEN, DEVTOOL_NAMESPACE and DEVTOOL_CA_CERT apply to the platform context DEVTOOL_URL
	// names, or, without DEVTOOL_URL, to the platform context in use.
	if c := sel.Context; c != nil && c.IsDevtool && !c.fromEnv && (envURL == "" || envURL == c.Name) {
		if sel.Context, err = withEnv(c, r.getenv); err != nil {
			return nil, err
		}
	}
	if c := sel.Context; c != nil {
		if !(c.IsDevtool && c.KubeContext == "") {
			sel.KubeContext = c.KubeContextName()
			if !kc.HasContext(sel.KubeContext) {
				return nil, errs.WithHint(
					fmt.Errorf("devtool context %q uses %w", c.Name, kc.missingContextError(sel.KubeContext)),
					fmt.Sprintf("delete it with 'devtool context delete %s', or restore the kubeconfig entry", c.Name))
			}
		}
	}
	if c := sel.Context; c != nil && c.IsDevtool && sel.KubeContext == "" {
		// A platform user's default namespace is their personal one (named after them); a context
		// from DEVTOOL_URL alone learns it in Resolve.
		sel.Namespace = firstNonEmpty(flags.Namespace, c.Namespace, c.Username)
		if sel.Namespace == "" && !c.fromEnv {
			sel.Namespace = "default"
		}
		return sel, nil
	}
	sel.Namespace = firstNonEmpty(flags.Namespace, nsOf(sel.Context), kc.Namespace(sel.KubeContext), "default")
	return sel, nil
}

// Resolve applies the precedence and builds the Kubernetes client for the result.
func (r *Resolver) Resolve(flags Flags) (*Target, error) {
	sel, err := r.Select(flags)
	if err != nil {
		return nil, err
	}
	var restCfg *rest.Config
	if sel.KubeContext == "" {
		if restCfg, err = r.platformConfig(sel); err != nil {
			return nil, err
		}
	} else if restCfg, err = r.kubeconfigConfig(sel); err != nil {
		return nil, err
	}
	kc, err := kube.NewClient(restCfg, sel.Namespace, sel.KubeContext)
	if err != nil {
		return nil, err
	}
	port, err := EndpointPortFromEnv(r.getenv)
	if err != nil {
		return nil, err
	}
	t := &Target{
		Kube:          kc,
		Namespace:     sel.Namespace,
		ContextName:   sel.Name(),
		KubeContext:   sel.KubeContext,
		Registry:      r.getenv("DEVTOOL_REGISTRY"),
		Builder:       r.getenv("DEVTOOL_BUILDER"),
		ClusterDomain: r.getenv("DEVTOOL_CLUSTER_DOMAIN"),
		IngressClass:  r.getenv(EnvIngressClass),
		EndpointPort:  port,
	}
	if c := sel.Context; c != nil {
		t.Registry = firstNonEmpty(c.Registry, t.Registry)
		t.Builder = firstNonEmpty(c.Builder, t.Builder)
		t.ClusterDomain = firstNonEmpty(c.ClusterDomain, t.ClusterDomain)
		t.IngressClass = firstNonEmpty(c.IngressClass, t.IngressClass)
		if c.EndpointPort != 0 {
			t.EndpointPort = c.EndpointPort
		}
		t.IsPlatform = c.IsDevtool
		t.Token = c.Token
		if c.IsDevtool {
			cp := *c
			t.Platform = &cp
			store, err := r.Store()
			if err != nil {
				return nil, err
			}
			t.Hosted, t.RegistryAuth = hostedBuild(store, &cp)
		}
	}
	return t, nil
}

// kubeconfigConfig is the client configuration of the selection's kubeconfig context.
func (r *Resolver) kubeconfigConfig(sel *Selection) (*rest.Config, error) {
	if err := kube.CheckReferencedFiles(sel.Kubeconfig.Config, sel.KubeContext); err != nil {
		return nil, err
	}
	cc := clientcmd.NewNonInteractiveClientConfig(*sel.Kubeconfig.Config, sel.KubeContext, &clientcmd.ConfigOverrides{}, nil)
	restCfg, err := cc.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("Kubernetes context %q in %s: %w", sel.KubeContext, sel.Kubeconfig.Describe(), err)
	}
	if err := kube.InlineCAFile(restCfg, sel.KubeContext); err != nil {
		return nil, err
	}
	// A credential plugin gets a deadline (DEVTOOL_CREDENTIAL_PLUGIN_TIMEOUT, default 30s).
	if restCfg.ExecProvider != nil {
		pluginTimeout, err := kube.ParseCredentialPluginTimeout(r.getenv(kube.CredentialPluginTimeoutEnv))
		if err != nil {
			return nil, err
		}
		user := ""
		if c := sel.Kubeconfig.Config.Contexts[sel.KubeContext]; c != nil {
			user = c.AuthInfo
		}
		if err := kube.BoundCredentialPlugin(restCfg, user, pluginTimeout); err != nil {
			return nil, err
		}
	}
	return restCfg, nil
}

// platformConfig is the client configuration of a platform user (see PlatformRESTConfig). A context
// from DEVTOOL_URL alone also learns the registry, builder and domain (GET /api/v1/info) and, when no
// namespace was given, the user's personal namespace (GET /api/v1/me).
func (r *Resolver) platformConfig(sel *Selection) (*rest.Config, error) {
	c := sel.Context
	ctx, cancel := context.WithTimeout(context.Background(), 2*client.DefaultTimeout)
	defer cancel()
	store, err := r.Store()
	if err != nil {
		return nil, err
	}
	if c.fromEnv {
		pc, err := PlatformClient(c)
		if err != nil {
			return nil, err
		}
		defer pc.Close()
		info, err := pc.Info(ctx)
		if err != nil {
			return nil, err
		}
		// No saved context ever checked this platform: check the versions here, once per command.
		if err := client.CheckVersions(info, buildinfo.Get().Version, c.Name); err != nil {
			return nil, err
		}
		cp := *c
		cp.Registry, cp.Builder, cp.ClusterDomain, cp.BuildService = info.Registry, info.Builder, info.Domain, info.Builder
		cp.IngressClass, cp.EndpointPort = info.IngressClass, info.EndpointPort
		if sel.Namespace == "" {
			if err := needToken(c); err != nil {
				return nil, err
			}
			me, err := pc.Me(ctx)
			if err != nil {
				return nil, err
			}
			cp.Username = me.Name
			sel.Namespace = firstNonEmpty(me.Namespace, me.Name)
		}
		sel.Context = &cp
		c = &cp
	} else if c.ClusterDomain != "" && c.IngressClass == "" && c.EndpointPort == 0 {
		// Saved by a devtool that did not keep the endpoints' class and port: ask (not saved; a
		// new 'devtool context use' saves them).
		pc, err := PlatformClient(c)
		if err != nil {
			return nil, err
		}
		info, err := pc.Info(ctx)
		pc.Close()
		if err != nil {
			return nil, err
		}
		cp := *c
		cp.IngressClass, cp.EndpointPort = info.IngressClass, info.EndpointPort
		sel.Context = &cp
		c = &cp
	}
	return PlatformRESTConfig(ctx, &KubeTokens{Store: store}, c)
}

// EnvIngressClass and EnvEndpointPort set the endpoints' ingress class and port on a cluster
// without a platform (a platform context's come from the platform).
const (
	EnvIngressClass = "DEVTOOL_INGRESS_CLASS"
	EnvEndpointPort = "DEVTOOL_ENDPOINT_PORT"
)

// EndpointPortFromEnv reads DEVTOOL_ENDPOINT_PORT (0 when unset).
func EndpointPortFromEnv(getenv func(string) string) (int, error) {
	v := ""
	if getenv != nil {
		v = getenv(EnvEndpointPort)
	}
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 65535 {
		return 0, errs.FlagErrorf("%s=%q: a port number (1-65535)", EnvEndpointPort, v)
	}
	return n, nil
}

func nsOf(c *Context) string {
	if c == nil {
		return ""
	}
	return c.Namespace
}

func firstNonEmpty(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}

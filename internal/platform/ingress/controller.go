// Package ingress is the platform's own ingress controller (`devtool-platform ingress`): it watches
// the Ingresses of its IngressClass in every namespace, routes by host and path with the Ingress
// semantics (router.go), forwards with net/http/httputil.ReverseProxy to a ready endpoint of the
// backend Service (WebSockets and streamed responses included; endpoints.go, proxy.go), terminates
// TLS with a certificate read from a Secret and reloaded when it changes (certs.go), and serves
// private endpoints only to signed-in members of their namespace (auth.go, login.go).
//
// It never prints and never exits: cmd/devtool-platform runs it.
package ingress

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// Controller is one replica of the ingress.
type Controller struct {
	o         Options
	table     atomic.Pointer[Table]
	certs     *certSource
	proxy     *proxy
	ready     atomic.Bool
	rebuildCh chan struct{}

	factory       informers.SharedInformerFactory
	secretFactory informers.SharedInformerFactory
	ingresses     cache.SharedIndexInformer
	namespaces    cache.SharedIndexInformer
	classes       cache.SharedIndexInformer

	mu      sync.Mutex
	changed chan struct{} // closed and replaced on every EndpointSlice change
}

// Options configure a Controller.
type Options struct {
	Client kubernetes.Interface
	// Class is the IngressClass served (its name). Ingresses name it in spec.ingressClassName (or
	// the old kubernetes.io/ingress.class annotation); those naming none are served when the
	// IngressClass is the cluster's default.
	Class string
	// Namespace is the platform's namespace: it holds TLSSecret.
	Namespace string
	// TLSSecret is the kubernetes.io/tls Secret (tls.crt, tls.key) served to every host.
	TLSSecret string
	// Domain is the platform's endpoint domain; with Strict, hosts under it follow
	// <name>-<namespace>.<Domain> (TableOptions).
	Domain string
	Strict bool
	// Keys and PlatformURL enable private endpoints: without them, a private route answers 503.
	Keys        *Keys
	PlatformURL string
	// Authorizer decides access to private routes; default SARAuthorizer on Client.
	Authorizer Authorizer
	// Waker wakes a backend with no endpoint (previews); nil: 503 at once.
	Waker Waker
	Log   *slog.Logger
}

// New makes a controller; Start runs it.
func New(o Options) (*Controller, error) {
	if o.Client == nil || o.Class == "" || o.Namespace == "" || o.TLSSecret == "" {
		return nil, errors.New("ingress: the client, the class, the namespace and the TLS Secret are required")
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	c := &Controller{o: o, certs: &certSource{}, rebuildCh: make(chan struct{}, 1), changed: make(chan struct{})}
	c.table.Store(&Table{exact: map[string]*hostRules{}, wildcard: map[string]*hostRules{}, any: &hostRules{}})
	c.factory = informers.NewSharedInformerFactory(o.Client, 0)
	c.secretFactory = informers.NewSharedInformerFactoryWithOptions(o.Client, 0, informers.WithNamespace(o.Namespace),
		informers.WithTweakListOptions(func(lo *metav1.ListOptions) {
			lo.FieldSelector = fields.OneTermEqualSelector("metadata.name", o.TLSSecret).String()
		}))
	c.ingresses = c.factory.Networking().V1().Ingresses().Informer()
	c.namespaces = c.factory.Core().V1().Namespaces().Informer()
	c.classes = c.factory.Networking().V1().IngressClasses().Informer()
	services := c.factory.Core().V1().Services()
	slices := c.factory.Discovery().V1().EndpointSlices().Informer()
	if err := slices.AddIndexers(cache.Indexers{sliceIndex: sliceService}); err != nil {
		return nil, err
	}
	rebuild := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { c.dirty() },
		UpdateFunc: func(any, any) { c.dirty() },
		DeleteFunc: func(any) { c.dirty() },
	}
	for _, inf := range []cache.SharedIndexInformer{c.ingresses, c.namespaces, c.classes} {
		if _, err := inf.AddEventHandler(rebuild); err != nil {
			return nil, err
		}
	}
	if _, err := slices.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { c.endpointsChanged() },
		UpdateFunc: func(any, any) { c.endpointsChanged() },
		DeleteFunc: func(any) { c.endpointsChanged() },
	}); err != nil {
		return nil, err
	}
	secrets := c.secretFactory.Core().V1().Secrets().Informer()
	if _, err := secrets.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.loadCert(obj) },
		UpdateFunc: func(_, obj any) { c.loadCert(obj) },
	}); err != nil {
		return nil, err
	}
	_ = services.Informer()
	res := &resolver{services: services.Lister(), slices: slices.GetIndexer()}
	var auth *endpointAuth
	if o.Keys != nil && o.PlatformURL != "" {
		authz := o.Authorizer
		if authz == nil {
			authz = &SARAuthorizer{Client: o.Client}
		}
		auth = &endpointAuth{keys: o.Keys, authz: authz, platformURL: o.PlatformURL, now: time.Now, log: o.Log}
	}
	c.proxy = newProxy(c.table.Load, res, auth, o.Waker, c.endpointsChangedChan, o.Log)
	return c, nil
}

// Start runs the informers until ctx ends and returns once the caches are synced, the table built
// and the certificate loaded.
func (c *Controller) Start(ctx context.Context) error {
	c.factory.Start(ctx.Done())
	c.secretFactory.Start(ctx.Done())
	for typ, ok := range c.factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("ingress: the cache of %v did not sync", typ)
		}
	}
	for typ, ok := range c.secretFactory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("ingress: the cache of %v did not sync", typ)
		}
	}
	if c.certs.get() == nil {
		return fmt.Errorf("ingress: no usable certificate in Secret %s/%s (keys tls.crt, tls.key)", c.o.Namespace, c.o.TLSSecret)
	}
	c.build()
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-c.rebuildCh:
				c.build()
			}
		}
	}()
	c.ready.Store(true)
	return nil
}

// Ready reports whether the replica serves (synced, table built, certificate loaded).
func (c *Controller) Ready() bool { return c.ready.Load() }

// Handler is the proxy (for the TLS listener).
func (c *Controller) Handler() http.Handler { return c.proxy }

// CloseIdleConnections closes the proxy's idle connections to backends.
func (c *Controller) CloseIdleConnections() { c.proxy.tr.CloseIdleConnections() }

// TLSConfig serves the current certificate of the TLS Secret (reloaded when it changes).
func (c *Controller) TLSConfig() *tls.Config {
	return &tls.Config{
		MinVersion:     tls.VersionTLS12,
		NextProtos:     []string{"h2", "http/1.1"},
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return c.certs.getOrErr() },
	}
}

// Table is the current route table.
func (c *Controller) Table() *Table { return c.table.Load() }

func (c *Controller) dirty() {
	select {
	case c.rebuildCh <- struct{}{}:
	default:
	}
}

func (c *Controller) endpointsChanged() {
	c.mu.Lock()
	close(c.changed)
	c.changed = make(chan struct{})
	c.mu.Unlock()
}

func (c *Controller) endpointsChangedChan() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.changed
}

func (c *Controller) loadCert(obj any) {
	s, ok := obj.(*corev1.Secret)
	if !ok || s.Name != c.o.TLSSecret {
		return
	}
	if err := c.certs.set(s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey]); err != nil {
		c.o.Log.Warn("TLS Secret not loaded; serving the previous certificate", "secret", c.o.Namespace+"/"+s.Name, "err", err.Error())
		return
	}
	c.o.Log.Info("certificate loaded", "secret", c.o.Namespace+"/"+s.Name, "resourceVersion", s.ResourceVersion)
}

// build makes the table from the caches.
func (c *Controller) build() {
	isDefault := false
	if obj, ok, _ := c.classes.GetStore().GetByKey(c.o.Class); ok {
		ic := obj.(*networkingv1.IngressClass)
		isDefault = ic.Annotations[networkingv1.AnnotationIsDefaultIngressClass] == "true"
	}
	var sources []Source
	for _, obj := range c.ingresses.GetStore().List() {
		ing := obj.(*networkingv1.Ingress)
		if !c.serves(ing, isDefault) {
			continue
		}
		sources = append(sources, Source{Ingress: ing, Private: c.private(ing)})
	}
	sort.Slice(sources, func(i, j int) bool {
		return sources[i].Ingress.Namespace+"/"+sources[i].Ingress.Name < sources[j].Ingress.Namespace+"/"+sources[j].Ingress.Name
	})
	t, skipped := NewTable(sources, TableOptions{Strict: c.o.Strict, Domain: c.o.Domain, PlatformNamespace: c.o.Namespace})
	for _, s := range skipped {
		c.o.Log.Warn("ingress rule not served", "ingress", s.Ingress.String(), "host", s.Host, "reason", s.Reason)
	}
	c.table.Store(t)
}

// serves: the Ingress is of this controller's class.
func (c *Controller) serves(ing *networkingv1.Ingress, isDefault bool) bool {
	if ing.Spec.IngressClassName != nil {
		return *ing.Spec.IngressClassName == c.o.Class
	}
	if v, ok := ing.Annotations["kubernetes.io/ingress.class"]; ok {
		return v == c.o.Class
	}
	return isDefault
}

// private is the Ingress's annotation, else its namespace's.
func (c *Controller) private(ing *networkingv1.Ingress) bool {
	if v, ok := ing.Annotations[AnnotationPrivate]; ok {
		return isTrue(v)
	}
	if obj, ok, _ := c.namespaces.GetStore().GetByKey(ing.Namespace); ok {
		return isTrue(obj.(*corev1.Namespace).Annotations[AnnotationPrivate])
	}
	return false
}

func isTrue(v string) bool {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "true", "yes", "1", "on":
		return true
	}
	return false
}

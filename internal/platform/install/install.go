package install

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/devtool/devtool/internal/platform/api"
	"github.com/devtool/devtool/internal/platform/ingress"
	"github.com/devtool/devtool/internal/platform/store"
)

// Options say what to install where.
type Options struct {
	Config    *rest.Config
	Namespace string // default store.DefaultNamespace
	Image     string // the image to run; "" = push the binary at Binary to Registry
	Binary    string
	Registry  string // where the image is pushed, e.g. 127.0.0.1:25000
	Host      string // the platform's host name, e.g. devtool.localhost
	APIServer string // the Kubernetes API address users' kubeconfigs get
	Replicas  int32
	// Domain is the endpoints' domain (<name>-<namespace>.<Domain>); default Host.
	Domain string
	// IngressClass is the class of users' Ingresses: served by the platform's own ingress (default
	// DefaultIngressClass), or, with NoIngress, another controller's ("" = the cluster's default).
	IngressClass string
	// NoIngress leaves the platform's ingress out: another controller (nginx, Traefik, a cloud load
	// balancer) serves the endpoints, on EndpointPort (default 443).
	NoIngress       bool
	IngressReplicas int32 // default 2
	EndpointPort    int32
	// OutDir receives platform-url, platform-ca.crt and platform-admin-token (0600).
	OutDir   string
	Progress func(string)
	Timeout  time.Duration // for the rollout and the first answer; default 3 minutes
	// Analytics: the platform accepts the CLI's analytics events until an admin sets otherwise.
	Analytics bool
	// ExternalURL is the platform's address as users reach it; "" = https://<Host>:<NodePort>.
	ExternalURL   string
	MinCLIVersion string
	// OIDC, when it names an issuer, is written to the Secret the server reads its OpenID Connect
	// provider from (keys of sso.SecretName: issuer, clientID, clientSecret, name, scopes,
	// usernameClaim, groupsClaim, adminGroups, signUp).
	OIDC map[string]string
	// BuildService, when set, installs the hosted build service (BuildKit and a registry).
	BuildService *BuildService
	// Runner are the files of the pipeline runner's image, pushed to Registry; without
	// Runner.Devtool the platform runs no pipelines (and no previews).
	Runner RunnerFiles
	// PreviewTTL deletes a preview idle that long; PreviewSleep scales it to zero after that long
	// (durations as Go writes them, "" = the server's defaults).
	PreviewTTL, PreviewSleep string
}

// Result is what an install made.
type Result struct {
	URL, Image string
	NodePort   int32
	// IngressClass and EndpointPort are what the CLI uses for endpoints (also in /api/v1/info).
	IngressClass string
	EndpointPort int32
	// Builder and HostedRegistry are the build service's addresses ("" without it).
	Builder, HostedRegistry string
}

const fieldManager = "devtool-platform"

// Install puts the platform into the cluster (idempotent: a second run changes nothing that is
// right already, keeps the TLS Secret and a still valid admin token file) and waits until it
// answers on its URL.
func Install(ctx context.Context, o Options) (*Result, error) {
	if o.Namespace == "" {
		o.Namespace = store.DefaultNamespace
	}
	if o.Replicas == 0 {
		o.Replicas = 2
	}
	if o.Timeout == 0 {
		o.Timeout = 3 * time.Minute
	}
	if o.Progress == nil {
		o.Progress = func(string) {}
	}
	if o.Domain == "" {
		o.Domain = o.Host
	}
	if o.IngressReplicas == 0 {
		o.IngressReplicas = 2
	}
	if o.IngressClass == "" && !o.NoIngress {
		o.IngressClass = DefaultIngressClass(o.Namespace)
	}
	if o.Host == "" || o.APIServer == "" || o.OutDir == "" {
		return nil, errors.New("install: the host, the API server address and the output folder are required")
	}
	st, err := store.New(o.Config, o.Namespace)
	if err != nil {
		return nil, err
	}
	image := o.Image
	if image == "" {
		if o.Registry == "" || o.Binary == "" {
			return nil, errors.New("install: give --image, or --registry to push this binary as the image")
		}
		image, err = PushImage(ctx, o.Binary, strings.TrimSuffix(o.Registry, "/")+"/"+o.Namespace+"/devtool-platform")
		if err != nil {
			return nil, err
		}
		o.Progress("image " + image)
	}
	var bkImage, regImage string
	if o.BuildService != nil {
		if bkImage, regImage, err = buildImages(ctx, &o); err != nil {
			return nil, err
		}
		o.Progress("images " + bkImage + ", " + regImage)
	}
	if _, err := st.Kube.CoreV1().Namespaces().Get(ctx, o.Namespace, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: o.Namespace}}
		if _, err := st.Kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("creating namespace %s: %w", o.Namespace, err)
		}
	} else if err != nil {
		return nil, err
	}
	var runnerImage string
	if o.Runner.Devtool != "" {
		if o.Registry == "" {
			return nil, errors.New("install: the runner image needs --registry to be pushed to")
		}
		runnerImage, err = PushRunnerImage(ctx, o.Runner, strings.TrimSuffix(o.Registry, "/")+"/"+o.Namespace+"/devtool-runner")
		if err != nil {
			return nil, err
		}
		o.Progress("runner image " + runnerImage)
	} else {
		o.Progress("no runner image (no --runner-devtool): pipelines and previews are off")
	}
	if err := ApplyDefinitions(ctx, st); err != nil {
		return nil, err
	}
	o.Progress("custom resources users, accesstokens, sessions, pipelineruns and previews (devtool.dev)")
	a := &applier{st: st}
	objs := platformRBAC(o.Namespace)
	if o.BuildService != nil {
		objs = append(objs, buildServiceRBAC(o.Namespace)...)
	}
	for _, obj := range objs {
		if err := a.applyTyped(ctx, obj); err != nil {
			return nil, err
		}
	}
	o.Progress("roles devtool-owner, devtool-editor, devtool-viewer and the platform's own")
	ca, err := ensureTLS(ctx, st, o.Namespace, o.Host, time.Now())
	if err != nil {
		return nil, err
	}
	authData, err := ensureAuthKeys(ctx, st, o.Namespace)
	if err != nil {
		return nil, err
	}
	// The Services first: their node ports are the platform's URL and the endpoints' port.
	if err := a.applyTyped(ctx, nodePortService(o.Namespace, Name, appLabels)); err != nil {
		return nil, err
	}
	port, err := nodePort(ctx, st, o.Namespace, Name)
	if err != nil {
		return nil, err
	}
	url := fmt.Sprintf("https://%s:%d", o.Host, port)
	endpointPort := o.EndpointPort
	webhook, err := ensureWebhookSecret(ctx, st, o.Namespace)
	if err != nil {
		return nil, err
	}
	if !o.NoIngress {
		if err := ensureIngressTLS(ctx, st, o.Namespace, o.Domain, time.Now()); err != nil {
			return nil, err
		}
		for _, obj := range ingressObjects(o.Namespace, o.IngressClass) {
			if err := a.applyTyped(ctx, obj); err != nil {
				return nil, err
			}
		}
		if endpointPort, err = nodePort(ctx, st, o.Namespace, IngressName); err != nil {
			return nil, err
		}
		dep := ingressDeployment(o.Namespace, image, IngressArgs{Class: o.IngressClass, Domain: o.Domain, PlatformURL: url,
			Replicas: o.IngressReplicas, ConfigHash: hashOf(authData, map[string][]byte{WakeKey: webhook[WakeKey]}),
			Wake: runnerImage != ""})
		if err := a.applyTyped(ctx, dep); err != nil {
			return nil, err
		}
		o.Progress(fmt.Sprintf("ingress class %s: %d replicas, endpoints https://<name>-<namespace>.%s:%d", o.IngressClass, o.IngressReplicas, o.Domain, endpointPort))
	}
	platformTLS, err := st.Kube.CoreV1().Secrets(o.Namespace).Get(ctx, TLSSecret, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	sa := ServeArgs{Namespace: o.Namespace, APIServer: o.APIServer, Domain: o.Domain, Analytics: o.Analytics, IngressClass: o.IngressClass,
		EndpointPort: endpointPort, ConfigHash: hashOf(platformTLS.Data, authData, webhook), MinCLIVersion: o.MinCLIVersion, ExternalURL: url,
		RunnerImage: runnerImage, ForwardImage: image, PreviewTTL: o.PreviewTTL, PreviewSleep: o.PreviewSleep}
	if o.ExternalURL != "" {
		sa.ExternalURL = strings.TrimSuffix(o.ExternalURL, "/")
	}
	if o.BuildService != nil {
		if sa.Builder, sa.Registry, err = installBuildService(ctx, a, st, o, image, bkImage, regImage); err != nil {
			return nil, err
		}
		sa.BuilderCA = true
		o.Progress("build service: BuildKit " + sa.Builder + ", registry " + sa.Registry)
	}
	for _, obj := range workload(o.Namespace, image, o.Replicas, sa) {
		if err := a.applyTyped(ctx, obj); err != nil {
			return nil, err
		}
	}
	if o.OIDC["issuer"] != "" {
		if err := applyOIDC(ctx, st, o.Namespace, o.OIDC); err != nil {
			return nil, err
		}
		o.Progress("OpenID Connect provider " + o.OIDC["issuer"])
	}
	if err := os.MkdirAll(o.OutDir, 0o755); err != nil {
		return nil, err
	}
	if err := writeFile(filepath.Join(o.OutDir, "platform-ca.crt"), ca, 0o644); err != nil {
		return nil, err
	}
	if err := ensureAdmin(ctx, st, filepath.Join(o.OutDir, "platform-admin-token")); err != nil {
		return nil, err
	}
	o.Progress("admin token in " + filepath.Join(o.OutDir, "platform-admin-token"))
	if err := writeFile(filepath.Join(o.OutDir, "platform-webhook-secret"), webhook[WebhookSecretKey], 0o600); err != nil {
		return nil, err
	}
	wctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	if err := waitRollout(wctx, st, o.Namespace, Name); err != nil {
		return nil, err
	}
	o.Progress(fmt.Sprintf("deployment %s/%s: %d replicas ready", o.Namespace, Name, o.Replicas))
	if !o.NoIngress {
		if err := waitRollout(wctx, st, o.Namespace, IngressName); err != nil {
			return nil, err
		}
		o.Progress(fmt.Sprintf("deployment %s/%s: %d replicas ready", o.Namespace, IngressName, o.IngressReplicas))
	}
	if o.BuildService != nil {
		for _, n := range []string{BuildKitName, RegistryName} {
			if err := waitStatefulSet(wctx, st, o.Namespace, n); err != nil {
				return nil, err
			}
		}
		o.Progress("build service ready")
	}
	if err := waitAnswer(wctx, url, ca); err != nil {
		return nil, err
	}
	if err := writeFile(filepath.Join(o.OutDir, "platform-url"), []byte(url+"\n"), 0o644); err != nil {
		return nil, err
	}
	return &Result{URL: url, Image: image, NodePort: port, IngressClass: o.IngressClass, EndpointPort: endpointPort,
		Builder: sa.Builder, HostedRegistry: sa.Registry}, nil
}

// ApplyDefinitions applies what every platform of a cluster shares: the custom resource definitions
// (waiting until they are served) and the membership ClusterRoles. Install runs it; a test that runs
// the platform's code in its own process against a cluster runs it too.
func ApplyDefinitions(ctx context.Context, st *store.Store) error {
	a := &applier{st: st}
	for _, c := range CRDs() {
		if err := a.apply(ctx, schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}, "", c); err != nil {
			return err
		}
		if err := waitEstablished(ctx, st, c["metadata"].(map[string]any)["name"].(string)); err != nil {
			return err
		}
	}
	for _, r := range membershipRoles() {
		if err := a.applyTyped(ctx, r); err != nil {
			return err
		}
	}
	return nil
}

func writeFile(path string, data []byte, mode os.FileMode) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, mode); err != nil {
		return err
	}
	if err := os.Chmod(tmp, mode); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

type applier struct{ st *store.Store }

func (a *applier) apply(ctx context.Context, gvr schema.GroupVersionResource, ns string, obj map[string]any) error {
	body, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	name := obj["metadata"].(map[string]any)["name"].(string)
	force := true
	var r interface {
		Patch(context.Context, string, types.PatchType, []byte, metav1.PatchOptions, ...string) (*unstructured.Unstructured, error)
	} = a.st.Dyn.Resource(gvr)
	if ns != "" {
		r = a.st.Dyn.Resource(gvr).Namespace(ns)
	}
	if _, err := r.Patch(ctx, name, types.ApplyPatchType, body, metav1.PatchOptions{FieldManager: fieldManager, Force: &force}); err != nil {
		return fmt.Errorf("applying %s %s: %w", gvr.Resource, name, err)
	}
	return nil
}

var resources = map[string]schema.GroupVersionResource{
	"ServiceAccount":     {Version: "v1", Resource: "serviceaccounts"},
	"Service":            {Version: "v1", Resource: "services"},
	"Deployment":         {Group: "apps", Version: "v1", Resource: "deployments"},
	"StatefulSet":        {Group: "apps", Version: "v1", Resource: "statefulsets"},
	"ConfigMap":          {Version: "v1", Resource: "configmaps"},
	"ClusterRole":        {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"},
	"ClusterRoleBinding": {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterrolebindings"},
	"IngressClass":       {Group: "networking.k8s.io", Version: "v1", Resource: "ingressclasses"},
	"Role":               {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "roles"},
	"RoleBinding":        {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings"},
}

func (a *applier) applyTyped(ctx context.Context, obj any) error {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return err
	}
	u := &unstructured.Unstructured{Object: m}
	unstructured.RemoveNestedField(m, "metadata", "creationTimestamp")
	unstructured.RemoveNestedField(m, "status")
	gvr, ok := resources[u.GetKind()]
	if !ok {
		return fmt.Errorf("install: no resource for kind %s", u.GetKind())
	}
	return a.apply(ctx, gvr, u.GetNamespace(), m)
}

func waitEstablished(ctx context.Context, st *store.Store, name string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	gvr := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	lw := &cache.ListWatch{
		ListFunc: func(o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
			return st.Dyn.Resource(gvr).List(ctx, o)
		},
		WatchFunc: func(o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
			return st.Dyn.Resource(gvr).Watch(ctx, o)
		},
	}
	_, err := watchtools.UntilWithSync(ctx, lw, &unstructured.Unstructured{}, nil, func(e watch.Event) (bool, error) {
		u, ok := e.Object.(*unstructured.Unstructured)
		if !ok {
			return false, nil
		}
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, c := range conds {
			cm, _ := c.(map[string]any)
			if cm["type"] == "Established" && cm["status"] == "True" {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the CRD %s to be established: %w", name, err)
	}
	return nil
}

// ensureTLS returns the CA of the platform's TLS Secret, making the Secret (a new CA and serving
// certificate) when there is none.
func ensureTLS(ctx context.Context, st *store.Store, ns, host string, now time.Time) ([]byte, error) {
	sec, err := st.Kube.CoreV1().Secrets(ns).Get(ctx, TLSSecret, metav1.GetOptions{})
	if err == nil && len(sec.Data["ca.crt"]) > 0 && certCovers(sec.Data["tls.crt"], host) {
		if own := sec.Labels["app.kubernetes.io/part-of"] == Name; own && !chained(sec.Data["tls.crt"]) {
			// Made before the chain was served: append the CA, so clients can pin it.
			sec.Data["tls.crt"] = append(append(append([]byte{}, sec.Data["tls.crt"]...), '\n'), sec.Data["ca.crt"]...)
			if _, err := st.Kube.CoreV1().Secrets(ns).Update(ctx, sec, metav1.UpdateOptions{}); err != nil {
				return nil, fmt.Errorf("updating the TLS Secret with its chain: %w", err)
			}
		}
		return sec.Data["ca.crt"], nil
	}
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, err
	}
	existing := err == nil
	hosts := []string{host, "*." + host, Name + "." + ns + ".svc", Name + "." + ns + ".svc.cluster.local", "localhost", "127.0.0.1"}
	c, err := NewCerts(hosts, now)
	if err != nil {
		return nil, err
	}
	// tls.crt holds the chain: the serving certificate, then the CA.
	data := map[string][]byte{"ca.crt": c.CA, "tls.crt": append(append(append([]byte{}, c.Cert...), '\n'), c.CA...), "tls.key": c.Key}
	if existing {
		sec.Data = data
		if _, err := st.Kube.CoreV1().Secrets(ns).Update(ctx, sec, metav1.UpdateOptions{}); err != nil {
			return nil, fmt.Errorf("updating the TLS Secret: %w", err)
		}
		return c.CA, putCA(ctx, st, ns, c)
	}
	s := &corev1.Secret{ObjectMeta: meta(TLSSecret, ns), Type: corev1.SecretTypeTLS, Data: data}
	if _, err := st.Kube.CoreV1().Secrets(ns).Create(ctx, s, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
		// another install made it meanwhile: use that one
		sec, err := st.Kube.CoreV1().Secrets(ns).Get(ctx, TLSSecret, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		return sec.Data["ca.crt"], nil
	} else if err != nil {
		return nil, fmt.Errorf("creating the TLS Secret: %w", err)
	}
	return c.CA, putCA(ctx, st, ns, c)
}

// putCA keeps the CA's key beside the serving certificate it signed (CASecret), to issue the
// ingress's certificate later.
func putCA(ctx context.Context, st *store.Store, ns string, c *Certs) error {
	data := map[string][]byte{"ca.crt": c.CA, "ca.key": c.CAKey}
	return putSecret(ctx, st, &corev1.Secret{ObjectMeta: meta(CASecret, ns), Type: corev1.SecretTypeOpaque, Data: data})
}

// putSecret creates s, or replaces the data of the Secret of its name.
func putSecret(ctx context.Context, st *store.Store, s *corev1.Secret) error {
	secrets := st.Kube.CoreV1().Secrets(s.Namespace)
	_, err := secrets.Create(ctx, s, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		cur, gerr := secrets.Get(ctx, s.Name, metav1.GetOptions{})
		if gerr != nil {
			return gerr
		}
		cur.Data = s.Data
		_, err = secrets.Update(ctx, cur, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("writing Secret %s/%s: %w", s.Namespace, s.Name, err)
	}
	return nil
}

// ensureIngressTLS makes sure IngressTLSSecret holds a certificate for *.<domain> (and <domain>)
// that is valid for another 30 days; kept when it is, so a certificate given by the admin stays.
// A new one is issued by the platform's CA; an install made before the CA's key was kept copies the
// platform's serving certificate when it covers the domain (it does for the default domain, its
// host). The ingress pods reload the Secret when it changes.
func ensureIngressTLS(ctx context.Context, st *store.Store, ns, domain string, now time.Time) error {
	probe := "endpoint." + domain
	caSec, caErr := st.Kube.CoreV1().Secrets(ns).Get(ctx, CASecret, metav1.GetOptions{})
	cur, err := st.Kube.CoreV1().Secrets(ns).Get(ctx, IngressTLSSecret, metav1.GetOptions{})
	if err == nil && certCovers(cur.Data[corev1.TLSCertKey], probe) && certCovers(cur.Data[corev1.TLSCertKey], domain) {
		// kept, unless it is one the install made and the platform's CA changed since
		ours := cur.Labels["app.kubernetes.io/part-of"] == Name
		if !ours || caErr != nil || signedBy(cur.Data[corev1.TLSCertKey], caSec.Data["ca.crt"]) {
			return nil
		}
	}
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	var certPEM, keyPEM, caPEM []byte
	err = caErr
	switch {
	case err == nil && len(caSec.Data["ca.key"]) > 0:
		caPEM = caSec.Data["ca.crt"]
		if certPEM, keyPEM, err = IssueCert(caPEM, caSec.Data["ca.key"], []string{"*." + domain, domain}, now); err != nil {
			return fmt.Errorf("issuing the ingress's certificate: %w", err)
		}
	case err == nil || apierrors.IsNotFound(err):
		pl, perr := st.Kube.CoreV1().Secrets(ns).Get(ctx, TLSSecret, metav1.GetOptions{})
		if perr != nil {
			return perr
		}
		if !certCovers(pl.Data[corev1.TLSCertKey], probe) {
			return fmt.Errorf("the platform's CA key is not kept (Secret %s/%s, made by an older install) and its certificate does not cover *.%s: "+
				"delete Secret %s/%s and install again for a new CA (clients then need the new platform-ca.crt), or create Secret %s/%s (tls.crt, tls.key) yourself",
				ns, CASecret, domain, ns, TLSSecret, ns, IngressTLSSecret)
		}
		certPEM, keyPEM, caPEM = pl.Data[corev1.TLSCertKey], pl.Data[corev1.TLSPrivateKeyKey], pl.Data["ca.crt"]
	default:
		return err
	}
	return putSecret(ctx, st, &corev1.Secret{ObjectMeta: meta(IngressTLSSecret, ns), Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: certPEM, corev1.TLSPrivateKeyKey: keyPEM, "ca.crt": caPEM}})
}

// ensureAuthKeys makes the keys of private endpoints once (AuthSecret) and returns its data.
func ensureAuthKeys(ctx context.Context, st *store.Store, ns string) (map[string][]byte, error) {
	cur, err := st.Kube.CoreV1().Secrets(ns).Get(ctx, AuthSecret, metav1.GetOptions{})
	if err == nil && len(cur.Data[keyTicket]) == ed25519.PrivateKeySize && len(cur.Data[keyTicketPublic]) == ed25519.PublicKeySize && len(cur.Data[keyCookie]) >= 32 {
		return cur.Data, nil
	}
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, err
	}
	exists := err == nil
	k, err := ingress.NewKeys()
	if err != nil {
		return nil, err
	}
	data := map[string][]byte{keyTicket: k.TicketKey, keyTicketPublic: k.TicketPublic, keyCookie: k.CookieKey}
	s := &corev1.Secret{ObjectMeta: meta(AuthSecret, ns), Type: corev1.SecretTypeOpaque, Data: data}
	if exists { // there but broken: new keys (signed-in visitors sign in again)
		return data, putSecret(ctx, st, s)
	}
	if _, err := st.Kube.CoreV1().Secrets(ns).Create(ctx, s, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
		cur, err := st.Kube.CoreV1().Secrets(ns).Get(ctx, AuthSecret, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		return cur.Data, nil // another install made it meanwhile
	} else if err != nil {
		return nil, fmt.Errorf("creating Secret %s/%s: %w", ns, AuthSecret, err)
	}
	return data, nil
}

// hashOf is a short digest of Secrets' data, put on a pod template so that changed keys restart
// the pods that read them at start.
func hashOf(datas ...map[string][]byte) string {
	h := sha256.New()
	for _, d := range datas {
		keys := make([]string, 0, len(d))
		for k := range d {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(h, "%s=%x;", k, d[k])
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// nodePort is the node port of a Service's first port.
func nodePort(ctx context.Context, st *store.Store, ns, name string) (int32, error) {
	svc, err := st.Kube.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return 0, err
	}
	if len(svc.Spec.Ports) == 0 || svc.Spec.Ports[0].NodePort == 0 {
		return 0, fmt.Errorf("service %s/%s has no node port", ns, name)
	}
	return svc.Spec.Ports[0].NodePort, nil
}

// chained reports whether a PEM file holds more than one certificate.
func chained(certPEM []byte) bool {
	n := 0
	for rest := certPEM; ; {
		var blk *pem.Block
		blk, rest = pem.Decode(rest)
		if blk == nil {
			return n > 1
		}
		if blk.Type == "CERTIFICATE" {
			n++
		}
	}
}

// applyOIDC writes the OpenID Connect configuration Secret.
func applyOIDC(ctx context.Context, st *store.Store, ns string, cfg map[string]string) error {
	data := map[string][]byte{}
	for k, v := range cfg {
		if v != "" {
			data[k] = []byte(v)
		}
	}
	secs := st.Kube.CoreV1().Secrets(ns)
	sec, err := secs.Get(ctx, OIDCSecretName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = secs.Create(ctx, &corev1.Secret{ObjectMeta: meta(OIDCSecretName, ns), Data: data}, metav1.CreateOptions{})
	} else if err == nil {
		sec.Data = data
		_, err = secs.Update(ctx, sec, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("writing the OIDC configuration (Secret %s/%s): %w", ns, OIDCSecretName, err)
	}
	return nil
}

// ensureWebhookSecret returns the Secret's data: the secret pull-request webhooks are signed with
// (WebhookSecretKey) and the key the ingress signs its wake requests with (WakeKey), 32 random bytes
// each (hex), made when missing and kept after.
func ensureWebhookSecret(ctx context.Context, st *store.Store, ns string) (map[string][]byte, error) {
	sec, err := st.Kube.CoreV1().Secrets(ns).Get(ctx, WebhookSecret, metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, err
	}
	data := map[string][]byte{}
	if err == nil {
		for k, v := range sec.Data {
			data[k] = v
		}
	}
	changed := false
	for _, k := range []string{WebhookSecretKey, WakeKey} {
		if len(data[k]) >= 16 {
			continue
		}
		b := make([]byte, 32)
		if _, err := rand.Read(b); err != nil {
			return nil, err
		}
		data[k], changed = []byte(hex.EncodeToString(b)), true
	}
	if !changed {
		return data, nil
	}
	if err == nil {
		sec.Data = data
		if _, err := st.Kube.CoreV1().Secrets(ns).Update(ctx, sec, metav1.UpdateOptions{}); err != nil {
			return nil, fmt.Errorf("updating the webhook Secret: %w", err)
		}
		return data, nil
	}
	s := &corev1.Secret{ObjectMeta: meta(WebhookSecret, ns), Type: corev1.SecretTypeOpaque, Data: data}
	if _, err := st.Kube.CoreV1().Secrets(ns).Create(ctx, s, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
		return ensureWebhookSecret(ctx, st, ns)
	} else if err != nil {
		return nil, fmt.Errorf("creating the webhook Secret: %w", err)
	}
	return data, nil
}

func certCovers(certPEM []byte, host string) bool {
	blk, _ := pem.Decode(certPEM)
	if blk == nil {
		return false
	}
	c, err := x509.ParseCertificate(blk.Bytes)
	return err == nil && c.VerifyHostname(host) == nil && time.Now().Add(30*24*time.Hour).Before(c.NotAfter)
}

// ensureAdmin makes sure path holds a valid token of an admin: kept when it still authenticates,
// else a new token of the user "admin" (made, as an admin, when missing).
func ensureAdmin(ctx context.Context, st *store.Store, path string) error {
	if b, err := os.ReadFile(path); err == nil {
		if id, secret, ok := store.ParseToken(strings.TrimSpace(string(b))); ok {
			o, err := st.Dyn.Resource(store.TokenResource).Namespace(st.Namespace).Get(ctx, id, metav1.GetOptions{})
			if err == nil {
				spec, _, _ := unstructured.NestedStringMap(o.Object, "spec")
				exp, _ := time.Parse(time.RFC3339, spec["expires"])
				if spec["hash"] == store.HashSecret(secret) && time.Now().Before(exp) {
					u, err := st.Dyn.Resource(store.UserResource).Namespace(st.Namespace).Get(ctx, spec["owner"], metav1.GetOptions{})
					if admin, _, _ := unstructured.NestedBool(u.Object, "spec", "admin"); err == nil && admin {
						return nil
					}
				}
			}
		}
	}
	var tok string
	_, err := st.Dyn.Resource(store.UserResource).Namespace(st.Namespace).Get(ctx, "admin", metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		if _, tok, err = st.CreateUser(ctx, "admin", true, ""); err != nil {
			return fmt.Errorf("creating the first admin: %w", err)
		}
	case err != nil:
		return err
	default:
		if _, tok, err = st.CreateToken(ctx, "admin", "install", 0); err != nil {
			return fmt.Errorf("creating a token of the admin: %w", err)
		}
	}
	return writeFile(path, []byte(tok+"\n"), 0o600)
}

// installBuildService applies the build service: Services first (their node ports name the builder
// and the registry unless given), the certificates, then the workloads. It returns the builder's and
// the registry's addresses as users reach them.
func installBuildService(ctx context.Context, a *applier, st *store.Store, o Options, platformImage, bkImage, regImage string) (builder, registry string, err error) {
	bs := *o.BuildService
	for _, obj := range buildServiceServices(o.Namespace) {
		if err := a.applyTyped(ctx, obj); err != nil {
			return "", "", err
		}
	}
	builder, registry = bs.BuilderAddress, bs.RegistryAddress
	if builder == "" {
		p, err := nodePort(ctx, st, o.Namespace, BuildKitName)
		if err != nil {
			return "", "", err
		}
		builder = "tcp://127.0.0.1:" + itoa(p)
	}
	if registry == "" {
		p, err := nodePort(ctx, st, o.Namespace, RegistryName)
		if err != nil {
			return "", "", err
		}
		registry = "127.0.0.1:" + itoa(p)
	}
	if _, err := ensureBuilderTLS(ctx, st, o.Namespace, buildKitHosts(o.Namespace, builder), time.Now()); err != nil {
		return "", "", err
	}
	for _, obj := range buildServiceWorkloads(o.Namespace, bs, bkImage, regImage, platformImage, registry) {
		if err := a.applyTyped(ctx, obj); err != nil {
			return "", "", err
		}
	}
	return builder, registry, nil
}

func waitStatefulSet(ctx context.Context, st *store.Store, ns, name string) error {
	lw := &cache.ListWatch{
		ListFunc: func(o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
			return st.Kube.AppsV1().StatefulSets(ns).List(ctx, o)
		},
		WatchFunc: func(o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
			return st.Kube.AppsV1().StatefulSets(ns).Watch(ctx, o)
		},
	}
	_, err := watchtools.UntilWithSync(ctx, lw, &appsv1.StatefulSet{}, nil, func(e watch.Event) (bool, error) {
		s, ok := e.Object.(*appsv1.StatefulSet)
		if !ok || s.Spec.Replicas == nil {
			return false, nil
		}
		return s.Generation <= s.Status.ObservedGeneration && s.Status.UpdatedReplicas == *s.Spec.Replicas &&
			s.Status.ReadyReplicas == *s.Spec.Replicas && s.Status.CurrentRevision == s.Status.UpdateRevision, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for statefulset %s/%s to be ready (kubectl -n %s describe statefulset %s): %w", ns, name, ns, name, err)
	}
	return nil
}

func waitRollout(ctx context.Context, st *store.Store, ns, name string) error {
	lw := &cache.ListWatch{
		ListFunc: func(o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
			return st.Kube.AppsV1().Deployments(ns).List(ctx, o)
		},
		WatchFunc: func(o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
			return st.Kube.AppsV1().Deployments(ns).Watch(ctx, o)
		},
	}
	_, err := watchtools.UntilWithSync(ctx, lw, &appsv1.Deployment{}, nil, func(e watch.Event) (bool, error) {
		d, ok := e.Object.(*appsv1.Deployment)
		if !ok || d.Spec.Replicas == nil {
			return false, nil
		}
		s := d.Status
		return d.Generation <= s.ObservedGeneration && s.UpdatedReplicas == *d.Spec.Replicas &&
			s.AvailableReplicas == *d.Spec.Replicas && s.Replicas == *d.Spec.Replicas, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for deployment %s/%s to roll out (kubectl -n %s describe deployment %s): %w", ns, name, ns, name, err)
	}
	return nil
}

// Client returns an HTTP client that trusts ca and dials host names under .localhost on loopback
// (RFC 6761), as curl and browsers do.
func Client(ca []byte) (*http.Client, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, errors.New("no certificate in the platform's CA file")
	}
	d := &net.Dialer{Timeout: 10 * time.Second}
	tr := &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			host, port, err := net.SplitHostPort(addr)
			if err == nil && (host == "localhost" || strings.HasSuffix(host, ".localhost")) {
				addr = net.JoinHostPort("127.0.0.1", port)
			}
			return d.DialContext(ctx, network, addr)
		},
		ForceAttemptHTTP2: true,
	}
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}, nil
}

// waitAnswer polls GET /api/v1/info until it answers 200 (there is nothing to watch for a port).
func waitAnswer(ctx context.Context, url string, ca []byte) error {
	c, err := Client(ca)
	if err != nil {
		return err
	}
	defer c.CloseIdleConnections()
	var last error
	for delay := 100 * time.Millisecond; ; delay = min(delay*2, 2*time.Second) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url+api.Prefix+"/info", nil)
		resp, err := c.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("status %s", resp.Status)
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s to answer: %w (last: %v)", url, ctx.Err(), last)
		case <-time.After(delay):
		}
	}
}

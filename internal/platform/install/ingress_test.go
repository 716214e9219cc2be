package install

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/devtool/devtool/internal/platform/store"
)

// TestDeploymentsShareOneShape: the API's and the ingress's Deployments come from one builder, so
// they differ only where they must.
func TestDeploymentsShareOneShape(t *testing.T) {
	api := workload("devtool-system", "img", 2, ServeArgs{APIServer: "https://a", Domain: "devtool.localhost", IngressClass: "devtool", EndpointPort: 31443, ConfigHash: "h1"})[0].(*appsv1.Deployment)
	ing := ingressDeployment("devtool-system", "img", IngressArgs{Class: "devtool", Domain: "devtool.localhost", PlatformURL: "https://devtool.localhost:30000/", Replicas: 2, ConfigHash: "h2"}).(*appsv1.Deployment)
	for _, d := range []*appsv1.Deployment{api, ing} {
		ps := d.Spec.Template.Spec
		c := ps.Containers[0]
		if *d.Spec.Replicas != 2 || !*ps.SecurityContext.RunAsNonRoot || *ps.SecurityContext.RunAsUser != 65534 ||
			*c.SecurityContext.AllowPrivilegeEscalation || !*c.SecurityContext.ReadOnlyRootFilesystem || c.SecurityContext.Capabilities.Drop[0] != "ALL" ||
			c.Env[0].Name != "POD_NAME" || c.Resources.Limits.Memory().String() != "256Mi" || c.ReadinessProbe == nil {
			t.Errorf("%s: not the platform's shape: %+v", d.Name, ps)
		}
		for k, v := range d.Spec.Selector.MatchLabels {
			if d.Spec.Template.Labels[k] != v {
				t.Errorf("%s: the selector does not select the pods", d.Name)
			}
		}
		for _, m := range c.VolumeMounts {
			if !m.ReadOnly {
				t.Errorf("%s: mount %s is writable", d.Name, m.Name)
			}
		}
	}
	// the platform's selector is the one of earlier installs (a Deployment's selector is immutable)
	if !reflect.DeepEqual(api.Spec.Selector.MatchLabels, map[string]string{"app.kubernetes.io/name": Name}) {
		t.Errorf("platform selector %v", api.Spec.Selector.MatchLabels)
	}
	args := strings.Join(api.Spec.Template.Spec.Containers[0].Args, " ")
	for _, want := range []string{"--ingress-class devtool", "--endpoint-port 31443", "--ticket-key /auth/ticket.key"} {
		if !strings.Contains(args, want) {
			t.Errorf("platform args lack %q: %s", want, args)
		}
	}
	iargs := strings.Join(ing.Spec.Template.Spec.Containers[0].Args, " ")
	for _, want := range []string{"ingress ", "--class devtool", "--platform-url https://devtool.localhost:30000 ", "--ticket-public-key /auth/ticket.pub", "--cookie-key /auth/cookie.key", "--tls-secret devtool-ingress-tls"} {
		if !strings.Contains(iargs, want) {
			t.Errorf("ingress args lack %q: %s", want, iargs)
		}
	}
	// each pod gets only its keys of the auth Secret: the ingress cannot sign tickets
	vols := map[string][]string{}
	for _, d := range []*appsv1.Deployment{api, ing} {
		for _, v := range d.Spec.Template.Spec.Volumes {
			if v.Secret != nil && v.Secret.SecretName == AuthSecret {
				for _, it := range v.Secret.Items {
					vols[d.Name] = append(vols[d.Name], it.Key)
				}
			}
		}
	}
	if !reflect.DeepEqual(vols[Name], []string{"ticket.key"}) || !reflect.DeepEqual(vols[IngressName], []string{"ticket.pub", "cookie.key"}) {
		t.Errorf("auth keys mounted: %v", vols)
	}
	if api.Spec.Template.Annotations["devtool.dev/config-hash"] != "h1" || ing.Spec.Template.Annotations["devtool.dev/config-hash"] != "h2" {
		t.Error("config hash not on the pod templates")
	}
}

func TestIngressObjects(t *testing.T) {
	if DefaultIngressClass(store.DefaultNamespace) != "devtool" || DefaultIngressClass("devtool-sys-x") != "devtool-devtool-sys-x" {
		t.Error("DefaultIngressClass")
	}
	var kinds []string
	for _, o := range ingressObjects("ns1", "devtool-ns1") {
		switch v := o.(type) {
		case *networkingv1.IngressClass:
			if v.Name != "devtool-ns1" || v.Spec.Controller != IngressController || v.Annotations[networkingv1.AnnotationIsDefaultIngressClass] != "" {
				t.Errorf("IngressClass %+v", v)
			}
		case *rbacv1.ClusterRole:
			if v.Name != "devtool-ingress-ns1" {
				t.Errorf("cluster role name %s", v.Name)
			}
			for _, r := range v.Rules {
				if slices.ContainsFunc(r.Verbs, func(s string) bool { return s != "get" && s != "list" && s != "watch" }) && r.Resources[0] != "subjectaccessreviews" {
					t.Errorf("the ingress may change %v", r.Resources)
				}
				if slices.Contains(r.Resources, "secrets") {
					t.Error("the ingress reads Secrets cluster-wide")
				}
			}
		case *rbacv1.Role:
			if len(v.Rules) != 1 || !reflect.DeepEqual(v.Rules[0].ResourceNames, []string{IngressTLSSecret}) {
				t.Errorf("role %+v", v.Rules)
			}
		case *corev1.Service:
			if v.Spec.Type != corev1.ServiceTypeNodePort || v.Spec.Selector["app.kubernetes.io/name"] != IngressName {
				t.Errorf("service %+v", v.Spec)
			}
		}
		kinds = append(kinds, reflect.TypeOf(o).Elem().Name())
	}
	if strings.Join(kinds, " ") != "ServiceAccount ClusterRole ClusterRoleBinding Role RoleBinding IngressClass Service" {
		t.Errorf("objects: %v", kinds)
	}
}

// TestIngressCertificates: a new install keeps its CA key and issues *.<domain>; a second run keeps
// it; an install made before the key was kept copies the platform's certificate when it covers the
// domain, and says what to do when it does not.
func TestIngressCertificates(t *testing.T) {
	ctx := context.Background()
	now := time.Now()
	st := &store.Store{Namespace: "p", Kube: fake.NewClientset()}
	ca, err := ensureTLS(ctx, st, "p", "devtool.localhost", now)
	if err != nil {
		t.Fatal(err)
	}
	if err := ensureIngressTLS(ctx, st, "p", "apps.example", now); err != nil {
		t.Fatal(err)
	}
	sec := getSecret(t, st, IngressTLSSecret)
	leaf := parseCert(t, sec.Data["tls.crt"])
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	for _, h := range []string{"web-alice.apps.example", "apps.example"} {
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: h}); err != nil {
			t.Errorf("%s: %v", h, err)
		}
	}
	if err := ensureIngressTLS(ctx, st, "p", "apps.example", now); err != nil || string(getSecret(t, st, IngressTLSSecret).Data["tls.crt"]) != string(sec.Data["tls.crt"]) {
		t.Errorf("second run changed the certificate: %v", err)
	}
	// a new platform CA (the host changed): the install's own certificate is issued again
	if _, err := ensureTLS(ctx, st, "p", "platform.example", now); err != nil {
		t.Fatal(err)
	}
	if err := ensureIngressTLS(ctx, st, "p", "apps.example", now); err != nil {
		t.Fatal(err)
	}
	if !signedBy(getSecret(t, st, IngressTLSSecret).Data["tls.crt"], getSecret(t, st, CASecret).Data["ca.crt"]) {
		t.Error("not issued again by the new CA")
	}
	// an admin's own certificate (not labelled by the install) is kept
	own, err := NewCerts([]string{"*.apps.example", "apps.example"}, now)
	if err != nil {
		t.Fatal(err)
	}
	sec = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: IngressTLSSecret, Namespace: "p"}, Data: map[string][]byte{"tls.crt": own.Cert, "tls.key": own.Key}}
	if _, err := st.Kube.CoreV1().Secrets("p").Update(ctx, sec, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := ensureIngressTLS(ctx, st, "p", "apps.example", now); err != nil || string(getSecret(t, st, IngressTLSSecret).Data["tls.crt"]) != string(own.Cert) {
		t.Errorf("the admin's certificate was replaced: %v", err)
	}
	auth1, err := ensureAuthKeys(ctx, st, "p")
	if err != nil {
		t.Fatal(err)
	}
	auth2, _ := ensureAuthKeys(ctx, st, "p")
	if hashOf(auth1) != hashOf(auth2) || len(auth1[keyTicket]) != 64 || len(auth1[keyTicketPublic]) != 32 {
		t.Error("auth keys not kept")
	}

	// an older install: no CA key
	old := &store.Store{Namespace: "p", Kube: fake.NewClientset()}
	if _, err := ensureTLS(ctx, old, "p", "devtool.localhost", now); err != nil {
		t.Fatal(err)
	}
	if err := old.Kube.CoreV1().Secrets("p").Delete(ctx, CASecret, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := ensureIngressTLS(ctx, old, "p", "devtool.localhost", now); err != nil {
		t.Fatal(err)
	}
	if string(getSecret(t, old, IngressTLSSecret).Data["tls.crt"]) != string(getSecret(t, old, TLSSecret).Data["tls.crt"]) {
		t.Error("the platform's certificate was not reused")
	}
	err = ensureIngressTLS(ctx, old, "p", "other.example", now)
	if err == nil || !strings.Contains(err.Error(), "delete Secret p/"+TLSSecret) {
		t.Errorf("another domain without the CA key: %v", err)
	}
}

func getSecret(t *testing.T, st *store.Store, name string) *corev1.Secret {
	t.Helper()
	s, err := st.Kube.CoreV1().Secrets(st.Namespace).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func parseCert(t *testing.T, p []byte) *x509.Certificate {
	t.Helper()
	b, _ := pem.Decode(p)
	if b == nil {
		t.Fatal("no PEM")
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

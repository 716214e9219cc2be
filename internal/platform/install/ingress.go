package install

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/devtool/devtool/internal/platform/store"
)

// The platform's own ingress (internal/platform/ingress, `devtool-platform ingress`).
const (
	IngressName      = "devtool-ingress"
	IngressTLSSecret = "devtool-ingress-tls"
	// IngressController is the spec.controller of the platform's IngressClass.
	IngressController = "devtool.dev/ingress"
	// IngressHealthPort serves /healthz and /readyz over plain HTTP (the pod's network only).
	IngressHealthPort = 8081
)

var ingressLabels = map[string]string{"app.kubernetes.io/name": IngressName}

// DefaultIngressClass is the class an install in namespace ns serves: "devtool" for the default
// namespace, "devtool-<ns>" for another, so two installs side by side never serve each other's
// Ingresses.
func DefaultIngressClass(ns string) string {
	if ns == store.DefaultNamespace {
		return "devtool"
	}
	return "devtool-" + ns
}

// IngressArgs are the flags the ingress pods get.
type IngressArgs struct {
	Class, Domain, PlatformURL string
	Replicas                   int32
	ConfigHash                 string
	// Wake lets the ingress wake sleeping previews: it asks the platform's Service, signing with the
	// wake key (WebhookSecret's WakeKey) and trusting the platform's CA.
	Wake bool
}

// ingressObjects are the ingress's RBAC, IngressClass and Service (applied first: the Service's
// node port is the endpoints' port).
func ingressObjects(ns, class string) []any {
	tm := func(kind string) metav1.TypeMeta {
		return metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: kind}
	}
	subject := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: IngressName, Namespace: ns}}
	clusterName := IngressName + "-" + ns
	read := []string{"get", "list", "watch"}
	return []any{
		&corev1.ServiceAccount{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"}, ObjectMeta: meta(IngressName, ns)},
		// Cluster-wide: read what routing needs, and ask the API server who may read a namespace.
		&rbacv1.ClusterRole{TypeMeta: tm("ClusterRole"), ObjectMeta: meta(clusterName, ""), Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"networking.k8s.io"}, Resources: []string{"ingresses", "ingressclasses"}, Verbs: read},
			{APIGroups: []string{""}, Resources: []string{"services", "namespaces"}, Verbs: read},
			{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: read},
			{APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"subjectaccessreviews"}, Verbs: []string{"create"}},
		}},
		&rbacv1.ClusterRoleBinding{TypeMeta: tm("ClusterRoleBinding"), ObjectMeta: meta(clusterName, ""),
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: clusterName}, Subjects: subject},
		// In the platform's namespace: its certificate only.
		&rbacv1.Role{TypeMeta: tm("Role"), ObjectMeta: meta(IngressName, ns), Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: read, ResourceNames: []string{IngressTLSSecret}},
		}},
		&rbacv1.RoleBinding{TypeMeta: tm("RoleBinding"), ObjectMeta: meta(IngressName, ns),
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: IngressName}, Subjects: subject},
		&networkingv1.IngressClass{TypeMeta: metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "IngressClass"},
			ObjectMeta: meta(class, ""), Spec: networkingv1.IngressClassSpec{Controller: IngressController}},
		nodePortService(ns, IngressName, ingressLabels),
	}
}

// ingressDeployment runs `devtool-platform ingress` with the platform's Deployment shape.
func ingressDeployment(ns, image string, a IngressArgs) any {
	args := []string{"ingress", "--namespace", ns, "--class", a.Class, "--domain", a.Domain,
		"--listen", fmt.Sprintf(":%d", Port), "--health-listen", fmt.Sprintf(":%d", IngressHealthPort),
		"--tls-secret", IngressTLSSecret, "--platform-url", strings.TrimSuffix(a.PlatformURL, "/"),
		"--ticket-public-key", "/auth/" + keyTicketPublic, "--cookie-key", "/auth/" + keyCookie}
	secrets := []secretMount{{volume: "auth", secret: AuthSecret, path: "/auth", items: []string{keyTicketPublic, keyCookie}}}
	if a.Wake {
		args = append(args, "--wake-url", "https://"+Name+"."+ns+".svc", "--wake-key", "/wake/"+WakeKey, "--wake-ca", "/platform-ca/ca.crt")
		secrets = append(secrets, secretMount{volume: "wake", secret: WebhookSecret, path: "/wake", items: []string{WakeKey}},
			secretMount{volume: "platform-ca", secret: TLSSecret, path: "/platform-ca", items: []string{"ca.crt"}})
	}
	return deployment(ns, podSpec{
		name: IngressName, container: "ingress", image: image, replicas: a.Replicas, args: args, serviceAccount: IngressName,
		labels: ingressLabels, port: Port,
		extraPorts: []corev1.ContainerPort{{Name: "health", ContainerPort: IngressHealthPort}},
		probe:      &corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromInt32(IngressHealthPort), Scheme: corev1.URISchemeHTTP},
		configHash: a.ConfigHash,
		secrets:    secrets,
		// in every request's path: its CPU weight must not starve it beside busy neighbours
		cpuRequest: "100m",
	})
}

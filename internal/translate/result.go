package translate

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/devtool/devtool/internal/labels"
)

// This file is the contract between translation (Compose model -> objects, pure) and the deploy
// engine (apply, wait in depends_on order, prune, destroy). Change it only with both sides.

// Options are the inputs translation needs besides the Compose model.
type Options struct {
	Name          string // environment name: the value of dev.devtool/deployed-by
	Namespace     string // every namespaced object gets it
	ClusterDomain string // public domain for Ingress hosts; empty: Ingresses carry no host
	// IngressClass is set as the Ingresses' ingressClassName ("" leaves it to the cluster's default).
	IngressClass string
	// EndpointPort is the HTTPS port endpoints answer on (0: 443), for their URLs.
	EndpointPort int
}

// EndpointURL is an endpoint's URL: https://<host>[:<port>]<path> (the port only when not 443).
func EndpointURL(host string, port int, path string) string {
	if path == "" {
		path = "/"
	}
	if port != 0 && port != 443 {
		return fmt.Sprintf("https://%s:%d%s", host, port, path)
	}
	return "https://" + host + path
}

// Result is everything a Compose project becomes.
type Result struct {
	// Objects are typed client-go objects (*appsv1.Deployment, *appsv1.StatefulSet, *batchv1.Job,
	// *corev1.Service, *corev1.PersistentVolumeClaim, *networkingv1.Ingress) with TypeMeta
	// (apiVersion, kind), name, namespace and the devtool labels set, ready for server-side apply.
	// Order: Secrets and ConfigMaps (Compose secrets and configs), PVCs, Services, workloads, Ingresses.
	// (*corev1.Secret and *corev1.ConfigMap are kinds deploy must apply and prune too.)
	Objects []runtime.Object
	// Services describes each Compose service's workload, in a dependency order (dependencies first).
	Services []Service
	// Endpoints are the public URLs the Ingresses serve.
	Endpoints []Endpoint
	// Warnings are things the user should know that did not stop translation.
	Warnings []string
}

// Workload kinds a Compose service becomes.
const (
	KindDeployment  = "Deployment"
	KindStatefulSet = "StatefulSet"
	KindJob         = "Job"
)

// depends_on conditions.
const (
	ConditionStarted   = "service_started"
	ConditionHealthy   = "service_healthy"
	ConditionCompleted = "service_completed_successfully"
)

// Service is one Compose service as deployed.
type Service struct {
	Name           string // the Compose service name, also the workload's and Service's name
	Kind           string // KindDeployment, KindStatefulSet or KindJob
	Replicas       int32
	DependsOn      []Dependency
	Ports          []int32 // container ports, for the TCP check of service_healthy without a healthcheck
	HasHealthcheck bool    // a readiness probe exists
	// PodSelector selects the service's pods (matchLabels of the workload), as a label selector string.
	PodSelector string
}

// Dependency is one depends_on entry.
type Dependency struct {
	Service   string
	Condition string // one of the Condition constants
}

// Endpoint is one public route.
type Endpoint struct {
	Name    string // the Ingress name
	URL     string // https://host/path, or "" when there is no cluster domain
	Host    string
	Path    string
	Service string
	Port    int32
}

// Labels every object carries: the names of internal/labels, the one place they are defined.
const (
	LabelDeployedBy = labels.DeployedBy
	LabelManagedBy  = labels.ManagedBy
	ManagedByValue  = labels.ManagedByValue
	// AnnotationPolicy with value PolicyKeep protects an object from destroy.
	AnnotationPolicy = labels.Policy
	PolicyKeep       = labels.PolicyKeep
	// AnnotationPrivate "true" makes an endpoint ask for a platform login (the platform's ingress).
	AnnotationPrivate = labels.Private
	// AnnotationUpdate (set through service labels) selects the update strategy.
	AnnotationUpdate = "dev.devtool/update"
)

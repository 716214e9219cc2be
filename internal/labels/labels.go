// Package labels names the labels and annotations that mark what devtool owns. It is a leaf so
// every package (kube, translate, deploy, dev) uses one definition.
package labels

const (
	// DeployedBy names the environment an object belongs to; destroy deletes by it.
	DeployedBy = "dev.devtool/deployed-by"
	// DeployedNamespace names, on a cluster-scoped object a deploy command created, the namespace of
	// the environment that created it: destroy deletes cluster-scoped objects carrying both
	// DeployedBy and DeployedNamespace (two namespaces may each have an environment of one name).
	DeployedNamespace = "dev.devtool/deployed-namespace"
	// ManagedBy is the well-known label; its value is ManagedByValue.
	ManagedBy      = "app.kubernetes.io/managed-by"
	ManagedByValue = "devtool"
	// Policy annotation: PolicyKeep makes destroy leave the object alone.
	Policy     = "dev.devtool/policy"
	PolicyKeep = "keep"
	// Private on an Ingress ("true"/"false") asks the platform's ingress for a platform login and a
	// member of the namespace before serving its routes; on a Namespace, the default of its
	// Ingresses. A Compose service's label or an endpoint's label sets it.
	Private = "dev.devtool/private"
	// ClientUserAgent is the User-Agent of devtool's own API requests. The labelling proxy keeps a
	// DeployedBy value such a request sets itself: a `devtool deploy --name other` run by a
	// devtool.yml command labels its objects (and its selectors) for its own environment.
	ClientUserAgent = "devtool"
)

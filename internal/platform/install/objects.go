// Package install puts the platform into a cluster: its image (the running binary on an empty base,
// pushed to a registry without any daemon), its CRDs, RBAC, TLS Secret, Deployment and Service, and
// the first admin. `devtool-platform install` runs it; deploy/platform/devtool.yml runs that command,
// so `devtool deploy` installs the platform and `devtool destroy` removes what it labelled.
package install

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/devtool/devtool/internal/labels"
	"github.com/devtool/devtool/internal/platform/api"
	"github.com/devtool/devtool/internal/platform/store"
)

// Name of the platform's ServiceAccount, roles, Deployment, Service and TLS Secret.
const (
	Name      = "devtool-platform"
	TLSSecret = "devtool-platform-tls"
	Port      = 8443
	// OIDCSecretName holds the OpenID Connect provider's configuration (sso.SecretName).
	OIDCSecretName = "devtool-platform-oidc"
	// WebhookSecret holds the secret (key WebhookSecretKey) pull-request webhooks are signed with.
	WebhookSecret    = "devtool-platform-webhook"
	WebhookSecretKey = "secret"
	// WakeKey (in WebhookSecret) signs the ingress's requests to wake a sleeping preview.
	WakeKey = "wake"
	// CASecret keeps the platform CA's key (ca.crt, ca.key), to issue the ingress's certificate.
	CASecret = "devtool-platform-ca"
	// AuthSecret holds the keys of private endpoints: the platform signs tickets with ticket.key,
	// the ingress checks them with ticket.pub and signs its cookies with cookie.key.
	AuthSecret = "devtool-endpoint-auth"
)

// Keys of AuthSecret.
const (
	keyTicket       = "ticket.key"
	keyTicketPublic = "ticket.pub"
	keyCookie       = "cookie.key"
)

var appLabels = map[string]string{"app.kubernetes.io/name": Name}

func crd(kind, plural string, spec map[string]any, status map[string]any, columns []map[string]any) map[string]any {
	props := map[string]any{
		"apiVersion": map[string]any{"type": "string"},
		"kind":       map[string]any{"type": "string"},
		"metadata":   map[string]any{"type": "object"},
		// Unknown fields are kept: an older replica (or another install's CRD) never prunes what a newer one wrote.
		"spec":   map[string]any{"type": "object", "properties": spec, "x-kubernetes-preserve-unknown-fields": true},
		"status": map[string]any{"type": "object", "properties": status, "x-kubernetes-preserve-unknown-fields": true},
	}
	return map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		// Shared by every install in the cluster: destroying one install must not delete them (and
		// with them every other install's users and tokens).
		"metadata": map[string]any{"name": plural + "." + store.Group, "annotations": map[string]any{labels.Policy: labels.PolicyKeep}},
		"spec": map[string]any{
			"group": store.Group, "scope": "Namespaced",
			"names": map[string]any{"kind": kind, "plural": plural, "singular": lower(kind), "listKind": kind + "List", "categories": []any{"devtool"}},
			"versions": []any{map[string]any{
				"name": store.Version, "served": true, "storage": true,
				"schema":                   map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "properties": props}},
				"additionalPrinterColumns": columns,
			}},
		},
	}
}

func lower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// CRDs are the platform's custom resource definitions (User, AccessToken, Session, PipelineRun, Preview).
func CRDs() []map[string]any {
	str := map[string]any{"type": "string"}
	dt := map[string]any{"type": "string", "format": "date-time"}
	num := map[string]any{"type": "integer"}
	boolean := map[string]any{"type": "boolean"}
	strs := map[string]any{"type": "array", "items": str}
	return []map[string]any{
		crd("PipelineRun", "pipelineruns",
			map[string]any{"namespace": str, "pipeline": str, "number": num, "action": str, "user": str, "repository": str,
				"branch": str, "file": str, "varNames": strs, "volumes": boolean, "timeoutSeconds": num, "job": str, "anchor": str, "preview": str},
			map[string]any{"phase": str, "started": dt, "finished": dt, "exitCode": num, "failedStep": str, "message": str,
				"commit": str, "cloneMillis": num, "cleaned": boolean},
			[]map[string]any{{"name": "Namespace", "type": "string", "jsonPath": ".spec.namespace"}, {"name": "Pipeline", "type": "string", "jsonPath": ".spec.pipeline"},
				{"name": "Run", "type": "integer", "jsonPath": ".spec.number"}, {"name": "Action", "type": "string", "jsonPath": ".spec.action"},
				{"name": "User", "type": "string", "jsonPath": ".spec.user"}, {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
				{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}}),
		crd("Preview", "previews",
			map[string]any{"namespace": str, "scope": str, "repository": str, "branch": str, "sourceUrl": str, "file": str, "creator": str, "public": boolean},
			map[string]any{"status": str, "lastActivity": dt, "sleeping": boolean, "destroyReason": str},
			[]map[string]any{{"name": "Scope", "type": "string", "jsonPath": ".spec.scope"}, {"name": "Branch", "type": "string", "jsonPath": ".spec.branch"},
				{"name": "Creator", "type": "string", "jsonPath": ".spec.creator"}, {"name": "Status", "type": "string", "jsonPath": ".status.status"},
				{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}}),
		crd("User", "users",
			map[string]any{"admin": map[string]any{"type": "boolean"}, "passwordHash": str},
			map[string]any{"failedLogins": map[string]any{"type": "integer"}, "lockedUntil": dt},
			[]map[string]any{{"name": "Admin", "type": "boolean", "jsonPath": ".spec.admin"}}),
		crd("AccessToken", "accesstokens",
			map[string]any{"name": str, "owner": str, "hash": str, "expires": dt},
			map[string]any{"lastUsed": dt},
			[]map[string]any{{"name": "Owner", "type": "string", "jsonPath": ".spec.owner"}, {"name": "Expires", "type": "string", "jsonPath": ".spec.expires"}}),
		// A web UI session (internal/platform/store/sessions.go): the hash of its cookie's secret only.
		crd("Session", "sessions",
			map[string]any{"user": str, "hash": str, "expires": dt},
			map[string]any{"lastSeen": dt},
			[]map[string]any{{"name": "User", "type": "string", "jsonPath": ".spec.user"}, {"name": "Expires", "type": "string", "jsonPath": ".spec.expires"}}),
	}
}

func meta(name, ns string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app.kubernetes.io/part-of": Name}}
}

// sharedMeta is the metadata of a cluster-scoped object every install in the cluster uses (the
// membership roles): annotated dev.devtool/policy: keep, so destroying one install leaves it.
func sharedMeta(name string) metav1.ObjectMeta {
	m := meta(name, "")
	m.Annotations = map[string]string{labels.Policy: labels.PolicyKeep}
	return m
}

// membershipRoles are the ClusterRoles a membership binds (shared by every install in the cluster): owner, editor and viewer aggregate
// Kubernetes' own admin, edit and view (so an owner cannot change the namespace's quota or limits)
// plus the platform's additions: Leases (devtool's deploy lock) for editors and owners, and for
// owners the right to bind the three roles (so sharing works impersonating the owner).
func membershipRoles() []*rbacv1.ClusterRole {
	agg := func(role, builtin string) *rbacv1.ClusterRole {
		return &rbacv1.ClusterRole{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"},
			ObjectMeta: sharedMeta(store.RolePrefix + role),
			AggregationRule: &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{
				{MatchLabels: map[string]string{"rbac.authorization.k8s.io/aggregate-to-" + builtin: "true"}},
				{MatchLabels: map[string]string{"devtool.dev/aggregate-to-" + role: "true"}},
			}},
		}
	}
	extra := func(name string, to []string, rules []rbacv1.PolicyRule) *rbacv1.ClusterRole {
		m := sharedMeta(name)
		for _, r := range to {
			m.Labels["devtool.dev/aggregate-to-"+r] = "true"
		}
		return &rbacv1.ClusterRole{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"}, ObjectMeta: m, Rules: rules}
	}
	return []*rbacv1.ClusterRole{
		agg(api.RoleOwner, "admin"), agg(api.RoleEditor, "edit"), agg(api.RoleViewer, "view"),
		extra("devtool-aggregate-edit", []string{api.RoleOwner, api.RoleEditor}, []rbacv1.PolicyRule{
			{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
		}),
		// Pushing to (create) and deleting from the platform registry's <namespace>/... repositories:
		// checked by its proxy with a SubjectAccessReview (internal/platform/registryproxy). A role of
		// its own, so an install of an older platform (which applies the roles above) leaves it be.
		extra("devtool-aggregate-images", []string{api.RoleOwner, api.RoleEditor}, []rbacv1.PolicyRule{
			{APIGroups: []string{store.Group}, Resources: []string{"images"}, Verbs: []string{"create", "delete"}},
		}),
		extra("devtool-aggregate-owner", []string{api.RoleOwner}, []rbacv1.PolicyRule{
			{APIGroups: []string{"rbac.authorization.k8s.io"}, Resources: []string{"clusterroles"}, Verbs: []string{"bind"},
				ResourceNames: []string{store.RolePrefix + api.RoleOwner, store.RolePrefix + api.RoleEditor, store.RolePrefix + api.RoleViewer}},
		}),
	}
}

// platformRBAC are the platform's own rights: cluster-wide only what no user may do (namespaces,
// their quota, limits and membership bindings, reading them for the caches); in its own namespace
// its users' ServiceAccounts (impersonation, tokens) and its custom resources.
func platformRBAC(ns string) []any {
	tm := func(kind string) metav1.TypeMeta {
		return metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: kind}
	}
	subject := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: Name, Namespace: ns}}
	// The cluster-scoped role and binding carry the namespace, so two installs (a test's beside the
	// shared one) never rebind each other's ServiceAccount.
	clusterName := Name + "-" + ns
	return []any{
		&corev1.ServiceAccount{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"}, ObjectMeta: meta(Name, ns)},
		&rbacv1.ClusterRole{TypeMeta: tm("ClusterRole"), ObjectMeta: meta(clusterName, ""), Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "list", "watch", "create", "delete"}},
			{APIGroups: []string{""}, Resources: []string{"resourcequotas", "limitranges"}, Verbs: []string{"get", "create"}},
			{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create"}},
			{APIGroups: []string{"rbac.authorization.k8s.io"}, Resources: []string{"rolebindings"}, Verbs: []string{"get", "list", "watch", "create", "delete"}},
			{APIGroups: []string{"rbac.authorization.k8s.io"}, Resources: []string{"clusterroles"}, Verbs: []string{"bind"},
				ResourceNames: []string{store.RolePrefix + api.RoleOwner, store.RolePrefix + api.RoleEditor, store.RolePrefix + api.RoleViewer}},
			// pipelines: the leader follows the runs' Jobs and reads their pods' results (Jobs and
			// Secrets are created and deleted as the run's user, not with these rights)
			{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch"}},
		}},
		&rbacv1.ClusterRoleBinding{TypeMeta: tm("ClusterRoleBinding"), ObjectMeta: meta(clusterName, ""),
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: clusterName}, Subjects: subject},
		&rbacv1.Role{TypeMeta: tm("Role"), ObjectMeta: meta(Name, ns), Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"serviceaccounts"}, Verbs: []string{"get", "create", "delete", "impersonate"}},
			{APIGroups: []string{""}, Resources: []string{"serviceaccounts/token"}, Verbs: []string{"create"}},
			// secrets: users' stored secrets (a removed user's Secret is deleted with it), logins in
			// progress, the signing key, the OIDC configuration, the TLS Secrets
			{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list", "create", "update", "delete"}},
			// The analytics days and setting (internal/platform/analytics) and the quota defaults
			// admins set in the web UI (store.SettingsName).
			{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch", "create", "update", "delete"}},
			// the leader elections' Leases (the platform's sweep; the pipeline and preview controllers)
			{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "create", "update"}},
			{APIGroups: []string{store.Group}, Resources: []string{"users", "accesstokens", "sessions", "pipelineruns", "previews"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"}},
		}},
		&rbacv1.RoleBinding{TypeMeta: tm("RoleBinding"), ObjectMeta: meta(Name, ns),
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: Name}, Subjects: subject},
	}
}

// ServeArgs are the flags the pods' `devtool-platform serve` gets.
type ServeArgs struct {
	Namespace, APIServer, Domain, Registry string
	Analytics                              bool // serve --analytics
	// IngressClass and EndpointPort are what /api/v1/info tells the CLI about endpoints.
	IngressClass string
	EndpointPort int32
	// ConfigHash changes when a Secret the pods read at start changes, so they restart.
	ConfigHash                 string
	ExternalURL, MinCLIVersion string
	// Builder is the hosted BuildKit's address; BuilderCA mounts the builder CA (BuilderCASecret)
	// for signing users' client certificates.
	Builder   string
	BuilderCA bool
	// RunnerImage enables pipelines; PreviewTTL and PreviewSleep are the previews' idle limits.
	RunnerImage string
	// ForwardImage is the platform's image, run beside a pipeline's runner for the build
	// service's loopback addresses (serve --forward-image).
	ForwardImage             string
	PreviewTTL, PreviewSleep string
}

func workload(ns, image string, replicas int32, a ServeArgs) []any {
	args := []string{"serve", "--namespace", ns, "--listen", fmt.Sprintf(":%d", Port),
		"--tls-cert", "/tls/tls.crt", "--tls-key", "/tls/tls.key", "--api-server", a.APIServer, "--domain", a.Domain,
		"--ticket-key", "/auth/" + keyTicket}
	if a.Registry != "" {
		args = append(args, "--registry", a.Registry)
	}
	if a.Analytics {
		args = append(args, "--analytics")
	}
	if a.IngressClass != "" {
		args = append(args, "--ingress-class", a.IngressClass)
	}
	if a.EndpointPort != 0 {
		args = append(args, "--endpoint-port", fmt.Sprint(a.EndpointPort))
	}
	if a.ExternalURL != "" {
		args = append(args, "--external-url", a.ExternalURL)
	}
	if a.MinCLIVersion != "" {
		args = append(args, "--min-cli-version", a.MinCLIVersion)
	}
	secrets := []secretMount{
		{volume: "tls", secret: TLSSecret, path: "/tls"},
		{volume: "auth", secret: AuthSecret, path: "/auth", items: []string{keyTicket}},
		{volume: "webhook", secret: WebhookSecret, path: "/webhook"},
	}
	if a.Builder != "" {
		args = append(args, "--builder", a.Builder)
	}
	if a.BuilderCA {
		args = append(args, "--builder-ca-dir", BuilderCADir)
		secrets = append(secrets, secretMount{volume: "builder-ca", secret: BuilderCASecret, path: BuilderCADir})
	}
	if a.RunnerImage != "" {
		args = append(args, "--runner-image", a.RunnerImage, "--runner-ca-file", "/tls/ca.crt")
		if a.ForwardImage != "" {
			args = append(args, "--forward-image", a.ForwardImage)
		}
	}
	args = append(args, "--webhook-secret-file", "/webhook/"+WebhookSecretKey, "--wake-key-file", "/webhook/"+WakeKey)
	if a.PreviewTTL != "" {
		args = append(args, "--preview-ttl", a.PreviewTTL)
	}
	if a.PreviewSleep != "" {
		args = append(args, "--preview-sleep-after", a.PreviewSleep)
	}
	dep := deployment(ns, podSpec{
		name: Name, container: "platform", image: image, replicas: replicas, args: args, serviceAccount: Name,
		labels: appLabels, port: Port,
		probe:      &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(Port), Scheme: corev1.URISchemeHTTPS},
		configHash: a.ConfigHash,
		secrets:    secrets,
	})
	return []any{dep, nodePortService(ns, Name, appLabels)}
}

// podSpec is what differs between the platform's Deployments (the API server and the ingress).
type podSpec struct {
	name, container, image string
	replicas               int32
	args                   []string
	serviceAccount         string
	labels                 map[string]string // the selector (immutable once applied)
	port                   int32             // the HTTPS port
	extraPorts             []corev1.ContainerPort
	probe                  *corev1.HTTPGetAction // readiness
	secrets                []secretMount
	configHash             string
	cpuRequest             string // default 10m
}

type secretMount struct {
	volume, secret, path string
	items                []string // keys mounted; empty = all
}

// deployment is the one shape of the platform's Deployments: run as nobody, read-only root, no
// capabilities, POD_NAME in the environment, small requests, Secrets mounted read-only.
func deployment(ns string, p podSpec) *appsv1.Deployment {
	no, yes := false, true
	uid := int64(65534)
	podLabels := map[string]string{"app.kubernetes.io/part-of": Name}
	for k, v := range p.labels {
		podLabels[k] = v
	}
	cpu := p.cpuRequest
	if cpu == "" {
		cpu = "10m"
	}
	var ann map[string]string
	if p.configHash != "" {
		ann = map[string]string{"devtool.dev/config-hash": p.configHash}
	}
	var vols []corev1.Volume
	var mounts []corev1.VolumeMount
	for _, s := range p.secrets {
		src := &corev1.SecretVolumeSource{SecretName: s.secret}
		for _, k := range s.items {
			src.Items = append(src.Items, corev1.KeyToPath{Key: k, Path: k})
		}
		vols = append(vols, corev1.Volume{Name: s.volume, VolumeSource: corev1.VolumeSource{Secret: src}})
		mounts = append(mounts, corev1.VolumeMount{Name: s.volume, MountPath: s.path, ReadOnly: true})
	}
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: meta(p.name, ns),
		Spec: appsv1.DeploymentSpec{
			Replicas: &p.replicas,
			Selector: &metav1.LabelSelector{MatchLabels: p.labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels, Annotations: ann},
				Spec: corev1.PodSpec{
					ServiceAccountName: p.serviceAccount,
					SecurityContext:    &corev1.PodSecurityContext{RunAsNonRoot: &yes, RunAsUser: &uid, RunAsGroup: &uid},
					Containers: []corev1.Container{{
						Name: p.container, Image: p.image, Args: p.args, ImagePullPolicy: corev1.PullIfNotPresent,
						Ports: append([]corev1.ContainerPort{{Name: "https", ContainerPort: p.port}}, p.extraPorts...),
						Env:   []corev1.EnvVar{{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}},
						Resources: corev1.ResourceRequirements{
							Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("32Mi")},
							Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")},
						},
						ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: p.probe}, PeriodSeconds: 2, FailureThreshold: 3},
						SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: &no, ReadOnlyRootFilesystem: &yes,
							Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
						VolumeMounts: mounts,
					}},
					Volumes: vols,
				},
			},
		},
	}
}

// nodePortService exposes a Deployment's HTTPS port as 443 and on a node port (loopback in the
// local cluster).
func nodePortService(ns, name string, selector map[string]string) *corev1.Service {
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: meta(name, ns),
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeNodePort,
			Selector: selector,
			Ports:    []corev1.ServicePort{{Name: "https", Port: 443, TargetPort: intstr.FromInt32(Port), Protocol: corev1.ProtocolTCP}},
		},
	}
}

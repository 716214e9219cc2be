package install

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/devtool/devtool/internal/platform/pki"
	"github.com/devtool/devtool/internal/platform/store"
)

// The hosted build service: a BuildKit StatefulSet (mTLS: clients need a certificate of the
// builder CA, which the API signs for users) and a registry StatefulSet (Debian's Distribution
// registry on its pod's loopback, behind `devtool-platform registry-proxy`, which lets members
// push into their namespaces' repositories), each with a NodePort Service. Their data (BuildKit's
// cache, the registry's blobs) is on PersistentVolumeClaims.
const (
	BuildKitName      = "devtool-buildkit"
	RegistryName      = "devtool-registry"
	BuildKitPort      = 1234
	RegistryPort      = 5000 // the Service's port (and the proxy's, in its pod)
	registryUpstream  = "127.0.0.1:5001"
	BuilderCASecret   = "devtool-builder-ca"   // ca.crt, ca.key: the platform signs client certificates with it
	BuildKitTLSSecret = "devtool-buildkit-tls" // tls.crt, tls.key (BuildKit's serving certificate), ca.crt (whom it trusts)
	// BuilderCADir is where the platform's pods mount BuilderCASecret.
	BuilderCADir = "/builder-ca"
)

// BuildService says how to run the hosted build service.
type BuildService struct {
	// BuildKitImage and RegistryImage are images to run; "" makes them from local binaries.
	BuildKitImage, RegistryImage string
	// BuildKitd, Runc and RegistryBin are the binaries the images are made of (buildkitd static;
	// runc with its shared libraries; Debian's docker-registry).
	BuildKitd, Runc, RegistryBin string
	// CacheSize and RegistrySize size the claims (default 20Gi and 10Gi).
	CacheSize, RegistrySize string
	// RegistryAddress and BuilderAddress are how users and the kubelet reach them
	// (host[:port], tcp://host:port); empty: 127.0.0.1:<node port>, the local cluster's loopback.
	RegistryAddress, BuilderAddress string
}

// buildImages makes (or takes) the BuildKit and registry images.
func buildImages(ctx context.Context, o *Options) (bk, reg string, err error) {
	bs := o.BuildService
	bk, reg = bs.BuildKitImage, bs.RegistryImage
	repo := strings.TrimSuffix(o.Registry, "/") + "/" + o.Namespace + "/"
	if bk == "" {
		if o.Registry == "" || bs.BuildKitd == "" || bs.Runc == "" {
			return "", "", fmt.Errorf("install: the build service needs --buildkit-image, or --registry with --buildkitd and --runc")
		}
		files, err := BinaryWithLibs(bs.BuildKitd, "usr/bin/buildkitd")
		if err != nil {
			return "", "", fmt.Errorf("buildkitd for the build service's image: %w (hack/buildkit/build.sh builds it; or install with --build-service=false)", err)
		}
		runc, err := BinaryWithLibs(bs.Runc, "usr/bin/runc")
		if err != nil {
			return "", "", fmt.Errorf("runc: %w", err)
		}
		files = append(files, runc...)
		files = append(files, ImageFile{Path: "etc/passwd", Mode: 0o644, Data: []byte("root:x:0:0:root:/root:/bin/false\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n")},
			ImageFile{Path: "etc/group", Mode: 0o644, Data: []byte("root:x:0:\nnogroup:x:65534:\n")})
		if bk, err = PushFiles(ctx, repo+BuildKitName, files, v1.Config{
			Entrypoint: []string{"/usr/bin/buildkitd"}, Env: []string{"PATH=/usr/bin:/bin"},
		}); err != nil {
			return "", "", err
		}
	}
	if reg == "" {
		if o.Registry == "" || bs.RegistryBin == "" {
			return "", "", fmt.Errorf("install: the build service needs --registry-image, or --registry with --registry-bin")
		}
		files, err := BinaryWithLibs(bs.RegistryBin, "usr/bin/registry")
		if err != nil {
			return "", "", fmt.Errorf("registry: %w", err)
		}
		if reg, err = PushFiles(ctx, repo+RegistryName, files, v1.Config{
			Entrypoint: []string{"/usr/bin/registry"}, Cmd: []string{"serve", "/etc/registry/config.yml"}, User: "65534:65534",
		}); err != nil {
			return "", "", err
		}
	}
	return bk, reg, nil
}

// ensureBuilderTLS makes the builder CA (kept once made) and BuildKit's serving certificate for
// hosts (renewed when it does not cover them, is not of the CA, or has less than 30 days left).
func ensureBuilderTLS(ctx context.Context, st *store.Store, ns string, hosts []string, now time.Time) (*pki.CA, error) {
	secrets := st.Kube.CoreV1().Secrets(ns)
	var ca *pki.CA
	sec, err := secrets.Get(ctx, BuilderCASecret, metav1.GetOptions{})
	switch {
	case err == nil:
		if ca, err = pki.ParseCA(sec.Data["ca.crt"], sec.Data["ca.key"]); err != nil {
			return nil, fmt.Errorf("secret %s/%s: %w", ns, BuilderCASecret, err)
		}
	case apierrors.IsNotFound(err):
		var key []byte
		if ca, key, err = pki.NewCA("devtool build service CA", now); err != nil {
			return nil, err
		}
		s := &corev1.Secret{ObjectMeta: meta(BuilderCASecret, ns), Data: map[string][]byte{"ca.crt": ca.CertPEM, "ca.key": key}}
		if _, err := secrets.Create(ctx, s, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
			return ensureBuilderTLS(ctx, st, ns, hosts, now) // another install made it: use that one
		} else if err != nil {
			return nil, fmt.Errorf("creating the builder CA: %w", err)
		}
	default:
		return nil, err
	}
	tlsSec, err := secrets.Get(ctx, BuildKitTLSSecret, metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, err
	}
	if err == nil && string(tlsSec.Data["ca.crt"]) == string(ca.CertPEM) && coversAll(ca, tlsSec.Data["tls.crt"], hosts, now) {
		return ca, nil
	}
	cert, key, cerr := ca.ServerCert(hosts, now)
	if cerr != nil {
		return nil, cerr
	}
	data := map[string][]byte{"tls.crt": cert, "tls.key": key, "ca.crt": ca.CertPEM}
	if err == nil {
		tlsSec.Data = data
		_, err = secrets.Update(ctx, tlsSec, metav1.UpdateOptions{})
	} else {
		_, err = secrets.Create(ctx, &corev1.Secret{ObjectMeta: meta(BuildKitTLSSecret, ns), Type: corev1.SecretTypeTLS, Data: data}, metav1.CreateOptions{})
	}
	if err != nil {
		return nil, fmt.Errorf("writing BuildKit's TLS Secret: %w", err)
	}
	return ca, nil
}

func coversAll(ca *pki.CA, cert []byte, hosts []string, now time.Time) bool {
	for _, h := range hosts {
		if !ca.Covers(cert, h, now, 30*24*time.Hour) {
			return false
		}
	}
	return true
}

// buildKitHosts are the names BuildKit's certificate covers: loopback (the local cluster's node
// port), its Service's names, and the host of BuilderAddress.
func buildKitHosts(ns, builderAddr string) []string {
	hosts := []string{"127.0.0.1", "localhost", BuildKitName, BuildKitName + "." + ns, BuildKitName + "." + ns + ".svc", BuildKitName + "." + ns + ".svc.cluster.local"}
	if h, _, err := net.SplitHostPort(strings.TrimPrefix(builderAddr, "tcp://")); err == nil && h != "" {
		found := false
		for _, x := range hosts {
			found = found || x == h
		}
		if !found {
			hosts = append(hosts, h)
		}
	}
	return hosts
}

func tcpNodePortService(name, ns string, port int32, target intstr.IntOrString) *corev1.Service {
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: meta(name, ns),
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeNodePort,
			Selector: map[string]string{"app.kubernetes.io/name": name},
			Ports:    []corev1.ServicePort{{Name: "tcp", Port: port, TargetPort: target, Protocol: corev1.ProtocolTCP}},
		},
	}
}

// buildServiceServices are the two NodePort Services, applied first: their node ports name the
// registry and the builder.
func buildServiceServices(ns string) []any {
	return []any{
		tcpNodePortService(BuildKitName, ns, BuildKitPort, intstr.FromInt32(BuildKitPort)),
		tcpNodePortService(RegistryName, ns, RegistryPort, intstr.FromInt32(RegistryPort)),
	}
}

// buildServiceRBAC: the registry's proxy asks the API server who a token is (TokenReview) and
// whether that user may push (SubjectAccessReview): Kubernetes' system:auth-delegator role. The
// binding is named per namespace, as the platform's own.
func buildServiceRBAC(ns string) []any {
	tm := func(kind string) metav1.TypeMeta {
		return metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: kind}
	}
	return []any{
		&corev1.ServiceAccount{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"}, ObjectMeta: meta(RegistryName, ns)},
		&corev1.ServiceAccount{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"}, ObjectMeta: meta(BuildKitName, ns)},
		&rbacv1.ClusterRoleBinding{TypeMeta: tm("ClusterRoleBinding"), ObjectMeta: meta(RegistryName+"-"+ns, ""),
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:auth-delegator"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: RegistryName, Namespace: ns}}},
	}
}

// buildServiceWorkloads are the ConfigMaps and StatefulSets. registryHost is the registry as users
// name it; when it is a loopback address, BuildKit's pod gets a forwarder on that address to the
// registry's Service, so an image name means the same registry inside the pod as on the node.
func buildServiceWorkloads(ns string, bs BuildService, bkImage, regImage, platformImage, registryHost string) []any {
	no, yes := false, true
	root, nobody := int64(0), int64(65534)
	cacheSize, regSize := bs.CacheSize, bs.RegistrySize
	if cacheSize == "" {
		cacheSize = "20Gi"
	}
	if regSize == "" {
		regSize = "10Gi"
	}
	toml := fmt.Sprintf(`# devtool's hosted build service (internal/platform/install/buildsvc.go)
root = "/var/lib/buildkit"
[log]
  format = "text"
[grpc]
  address = ["tcp://0.0.0.0:%d"]
  [grpc.tls]
    cert = "/tls/tls.crt"
    key = "/tls/tls.key"
    ca = "/tls/ca.crt"
[worker.oci]
  enabled = true
  binary = "/usr/bin/runc"
  snapshotter = "auto"
  # RUN steps share the pod's network: the forwarder below, the cluster's Services, nothing more
  networkMode = "host"
  gc = true
  gckeepstorage = "10GB"
[worker.containerd]
  enabled = false
[registry.%q]
  http = true
`, BuildKitPort, registryHost)
	regConfig := fmt.Sprintf(`version: 0.1
log: {level: info, formatter: json, accesslog: {disabled: true}}
storage:
  filesystem: {rootdirectory: /var/lib/registry}
  delete: {enabled: true}
  maintenance: {uploadpurging: {enabled: true, age: 168h, interval: 24h, dryrun: false}}
http:
  addr: %q
  relativeurls: true
  headers: {X-Content-Type-Options: [nosniff]}
health: {storagedriver: {enabled: false}}
`, registryUpstream)
	cm := func(name, key, data string) *corev1.ConfigMap {
		return &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}, ObjectMeta: meta(name, ns), Data: map[string]string{key: data}}
	}
	labels := func(name string) map[string]string {
		return map[string]string{"app.kubernetes.io/name": name, "app.kubernetes.io/part-of": Name}
	}
	claim := func(size string) []corev1.PersistentVolumeClaim {
		return []corev1.PersistentVolumeClaim{{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
			ObjectMeta: metav1.ObjectMeta{Name: "data", Labels: map[string]string{"app.kubernetes.io/part-of": Name}},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}},
			},
		}}
	}
	one := int32(1)
	tcpProbe := func(port int32) *corev1.Probe {
		return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(port)}}, PeriodSeconds: 2, FailureThreshold: 3}
	}
	restricted := &corev1.SecurityContext{AllowPrivilegeEscalation: &no, ReadOnlyRootFilesystem: &yes, RunAsNonRoot: &yes, RunAsUser: &nobody, RunAsGroup: &nobody,
		Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}

	bkContainers := []corev1.Container{{
		Name: "buildkitd", Image: bkImage, ImagePullPolicy: corev1.PullIfNotPresent,
		Args:  []string{"--config", "/etc/buildkit/buildkitd.toml"},
		Ports: []corev1.ContainerPort{{Name: "grpc", ContainerPort: BuildKitPort}},
		// BuildKit runs each RUN step in its own container (runc): that needs root and the
		// privileges of a container runtime. The pod sees no ServiceAccount token.
		SecurityContext: &corev1.SecurityContext{Privileged: &yes, RunAsUser: &root},
		Resources:       corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")}},
		ReadinessProbe:  tcpProbe(BuildKitPort),
		VolumeMounts: []corev1.VolumeMount{
			{Name: "config", MountPath: "/etc/buildkit", ReadOnly: true}, {Name: "tls", MountPath: "/tls", ReadOnly: true},
			{Name: "data", MountPath: "/var/lib/buildkit"}, {Name: "run", MountPath: "/run"}, {Name: "tmp", MountPath: "/tmp"},
		},
	}}
	if rules := LoopbackForwards(ns, "", registryHost); len(rules) > 0 {
		bkContainers = append(bkContainers, corev1.Container{
			Name: "registry-forward", Image: platformImage, ImagePullPolicy: corev1.PullIfNotPresent,
			Args:            append([]string{"forward"}, rules...),
			SecurityContext: restricted,
			Resources:       corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("5m"), corev1.ResourceMemory: resource.MustParse("16Mi")}},
		})
	}
	bk := &appsv1.StatefulSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"},
		ObjectMeta: meta(BuildKitName, ns),
		Spec: appsv1.StatefulSetSpec{
			Replicas: &one, ServiceName: BuildKitName,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": BuildKitName}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels(BuildKitName)},
				Spec: corev1.PodSpec{
					ServiceAccountName: BuildKitName, AutomountServiceAccountToken: &no,
					Containers: bkContainers,
					Volumes: []corev1.Volume{
						{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: BuildKitName}}}},
						{Name: "tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: BuildKitTLSSecret}}},
						{Name: "run", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
						{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
					},
				},
			},
			VolumeClaimTemplates: claim(cacheSize),
		},
	}
	// The proxy's token: projected into its container only (the registry container has none).
	expiry := int64(3600)
	reg := &appsv1.StatefulSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"},
		ObjectMeta: meta(RegistryName, ns),
		Spec: appsv1.StatefulSetSpec{
			Replicas: &one, ServiceName: RegistryName,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": RegistryName}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels(RegistryName)},
				Spec: corev1.PodSpec{
					ServiceAccountName: RegistryName, AutomountServiceAccountToken: &no,
					SecurityContext: &corev1.PodSecurityContext{FSGroup: &nobody},
					Containers: []corev1.Container{
						{
							Name: "registry", Image: regImage, ImagePullPolicy: corev1.PullIfNotPresent,
							SecurityContext: restricted,
							Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("32Mi")},
								Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("512Mi")}},
							VolumeMounts: []corev1.VolumeMount{{Name: "config", MountPath: "/etc/registry", ReadOnly: true}, {Name: "data", MountPath: "/var/lib/registry"}},
						},
						{
							Name: "proxy", Image: platformImage, ImagePullPolicy: corev1.PullIfNotPresent,
							Args:            []string{"registry-proxy", "--listen", fmt.Sprintf(":%d", RegistryPort), "--upstream", "http://" + registryUpstream},
							Ports:           []corev1.ContainerPort{{Name: "registry", ContainerPort: RegistryPort}},
							SecurityContext: restricted,
							Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("32Mi")},
								Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")}},
							ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(RegistryPort)}}, PeriodSeconds: 2},
							VolumeMounts:   []corev1.VolumeMount{{Name: "token", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true}},
						},
					},
					Volumes: []corev1.Volume{
						{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: RegistryName}}}},
						{Name: "token", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
							{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: &expiry}},
							{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"},
								Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
							{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "namespace",
								FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}}}},
						}}}},
					},
				},
			},
			VolumeClaimTemplates: claim(regSize),
		},
	}
	return []any{cm(BuildKitName, "buildkitd.toml", toml), cm(RegistryName, "config.yml", regConfig), bk, reg}
}

// LoopbackForwards are the `devtool-platform forward` rules (LISTEN=TO) a pod of the cluster needs
// for the build service's addresses to mean there what they mean on the node: builder
// (tcp://HOST:PORT) and registry (HOST:PORT), when on loopback (the local cluster's node ports), are
// relayed to their Services in the platform's namespace ns. Addresses not on loopback need no rule;
// "" is skipped. A pipeline's Job runs `devtool-platform forward` with these (and one for the
// platform's own URL) as a sidecar.
func LoopbackForwards(ns, builder, registry string) []string {
	var rules []string
	add := func(addr, svc string, port int) {
		if addr == "" || !isLoopbackHost(addr) {
			return
		}
		_, p, err := net.SplitHostPort(addr)
		if err != nil {
			return
		}
		rules = append(rules, fmt.Sprintf("127.0.0.1:%s=%s.%s.svc.cluster.local:%d", p, svc, ns, port))
	}
	add(strings.TrimPrefix(builder, "tcp://"), BuildKitName, BuildKitPort)
	add(registry, RegistryName, RegistryPort)
	return rules
}

func isLoopbackHost(hostport string) bool {
	h := hostport
	if x, _, err := net.SplitHostPort(hostport); err == nil {
		h = x
	}
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// DefaultBuildKitd is where hack/buildkit/build.sh leaves buildkitd.
func DefaultBuildKitd() string {
	cache := os.Getenv("XDG_CACHE_HOME")
	if cache == "" {
		home, _ := os.UserHomeDir()
		cache = home + "/.cache"
	}
	return cache + "/devtool-tools/buildkit-v0.33.1/buildkitd"
}

func itoa(n int32) string { return strconv.Itoa(int(n)) }

// Package dev is the development-container lifecycle: the mirror of a workload that runs the
// agent, its volume, activation and exact restore of the original, the agent upload, the
// watcher and the per-folder state directory. It never prints and never exits: progress comes
// back through a callback of state changes.
package dev

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devtool/devtool/internal/compose"
	"github.com/devtool/devtool/internal/manifest"
)

// Labels and annotations of the dev lifecycle. The annotations live on the original workload,
// so `down` can restore it from any machine, even when the local state is gone.
const (
	// LabelDev is on the mirror, its pods and its volume: the dev container's name.
	LabelDev = "dev.devtool/dev"
	// AnnotationReplicas is the original's replica count before `up`.
	AnnotationReplicas = "dev.devtool/replicas"
	// AnnotationSpecDigest is the digest of the original's spec (replicas excluded) as the mirror saw it.
	AnnotationSpecDigest = "dev.devtool/spec-digest"
	// AnnotationActive names the dev container that replaced the original.
	AnnotationActive = "dev.devtool/dev-active"
	// AnnotationOriginal is on the mirror: Kind/name of the workload it mirrors.
	AnnotationOriginal = "dev.devtool/original"

	labelManagedBy  = "app.kubernetes.io/managed-by"
	labelDeployedBy = "dev.devtool/deployed-by"

	// Home is where the dev container's volume is mounted: agent, ssh keys, sync state and the
	// synced folders (as sub paths).
	Home = "/devtool"
	// AgentPath is the agent binary inside the dev container; the CLI uploads it.
	AgentPath = Home + "/bin/devtool-agent"
	// AgentPort is the agent's SSH port on the pod's loopback.
	AgentPort = 2222
	// DefaultVolumeSize is the dev volume's size when the dev entry has no persistentVolume.
	DefaultVolumeSize = manifest.DefaultVolumeSize

	homeVolume   = "devtool-home"
	mirrorSuffix = "-devtool"
)

// Kinds of workload a dev container can replace.
const (
	KindDeployment  = "Deployment"
	KindStatefulSet = "StatefulSet"
)

// Workload is a Deployment or a StatefulSet (exactly one is set).
type Workload struct {
	Deployment  *appsv1.Deployment
	StatefulSet *appsv1.StatefulSet
}

// Kind is "Deployment" or "StatefulSet".
func (w Workload) Kind() string {
	if w.StatefulSet != nil {
		return KindStatefulSet
	}
	return KindDeployment
}

// Meta is the workload's object metadata.
func (w Workload) Meta() *metav1.ObjectMeta {
	if w.StatefulSet != nil {
		return &w.StatefulSet.ObjectMeta
	}
	return &w.Deployment.ObjectMeta
}

// Name is the workload's name.
func (w Workload) Name() string { return w.Meta().Name }

// Template is the workload's pod template.
func (w Workload) Template() *corev1.PodTemplateSpec {
	if w.StatefulSet != nil {
		return &w.StatefulSet.Spec.Template
	}
	return &w.Deployment.Spec.Template
}

// Replicas is the spec's replica count (1 when unset, as the API server defaults it).
func (w Workload) Replicas() int32 {
	var r *int32
	if w.StatefulSet != nil {
		r = w.StatefulSet.Spec.Replicas
	} else {
		r = w.Deployment.Spec.Replicas
	}
	if r == nil {
		return 1
	}
	return *r
}

// String is Kind/name.
func (w Workload) String() string { return w.Kind() + "/" + w.Name() }

// MirrorName is the mirror's name for a workload.
func MirrorName(workload string) string { return workload + mirrorSuffix }

// VolumeName is the dev volume's claim name for a workload.
func VolumeName(workload string) string { return workload + mirrorSuffix }

// SpecDigest is a digest of the workload's spec without its replica count: it changes when
// someone redeploys the original with another template, not when devtool scales it.
func SpecDigest(w Workload) string {
	var spec any
	if w.StatefulSet != nil {
		s := *w.StatefulSet.Spec.DeepCopy()
		s.Replicas = nil
		spec = s
	} else {
		s := *w.Deployment.Spec.DeepCopy()
		s.Replicas = nil
		spec = s
	}
	b, _ := json.Marshal(spec) // typed structs always marshal
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])[:32]
}

// MirrorOptions are the inputs of the mirror translation beyond the original and the dev entry.
type MirrorOptions struct {
	// Env is set on top of the dev entry's environment (--env).
	Env map[string]string
}

// DevContainer returns the index of the container a dev entry replaces, or a clear error.
func DevContainer(spec *corev1.PodSpec, d *manifest.Dev, workload string) (int, error) {
	if d.Container != "" {
		for i, c := range spec.Containers {
			if c.Name == d.Container {
				return i, nil
			}
		}
		return 0, fmt.Errorf("dev %s: %s has no container %q (it has %s); fix dev.%s.container", d.Name, workload, d.Container, containerNames(spec), d.Name)
	}
	if len(spec.Containers) == 1 {
		return 0, nil
	}
	return 0, fmt.Errorf("dev %s: %s has %d containers (%s); set dev.%s.container to the one to develop", d.Name, workload, len(spec.Containers), containerNames(spec), d.Name)
}

func containerNames(spec *corev1.PodSpec) string {
	var n []string
	for _, c := range spec.Containers {
		n = append(n, c.Name)
	}
	return strings.Join(n, ", ")
}

// LauncherScript is the dev container's command: wait until the CLI has uploaded the agent,
// then run it. It needs nothing in the image but sh.
func LauncherScript() string {
	return fmt.Sprintf("mkdir -p %[1]s/bin 2>/dev/null; while [ ! -x %[2]s ]; do sleep 0.2 2>/dev/null || sleep 1; done; "+
		"exec %[2]s serve --home %[1]s --addr 127.0.0.1:%[3]d", Home, AgentPath, AgentPort)
}

// SyncSubPath is where a synced remote folder lives inside the dev volume.
func SyncSubPath(remote string) string {
	return path.Join("folders", strings.TrimPrefix(path.Clean(remote), "/"))
}

// Mirror builds the dev copy of a workload: named <name>-devtool, one replica, the same pod
// labels plus dev.devtool/dev=<devName> (so the original's Services route to it), the dev
// container taking image, agent launcher, workdir, environment, resources and security
// context from the dev entry and inheriting everything else. The original is not modified.
func Mirror(orig Workload, d *manifest.Dev, o MirrorOptions) (Workload, error) {
	tmpl := orig.Template().DeepCopy()
	idx, err := DevContainer(&tmpl.Spec, d, orig.String())
	if err != nil {
		return Workload{}, err
	}
	c := &tmpl.Spec.Containers[idx]

	if d.Image != "" {
		c.Image = d.Image
	}
	c.Command = []string{"sh", "-c", LauncherScript()}
	c.Args = nil
	switch {
	case d.Workdir != "":
		c.WorkingDir = d.Workdir
	case len(d.Sync) > 0:
		c.WorkingDir = d.Sync[0].Remote
	}
	c.Env = mergeEnv(c.Env, d.Environment, o.Env)
	if hasResources(d.Resources) {
		r, err := resourceRequirements(d)
		if err != nil {
			return Workload{}, err
		}
		c.Resources = r
	}
	if d.SecurityContext != nil {
		applySecurityContext(c, &tmpl.Spec, d.SecurityContext)
	}
	c.ReadinessProbe, c.LivenessProbe, c.StartupProbe = nil, nil, nil
	c.Lifecycle = nil // a preStop hook of the app makes no sense for the agent

	// The dev volume at /devtool and each synced folder as a sub path of it.
	mounts := []corev1.VolumeMount{{Name: homeVolume, MountPath: Home}}
	for _, s := range d.Sync {
		mounts = append(mounts, corev1.VolumeMount{Name: homeVolume, MountPath: path.Clean(s.Remote), SubPath: SyncSubPath(s.Remote)})
	}
	taken := map[string]bool{}
	for _, m := range mounts {
		taken[m.MountPath] = true
	}
	var kept []corev1.VolumeMount
	for _, m := range c.VolumeMounts {
		if !taken[path.Clean(m.MountPath)] {
			kept = append(kept, m)
		}
	}
	c.VolumeMounts = append(kept, mounts...)
	tmpl.Spec.Volumes = slices.DeleteFunc(tmpl.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == homeVolume })
	tmpl.Spec.Volumes = append(tmpl.Spec.Volumes, homeVolumeSource(orig, d))

	if tmpl.Labels == nil {
		tmpl.Labels = map[string]string{}
	}
	tmpl.Labels[LabelDev] = d.Name

	meta := metav1.ObjectMeta{
		Name:        MirrorName(orig.Name()),
		Namespace:   orig.Meta().Namespace,
		Labels:      devLabels(orig, d),
		Annotations: map[string]string{AnnotationOriginal: orig.String()},
	}
	// Owned (not controlled) by the original: deploy's prune skips owned objects, destroy and
	// anyone deleting the original take the mirror with it.
	if uid := orig.Meta().UID; uid != "" {
		meta.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: orig.Kind(), Name: orig.Name(), UID: uid}}
	}
	one := int32(1)
	if orig.StatefulSet != nil {
		src := orig.StatefulSet
		spec := *src.Spec.DeepCopy()
		spec.Replicas = &one
		spec.Selector = withDevLabel(spec.Selector, d.Name)
		// The mirror uses the original's claims (its pod is gone), so the dev container sees the
		// same data; its own claim templates would make empty volumes.
		for _, vct := range spec.VolumeClaimTemplates {
			claim := vct.Name + "-" + src.Name + "-0"
			tmpl.Spec.Volumes = slices.DeleteFunc(tmpl.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == vct.Name })
			tmpl.Spec.Volumes = append(tmpl.Spec.Volumes, corev1.Volume{Name: vct.Name, VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}})
		}
		spec.VolumeClaimTemplates = nil
		spec.PersistentVolumeClaimRetentionPolicy = nil
		spec.Template = *tmpl
		return Workload{StatefulSet: &appsv1.StatefulSet{
			TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: KindStatefulSet}, ObjectMeta: meta, Spec: spec}}, nil
	}
	spec := *orig.Deployment.Spec.DeepCopy()
	spec.Replicas = &one
	spec.Selector = withDevLabel(spec.Selector, d.Name)
	spec.Paused = false
	// The dev volume is ReadWriteOnce: never two dev pods at once.
	spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
	spec.Template = *tmpl
	return Workload{Deployment: &appsv1.Deployment{
		TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: KindDeployment}, ObjectMeta: meta, Spec: spec}}, nil
}

// devLabels are the labels of the mirror and the dev volume: the dev name, and the
// environment labels of the original so `destroy` finds them.
func devLabels(orig Workload, d *manifest.Dev) map[string]string {
	l := map[string]string{LabelDev: d.Name, labelManagedBy: "devtool"}
	if env, ok := orig.Meta().Labels[labelDeployedBy]; ok {
		l[labelDeployedBy] = env
	}
	return l
}

func volumeLabels(orig Workload, d *manifest.Dev) map[string]string {
	l := devLabels(orig, d)
	delete(l, labelManagedBy)
	return l
}

func homeVolumeSource(orig Workload, d *manifest.Dev) corev1.Volume {
	if d.PersistentVolume != nil && !d.PersistentVolume.Enabled {
		return corev1.Volume{Name: homeVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}
	}
	return corev1.Volume{Name: homeVolume, VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: VolumeName(orig.Name())}}}
}

// VolumeClaim is the dev volume of a dev entry, nil when its persistentVolume is disabled.
func VolumeClaim(orig Workload, d *manifest.Dev) (*corev1.PersistentVolumeClaim, error) {
	size, class := DefaultVolumeSize, ""
	if pv := d.PersistentVolume; pv != nil {
		if !pv.Enabled {
			return nil, nil
		}
		if pv.Size != "" {
			size = pv.Size
		}
		class = pv.StorageClass
	}
	q, err := resource.ParseQuantity(size)
	if err != nil {
		return nil, fmt.Errorf("dev %s: persistentVolume.size %q: %v", d.Name, size, err)
	}
	pvc := &corev1.PersistentVolumeClaim{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
		ObjectMeta: metav1.ObjectMeta{
			Name: VolumeName(orig.Name()), Namespace: orig.Meta().Namespace,
			// No managed-by: deploy's prune would call it a volume that left the file.
			Labels: volumeLabels(orig, d),
		},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: q}},
		},
	}
	if class != "" {
		pvc.Spec.StorageClassName = &class
	}
	return pvc, nil
}

func withDevLabel(sel *metav1.LabelSelector, dev string) *metav1.LabelSelector {
	out := &metav1.LabelSelector{}
	if sel != nil {
		out = sel.DeepCopy()
	}
	if out.MatchLabels == nil {
		out.MatchLabels = map[string]string{}
	}
	out.MatchLabels[LabelDev] = dev
	return out
}

// mergeEnv sets each layer's variables on top of the container's, in name order for new ones.
func mergeEnv(base []corev1.EnvVar, layers ...map[string]string) []corev1.EnvVar {
	out := slices.Clone(base)
	for _, l := range layers {
		names := slices.Sorted(maps.Keys(l))
		for _, n := range names {
			i := slices.IndexFunc(out, func(e corev1.EnvVar) bool { return e.Name == n })
			if i >= 0 {
				out[i] = corev1.EnvVar{Name: n, Value: l[n]}
			} else {
				out = append(out, corev1.EnvVar{Name: n, Value: l[n]})
			}
		}
	}
	return out
}

func hasResources(r compose.Resources) bool {
	return r.Requests.CPU != "" || r.Requests.Memory != "" || r.Limits.CPU != "" || r.Limits.Memory != ""
}

func resourceRequirements(d *manifest.Dev) (corev1.ResourceRequirements, error) {
	list := func(what string, l compose.ResourceList) (corev1.ResourceList, error) {
		out := corev1.ResourceList{}
		for name, v := range map[corev1.ResourceName]string{corev1.ResourceCPU: l.CPU, corev1.ResourceMemory: l.Memory} {
			if v == "" {
				continue
			}
			q, err := resource.ParseQuantity(v)
			if err != nil {
				return nil, fmt.Errorf("dev %s: resources.%s.%s %q: %v", d.Name, what, name, v, err)
			}
			out[name] = q
		}
		if len(out) == 0 {
			return nil, nil
		}
		return out, nil
	}
	req, err := list("requests", d.Resources.Requests)
	if err != nil {
		return corev1.ResourceRequirements{}, err
	}
	lim, err := list("limits", d.Resources.Limits)
	if err != nil {
		return corev1.ResourceRequirements{}, err
	}
	return corev1.ResourceRequirements{Requests: req, Limits: lim}, nil
}

func applySecurityContext(c *corev1.Container, pod *corev1.PodSpec, s *manifest.SecurityContext) {
	if c.SecurityContext == nil {
		c.SecurityContext = &corev1.SecurityContext{}
	}
	sc := c.SecurityContext
	if s.RunAsUser != nil {
		sc.RunAsUser = s.RunAsUser
	}
	if s.RunAsGroup != nil {
		sc.RunAsGroup = s.RunAsGroup
	}
	if s.RunAsNonRoot != nil {
		sc.RunAsNonRoot = s.RunAsNonRoot
	}
	if len(s.CapAdd) > 0 || len(s.CapDrop) > 0 {
		if sc.Capabilities == nil {
			sc.Capabilities = &corev1.Capabilities{}
		}
		for _, a := range s.CapAdd {
			sc.Capabilities.Add = append(sc.Capabilities.Add, corev1.Capability(a))
		}
		for _, a := range s.CapDrop {
			sc.Capabilities.Drop = append(sc.Capabilities.Drop, corev1.Capability(a))
		}
	}
	if s.FSGroup != nil {
		if pod.SecurityContext == nil {
			pod.SecurityContext = &corev1.PodSecurityContext{}
		}
		pod.SecurityContext.FSGroup = s.FSGroup
	}
}

// FromCompose makes a dev entry of a Compose service, for folders with only a Compose file: its
// host volumes give the sync folders, its published ports the forwards, its working dir the workdir,
// and its entrypoint and command the dev command, so the service's own app runs on the synced files
// (an image's ENTRYPOINT that the Compose file does not repeat is not known here: such a service's
// dev command is its command alone). No command in the file: a shell on a terminal, as with a
// devtool.yml dev entry without one.
//
// Every host volume becomes a sync folder here; SyncableFolders then keeps those up can sync.
func FromCompose(s *compose.Service) *manifest.Dev {
	// Compose takes container paths as Docker does, cleaned ("/app/" is /app).
	d := &manifest.Dev{Name: s.Name, Workdir: cleanAbs(s.WorkingDir), Pos: s.Pos}
	field := "services." + s.Name
	if s.WorkingDir != "" {
		d.SetSource("workdir", s.Pos, field+".working_dir")
	}
	if len(s.Entrypoint) > 0 || len(s.Command) > 0 {
		d.Command = append(append([]string(nil), s.Entrypoint...), s.Command...)
	}
	for i, v := range s.Volumes {
		if v.Kind == compose.VolumeHost {
			d.SetSource(fmt.Sprintf("sync[%d]", len(d.Sync)), v.Pos, fmt.Sprintf("%s.volumes[%d]", field, i))
			d.Sync = append(d.Sync, manifest.Sync{Local: v.Source, Remote: cleanAbs(v.Target), ReadOnly: v.ReadOnly})
		}
	}
	seen := map[int32]bool{}
	for _, p := range s.Ports {
		if p.HostPort != 0 && (p.Protocol == "" || p.Protocol == "TCP") && !seen[p.HostPort] {
			seen[p.HostPort] = true
			d.Forward = append(d.Forward, manifest.Forward{Local: p.HostPort, Remote: p.ContainerPort})
		}
	}
	sort.Slice(d.Forward, func(i, j int) bool { return d.Forward[i].Local < d.Forward[j].Local })
	for i := range d.Forward {
		d.SetSource(fmt.Sprintf("forward[%d]", i), s.Pos, field+".ports")
	}
	return d
}

// cleanAbs cleans an absolute container path and leaves any other as it is.
func cleanAbs(p string) string {
	if path.IsAbs(p) {
		return path.Clean(p)
	}
	return p
}

// replicasAnnotation parses the recorded replica count.
func replicasAnnotation(meta *metav1.ObjectMeta) (int32, bool) {
	v, ok := meta.Annotations[AnnotationReplicas]
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil || n < 0 {
		return 0, false
	}
	return int32(n), true
}

package translate

import (
	"path"
	"regexp"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/devtool/devtool/internal/compose"
)

// DefaultVolumeSize is the size of a volume that does not give driver_opts.size (spec A3), and of
// every anonymous volume.
const DefaultVolumeSize = "1Gi"

// volumePlan is what the Compose volumes become: PVCs for named volumes, claim templates for
// anonymous ones, and per service the pod volumes, mounts, volumes to seed and co-scheduling.
type volumePlan struct {
	objects        []runtime.Object                          // PVCs, in the file order of top-level volumes
	claimTemplates map[string][]corev1.PersistentVolumeClaim // service -> StatefulSet volumeClaimTemplates
	pods           map[string]*podVolumes                    // service -> its pod's volumes
}

type podVolumes struct {
	volumes  []corev1.Volume
	mounts   []corev1.VolumeMount
	seed     []corev1.VolumeMount // writable mounts the init container fills from the image
	affinity *corev1.Affinity
}

// planVolumes translates the volumes of every service:
//   - named volume: one PVC named after the volume, shared by every service (and replica) that
//     mounts it;
//   - anonymous volume: storage per replica, so a StatefulSet volumeClaimTemplate; in a Job
//     (no claim templates there) an emptyDir, which lives as long as the pod, like Compose's
//     anonymous volume lives as long as the container;
//   - host volume: not mounted at all. The cluster cannot see the developer's disk; the build
//     step bakes those files into a derived image instead. Nothing is recorded in the objects.
func (t *translator) planVolumes() (*volumePlan, error) {
	plan := &volumePlan{claimTemplates: map[string][]corev1.PersistentVolumeClaim{}, pods: map[string]*podVolumes{}}
	defined := map[string]*compose.Volume{}
	sizes := map[string]resource.Quantity{}
	for _, v := range t.p.Volumes {
		if v == nil {
			continue
		}
		// The PVC is named after the volume and the pod volume too, so it must be a DNS label.
		if errs := validation.IsDNS1123Label(v.Name); len(errs) > 0 {
			return nil, errorAt(v.Pos, "volume name %q is not valid for Kubernetes: %s", v.Name, strings.Join(errs, "; "))
		}
		size, err := volumeSize(v)
		if err != nil {
			return nil, err
		}
		if k, why := checkAnnotationKeys(v.Annotations); k != "" {
			return nil, errorAt(v.Pos, "volume %q: annotation %q is not a valid Kubernetes annotation key: %s", v.Name, k, why)
		}
		if k, why := checkAnnotationKeys(v.Labels); k != "" {
			return nil, errorAt(v.Pos, "volume %q: label %q cannot become a Kubernetes annotation: %s", v.Name, k, why)
		}
		defined[v.Name] = v
		sizes[v.Name] = size
	}

	users := map[string][]*compose.Service{} // named volume -> services mounting it, in dependency order
	for _, s := range t.order {
		pv := &podVolumes{}
		plan.pods[s.Name] = pv
		names := map[string]bool{}   // pod volume names in use
		targets := map[string]bool{} // mount paths in use
		for _, m := range s.Volumes {
			if m.Kind == compose.VolumeHost {
				continue
			}
			if !path.IsAbs(m.Target) {
				return nil, errorAt(m.Pos, "service %q: volume target %q is not an absolute path", s.Name, m.Target)
			}
			target := path.Clean(m.Target)
			if targets[target] {
				return nil, errorAt(m.Pos, "service %q: two volumes are mounted at %s", s.Name, target)
			}
			targets[target] = true

			var volName string
			switch m.Kind {
			case compose.VolumeNamed:
				v, ok := defined[m.Source]
				if !ok {
					return nil, errorAt(m.Pos, "service %q mounts volume %q, which is not defined under the top-level volumes", s.Name, m.Source)
				}
				volName = v.Name
				if !names[volName] {
					names[volName] = true
					pv.volumes = append(pv.volumes, corev1.Volume{Name: volName, VolumeSource: corev1.VolumeSource{
						PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: v.Name},
					}})
					users[v.Name] = append(users[v.Name], s)
				}
			case compose.VolumeAnonymous:
				volName = anonymousName(target, names)
				names[volName] = true
				if t.kinds[s.Name] == KindJob {
					// A Job has no claim templates: its own claim, named after the service and
					// the mount, like the one a StatefulSet's template would make.
					claim := t.claimTemplate(s, volName)
					claim.Name = jobClaimName(s.Name, volName)
					claim.Namespace = t.opts.Namespace
					plan.objects = append(plan.objects, &claim)
					pv.volumes = append(pv.volumes, corev1.Volume{Name: volName, VolumeSource: corev1.VolumeSource{
						PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim.Name},
					}})
				} else {
					plan.claimTemplates[s.Name] = append(plan.claimTemplates[s.Name], t.claimTemplate(s, volName))
				}
			case compose.VolumeTmpfs:
				volName = tmpfsName(target, names)
				names[volName] = true
				ed := &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}
				if m.Size != "" {
					q, err := resource.ParseQuantity(m.Size)
					if err != nil {
						return nil, errorAt(m.Pos, "service %q: tmpfs size %q is not a quantity", s.Name, m.Size)
					}
					ed.SizeLimit = &q
				}
				pv.volumes = append(pv.volumes, corev1.Volume{Name: volName, VolumeSource: corev1.VolumeSource{EmptyDir: ed}})
				// Docker's tmpfs starts empty (it hides the image's files): never seeded.
				pv.mounts = append(pv.mounts, corev1.VolumeMount{Name: volName, MountPath: target, ReadOnly: m.ReadOnly})
				continue
			default:
				return nil, errorAt(m.Pos, "service %q: unknown volume kind %q", s.Name, m.Kind)
			}
			mount := corev1.VolumeMount{Name: volName, MountPath: target, ReadOnly: m.ReadOnly}
			pv.mounts = append(pv.mounts, mount)
			if !m.ReadOnly {
				pv.seed = append(pv.seed, mount)
			}
		}
		if err := t.fileMounts(s, pv, names, targets); err != nil {
			return nil, err
		}
	}

	for _, v := range t.p.Volumes {
		if v == nil {
			continue
		}
		if len(users[v.Name]) == 0 {
			// No pod would ever bind it; a PVC for it would only hold storage.
			t.warnf("volume %q is not mounted by any service: no PersistentVolumeClaim is created for it", v.Name)
			continue
		}
		plan.objects = append(plan.objects, t.pvc(v, sizes[v.Name]))
	}
	t.coSchedule(plan, users)
	return plan, nil
}

func volumeSize(v *compose.Volume) (resource.Quantity, error) {
	s := v.Size
	if s == "" {
		s = DefaultVolumeSize
	}
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return q, errorAt(v.Pos, "volume %q: size %q is not a quantity (like 1Gi, 500Mi): %v", v.Name, s, err)
	}
	if q.Sign() <= 0 {
		return q, errorAt(v.Pos, "volume %q: size %q must be more than zero", v.Name, s)
	}
	return q, nil
}

// pvc is the claim of a named volume: ReadWriteOnce (the only mode every provisioner offers),
// the volume's size and class, and its labels as annotations.
func (t *translator) pvc(v *compose.Volume, size resource.Quantity) *corev1.PersistentVolumeClaim {
	c := &corev1.PersistentVolumeClaim{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
		ObjectMeta: metav1.ObjectMeta{
			Name:        v.Name,
			Namespace:   t.opts.Namespace,
			Labels:      t.objectLabels(),
			Annotations: volumeAnnotations(v),
		},
		Spec: claimSpec(size),
	}
	if v.Class != "" {
		c.Spec.StorageClassName = &v.Class
	}
	return c
}

// claimTemplate is the per-replica claim of an anonymous volume, of the class resources.storage
// names (Okteto's {size, class}), else the cluster's default. The labels make the PVCs the
// StatefulSet controller creates from it findable by destroy --volumes.
func (t *translator) claimTemplate(s *compose.Service, name string) corev1.PersistentVolumeClaim {
	c := corev1.PersistentVolumeClaim{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: t.serviceLabels(s.Name)},
		Spec:       claimSpec(anonymousSize(s)),
	}
	if class := s.Resources.Requests.StorageClass; class != "" {
		c.Spec.StorageClassName = &class
	}
	return c
}

// anonymousSize is the size of a service's anonymous volumes: resources.storage (or
// resources.requests.storage) when set, else the default. The loader checked the quantity.
func anonymousSize(s *compose.Service) resource.Quantity {
	if q, err := resource.ParseQuantity(s.Resources.Requests.Storage); err == nil && q.Sign() > 0 {
		return q
	}
	return resource.MustParse(DefaultVolumeSize)
}

func claimSpec(size resource.Quantity) corev1.PersistentVolumeClaimSpec {
	return corev1.PersistentVolumeClaimSpec{
		AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: size}},
	}
}

// jobClaimName names the claim of a Job's anonymous volume: "<service>-<volume>", cut to a
// DNS label.
func jobClaimName(service, vol string) string {
	name := service + "-" + vol
	if len(name) > 63 {
		name = strings.TrimRight(name[:63], "-")
	}
	return name
}

// tmpfsName names a tmpfs mount's emptyDir after its path, like anonymousName.
func tmpfsName(target string, taken map[string]bool) string {
	return "tmpfs" + strings.TrimPrefix(anonymousName(target, taken), "anon")
}

var notLabelChars = regexp.MustCompile(`[^a-z0-9]+`)

// anonymousName names an anonymous volume after its mount path ("/var/lib/data" → "anon-var-lib-data"),
// so reordering a service's volumes does not rename its claims (claim templates are immutable).
func anonymousName(target string, taken map[string]bool) string {
	slug := strings.Trim(notLabelChars.ReplaceAllString(strings.ToLower(target), "-"), "-")
	name := "anon"
	if slug != "" {
		name += "-" + slug
	}
	if len(name) > 50 {
		name = strings.TrimRight(name[:50], "-")
	}
	base := name
	for i := 2; taken[name]; i++ {
		name = base + "-" + strconv.Itoa(i)
	}
	return name
}

package translate

import (
	"fmt"
	"path"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/devtool/devtool/internal/compose"
)

// Compose's top-level secrets and configs become Secrets and ConfigMaps named after them
// (compose.KubeObjectName), each holding one key (the name as written) with the content the
// loader read; services mount that key as a file at the Compose path (/run/secrets/<name>
// or target for a secret, /<name> or target for a config). An external secret or config is
// mounted but not created: it must exist in the namespace.

// fileObjects makes the Secrets and ConfigMaps, in file order (secrets first).
func (t *translator) fileObjects() ([]runtime.Object, error) {
	var out []runtime.Object
	for _, list := range []struct {
		what    string
		objects []*compose.FileObject
	}{{"secret", t.p.Secrets}, {"config", t.p.Configs}} {
		for _, o := range list.objects {
			if o == nil || (o.File == "" && o.Environment == "" && o.Data == nil) {
				continue // external
			}
			name := compose.KubeObjectName(o.Name)
			if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
				return nil, errorAt(o.Pos, "%s %q cannot name a Kubernetes object: %s", list.what, o.Name, strings.Join(errs, "; "))
			}
			key := fileKey(o.Name)
			meta := metav1.ObjectMeta{Name: name, Namespace: t.opts.Namespace, Labels: t.objectLabels()}
			if list.what == "secret" {
				out = append(out, &corev1.Secret{
					TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
					ObjectMeta: meta,
					Type:       corev1.SecretTypeOpaque,
					Data:       map[string][]byte{key: slices.Clone(o.Data)},
				})
				continue
			}
			cm := &corev1.ConfigMap{
				TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
				ObjectMeta: meta,
			}
			if isText(o.Data) {
				cm.Data = map[string]string{key: string(o.Data)}
			} else {
				cm.BinaryData = map[string][]byte{key: slices.Clone(o.Data)}
			}
			out = append(out, cm)
		}
	}
	return out, nil
}

// fileKey is the key holding a secret's or config's content: its name when that is a valid
// key, else the Kubernetes object name.
func fileKey(name string) string {
	if len(validation.IsConfigMapKey(name)) == 0 {
		return name
	}
	return compose.KubeObjectName(name)
}

func isText(b []byte) bool {
	return strings.ToValidUTF8(string(b), "\uFFFD") == string(b)
}

// fileMounts adds a service's secrets and configs to its pod: one volume per object (and file
// mode), each mount a single file (subPath) at the Compose target.
func (t *translator) fileMounts(s *compose.Service, pv *podVolumes, names, targets map[string]bool) error {
	for _, list := range []struct {
		what   string
		mounts []compose.FileMount
	}{{"secret", s.Secrets}, {"config", s.Configs}} {
		for _, m := range list.mounts {
			if !path.IsAbs(m.Target) {
				return errorAt(m.Pos, "service %q: %s target %q is not an absolute path", s.Name, list.what, m.Target)
			}
			target := path.Clean(m.Target)
			if targets[target] {
				return errorAt(m.Pos, "service %q: two volumes are mounted at %s", s.Name, target)
			}
			targets[target] = true
			obj := compose.KubeObjectName(m.Source)
			volName := list.what + "-" + obj
			if m.Mode != nil {
				volName += fmt.Sprintf("-%o", *m.Mode)
			}
			if len(volName) > 63 {
				volName = strings.TrimRight(volName[:63], "-.")
			}
			volName = strings.ReplaceAll(volName, ".", "-")
			if !names[volName] {
				names[volName] = true
				v := corev1.Volume{Name: volName}
				if list.what == "secret" {
					v.Secret = &corev1.SecretVolumeSource{SecretName: obj, DefaultMode: m.Mode}
				} else {
					v.ConfigMap = &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: obj}, DefaultMode: m.Mode}
				}
				pv.volumes = append(pv.volumes, v)
			}
			pv.mounts = append(pv.mounts, corev1.VolumeMount{Name: volName, MountPath: target, SubPath: fileKey(m.Source), ReadOnly: true})
		}
	}
	return nil
}

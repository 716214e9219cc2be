package translate

import (
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/devtool/devtool/internal/compose"
)

// LabelName is the pod label naming the Compose service. With LabelDeployedBy it forms the pod
// selector, which must never change between deploys: a Deployment's or StatefulSet's selector is
// immutable, so everything else about a service goes into annotations, never into these labels.
const LabelName = "app.kubernetes.io/name"

// objectLabels are the labels every object carries, so destroy and prune can find it.
func (t *translator) objectLabels() map[string]string {
	return map[string]string{
		LabelDeployedBy: t.opts.Name,
		LabelManagedBy:  ManagedByValue,
	}
}

// selectorLabels select the pods of one service.
func (t *translator) selectorLabels(service string) map[string]string {
	return map[string]string{
		LabelName:       service,
		LabelDeployedBy: t.opts.Name,
	}
}

// serviceLabels are the labels of a service's own objects (workload, Service, pod template):
// the selector plus managed-by.
func (t *translator) serviceLabels(service string) map[string]string {
	l := t.objectLabels()
	maps.Copy(l, t.selectorLabels(service))
	return l
}

// selectorString is the selector as a label selector string (sorted by key, so deterministic).
func (t *translator) selectorString(service string) string {
	return labels.SelectorFromSet(t.selectorLabels(service)).String()
}

// checkAnnotationKeys returns the first key (in sorted order, so the error is always the same)
// that cannot be an annotation key, with why; "" when all can.
func checkAnnotationKeys(m map[string]string) (key, why string) {
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			return k, strings.Join(errs, "; ")
		}
	}
	return "", ""
}

// keepPolicy carries dev.devtool/policy from a service's labels to the objects made for that
// service besides its workload (Service, public-port Ingresses): destroy must not keep a
// workload and delete the Service that makes it reachable.
//
// dev.devtool/private (AnnotationPrivate) goes to the public-port Ingresses too: it is how a
// service's endpoint is made private on a platform.
func keepPolicy(s *compose.Service) map[string]string {
	var out map[string]string
	for _, k := range []string{AnnotationPolicy, AnnotationPrivate} {
		if v, ok := s.Labels[k]; ok {
			if out == nil {
				out = map[string]string{}
			}
			out[k] = v
		}
	}
	return out
}

// annotationsFrom copies Compose labels into annotations: the spec says labels are "translated
// into cluster annotations", and keeping them out of Kubernetes labels keeps selectors stable.
// nil when there are none, so the YAML has no empty map.
func annotationsFrom(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	return maps.Clone(m)
}

// serviceAnnotations are a service's labels (with deploy.labels) and its annotations field,
// as annotations of its workload and pods. The loader refuses a key set twice with different
// values in labels; annotations win over labels for the same key.
func serviceAnnotations(s *compose.Service) map[string]string {
	if len(s.Annotations) == 0 {
		return annotationsFrom(s.Labels)
	}
	out := maps.Clone(s.Labels)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, s.Annotations)
	return out
}

// volumeAnnotations are a volume's labels and annotations.
func volumeAnnotations(v *compose.Volume) map[string]string {
	if len(v.Annotations) == 0 {
		return annotationsFrom(v.Labels)
	}
	out := maps.Clone(v.Labels)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, v.Annotations)
	return out
}

package translate

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/devtool/devtool/internal/compose"
)

// podTemplate is the pod of a service: one container named like the service, its volumes, the
// init container that seeds empty volumes, node selector, grace period and co-scheduling.
func (t *translator) podTemplate(s *compose.Service, kind string) (corev1.PodTemplateSpec, error) {
	c, err := t.container(s)
	if err != nil {
		return corev1.PodTemplateSpec{}, err
	}
	vols := t.volumes.pods[s.Name]
	c.VolumeMounts = vols.mounts
	spec := corev1.PodSpec{
		Containers:   []corev1.Container{c},
		Volumes:      vols.volumes,
		NodeSelector: cloneOrNil(s.NodeSelector),
		Affinity:     vols.affinity,
	}
	if init := initVolumesContainer(s, c, vols.seed); init != nil {
		spec.InitContainers = []corev1.Container{*init}
	}
	if s.StopGracePeriod != nil {
		spec.TerminationGracePeriodSeconds = ptr.To(ceilSeconds(*s.StopGracePeriod))
	}
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{
			Labels:      t.serviceLabels(s.Name),
			Annotations: serviceAnnotations(s),
		},
		Spec: spec,
	}, nil
}

// ceilSeconds rounds a duration up to whole seconds: Kubernetes counts in seconds, and rounding
// down could turn "wait 500ms" into "do not wait at all".
func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
}

func cloneOrNil(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

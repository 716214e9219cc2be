package translate

import (
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/devtool/devtool/internal/compose"
)

// kindOf picks the workload kind. The spec: a restart policy other than always makes a Job.
// Otherwise a named or anonymous volume makes a StatefulSet (stable storage per replica, and
// pods replaced one at a time so a ReadWriteOnce volume is never wanted by two pods at once);
// anything else is a Deployment. Host volumes do not count: they are not mounted (see volumes.go).
func kindOf(s *compose.Service) string {
	if s.Restart.Policy != "" && s.Restart.Policy != compose.RestartAlways {
		return KindJob
	}
	for _, v := range s.Volumes {
		if v.Kind == compose.VolumeNamed || v.Kind == compose.VolumeAnonymous {
			return KindStatefulSet
		}
	}
	return KindDeployment
}

// workload builds the Deployment, StatefulSet or Job of a service, and its summary for deploy.
func (t *translator) workload(s *compose.Service) (runtime.Object, Service, error) {
	kind := t.kinds[s.Name]
	update, err := updatePolicy(s, kind)
	if err != nil {
		return nil, Service{}, err
	}
	tmpl, err := t.podTemplate(s, kind)
	if err != nil {
		return nil, Service{}, err
	}
	replicas := int32(s.Scale)
	meta := metav1.ObjectMeta{
		Name:        s.Name,
		Namespace:   t.opts.Namespace,
		Labels:      t.serviceLabels(s.Name),
		Annotations: serviceAnnotations(s),
	}
	selector := &metav1.LabelSelector{MatchLabels: t.selectorLabels(s.Name)}

	var obj runtime.Object
	switch kind {
	case KindDeployment:
		obj = &appsv1.Deployment{
			TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
			ObjectMeta: meta,
			Spec: appsv1.DeploymentSpec{
				Replicas: &replicas,
				Selector: selector,
				Template: tmpl,
				Strategy: deploymentStrategy(update),
			},
		}
	case KindStatefulSet:
		obj = &appsv1.StatefulSet{
			TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"},
			ObjectMeta: meta,
			Spec: appsv1.StatefulSetSpec{
				Replicas: &replicas,
				Selector: selector,
				// Always the service's name, even when the service has no ports and so no Service:
				// serviceName is immutable, and adding ports later must not need a delete.
				ServiceName:          s.Name,
				Template:             tmpl,
				UpdateStrategy:       statefulSetStrategy(update),
				VolumeClaimTemplates: t.volumes.claimTemplates[s.Name],
				// Parallel: replicas start together, as Compose starts its containers; ordered
				// start-up is a StatefulSet habit no Compose file asks for.
				PodManagementPolicy: appsv1.ParallelPodManagement,
			},
		}
	case KindJob:
		obj = &batchv1.Job{
			TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
			ObjectMeta: meta,
			Spec:       jobSpec(s, tmpl, replicas),
		}
	}

	info := Service{
		Name:           s.Name,
		Kind:           kind,
		Replicas:       replicas,
		DependsOn:      dependencies(s),
		Ports:          tcpContainerPorts(s),
		HasHealthcheck: tmpl.Spec.Containers[0].ReadinessProbe != nil,
		PodSelector:    t.selectorString(s.Name),
	}
	return obj, info, nil
}

// jobSpec: scale runs that many pods at once. restart never → a failed pod is not retried
// (backoffLimit 0, restartPolicy Never). on-failure → the container is restarted in place, up to
// max_attempts times when given (else the Job default of 6).
func jobSpec(s *compose.Service, tmpl corev1.PodTemplateSpec, replicas int32) batchv1.JobSpec {
	spec := batchv1.JobSpec{
		Parallelism: ptr.To(replicas),
		Completions: ptr.To(replicas),
		Template:    tmpl,
	}
	switch s.Restart.Policy {
	case compose.RestartOnFailure:
		spec.Template.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
		if s.Restart.MaxAttempts != nil {
			spec.BackoffLimit = ptr.To(int32(*s.Restart.MaxAttempts))
		}
	default: // never
		spec.Template.Spec.RestartPolicy = corev1.RestartPolicyNever
		spec.BackoffLimit = ptr.To[int32](0)
	}
	return spec
}

// Values of the dev.devtool/update service label (spec A5).
const (
	UpdateRolling  = "rolling"
	UpdateRecreate = "recreate"
	UpdateOnDelete = "on-delete"
)

// updatePolicy reads dev.devtool/update and checks it against the kind (spec A5): rolling for
// Deployments and StatefulSets, recreate only for Deployments, on-delete only for StatefulSets,
// nothing for Jobs. A value that does not fit is an error: silently ignoring it would deploy with
// a strategy the user explicitly did not ask for.
func updatePolicy(s *compose.Service, kind string) (string, error) {
	v, ok := s.Labels[AnnotationUpdate]
	if !ok {
		return "", nil
	}
	switch v {
	case UpdateRolling, UpdateRecreate, UpdateOnDelete:
	default:
		return "", errorAt(s.Pos, "service %q: label %s has unknown value %q (expected %s, %s or %s)",
			s.Name, AnnotationUpdate, v, UpdateRolling, UpdateRecreate, UpdateOnDelete)
	}
	why := ""
	switch {
	case kind == KindJob:
		why = "a Job (its restart policy is not always) has no update strategy"
	case v == UpdateRecreate && kind == KindStatefulSet:
		why = "recreate is only for Deployments, and this service is a StatefulSet because it mounts a volume; use on-delete or rolling"
	case v == UpdateOnDelete && kind == KindDeployment:
		why = "on-delete is only for StatefulSets (services with volumes); use recreate or rolling"
	}
	if why != "" {
		return "", errorAt(s.Pos, "service %q: label %s=%s cannot be used: %s", s.Name, AnnotationUpdate, v, why)
	}
	return v, nil
}

// deploymentStrategy: Recreate by default (a dev environment prefers never running two versions
// side by side, and a single replica then never competes with its successor for resources).
// rolling is zero-downtime: no pod is taken down before its replacement is ready.
func deploymentStrategy(update string) appsv1.DeploymentStrategy {
	if update == UpdateRolling {
		return appsv1.DeploymentStrategy{
			Type: appsv1.RollingUpdateDeploymentStrategyType,
			RollingUpdate: &appsv1.RollingUpdateDeployment{
				MaxUnavailable: ptr.To(intstr.FromInt32(0)),
				MaxSurge:       ptr.To(intstr.FromInt32(1)),
			},
		}
	}
	return appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
}

// statefulSetStrategy: RollingUpdate by default; on-delete leaves replacing pods to whoever deletes them.
func statefulSetStrategy(update string) appsv1.StatefulSetUpdateStrategy {
	if update == UpdateOnDelete {
		return appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType}
	}
	return appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType}
}

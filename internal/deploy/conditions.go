package deploy

import (
	"fmt"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/devtool/devtool/internal/kube"
	"github.com/devtool/devtool/internal/translate"
)

// Waiting reasons that never resolve by waiting: fail at once instead of at the timeout.
var fatalWaitingReasons = map[string]bool{"InvalidImageName": true, "ErrImageNeverPull": true}

func podRunning(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.State.Running == nil {
			return false
		}
	}
	return len(p.Status.ContainerStatuses) > 0
}

// fatalPodError reports a pod state that waiting cannot fix.
func fatalPodError(svc string, pods []*corev1.Pod) error {
	for _, p := range pods {
		for _, cs := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
			if w := cs.State.Waiting; w != nil && fatalWaitingReasons[w.Reason] {
				return fmt.Errorf("service %s: container %s cannot start: %s: %s", svc, cs.Name, w.Reason, w.Message)
			}
		}
	}
	return nil
}

func jobFailed(j *batchv1.Job) (bool, string) {
	for _, c := range j.Status.Conditions {
		if c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue {
			return true, strings.TrimSpace(c.Reason + ": " + c.Message)
		}
	}
	return false, ""
}

func jobComplete(j *batchv1.Job) bool {
	for _, c := range j.Status.Conditions {
		if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// started: the dependency is running (a Job: running or already finished).
func (t *tracker) started(ns string, s translate.Service) (bool, error) {
	pods := t.podsOf(s.PodSelector)
	if err := fatalPodError(s.Name, pods); err != nil {
		return false, err
	}
	if s.Kind == translate.KindJob {
		if j := t.job(ns, s.Name); j != nil {
			if failed, why := jobFailed(j); failed {
				return false, fmt.Errorf("job %s failed: %s", s.Name, why)
			}
			if jobComplete(j) {
				return true, nil
			}
		}
		for _, p := range pods {
			if podRunning(p) || p.Status.Phase == corev1.PodSucceeded {
				return true, nil
			}
		}
		return false, nil
	}
	for _, p := range pods {
		if podRunning(p) {
			return true, nil
		}
	}
	return false, nil
}

// readyPods returns the service's Ready pods.
func (t *tracker) readyPods(s translate.Service) ([]*corev1.Pod, error) {
	pods := t.podsOf(s.PodSelector)
	if err := fatalPodError(s.Name, pods); err != nil {
		return nil, err
	}
	var out []*corev1.Pod
	for _, p := range pods {
		if kube.PodReady(p) {
			out = append(out, p)
		}
	}
	return out, nil
}

// completed: the dependency (a Job) finished successfully. A failed Job is an error.
func (t *tracker) completed(ns string, s translate.Service) (bool, error) {
	if s.Kind != translate.KindJob {
		return false, fmt.Errorf("service %s is a %s, which never completes: service_completed_successfully needs a service whose restart policy is not always", s.Name, s.Kind)
	}
	j := t.job(ns, s.Name)
	if j == nil {
		return false, nil
	}
	if failed, why := jobFailed(j); failed {
		return false, fmt.Errorf("job %s failed: %s", s.Name, why)
	}
	return jobComplete(j), nil
}

// settle is how long a pod must have been Ready before --wait counts it: a container that exits
// right after starting flashes Ready for an instant, and the workload's status counts it too.
const settle = time.Second

// settledReady counts the service's pods that are Ready since at least settle and not restarting.
func (t *tracker) settledReady(s translate.Service, now time.Time) int32 {
	var n int32
	for _, p := range t.podsOf(s.PodSelector) {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue && now.Sub(c.LastTransitionTime.Time) >= settle {
				n++
			}
		}
	}
	return n
}

// ready: the workload reached its desired state (used by --wait).
func (t *tracker) ready(ns string, s translate.Service) (bool, error) {
	if err := fatalPodError(s.Name, t.podsOf(s.PodSelector)); err != nil {
		return false, err
	}
	if s.Kind != translate.KindJob && s.Replicas > 0 && t.settledReady(s, time.Now()) < s.Replicas {
		return false, nil
	}
	switch s.Kind {
	case translate.KindJob:
		return t.completed(ns, s)
	case translate.KindStatefulSet:
		st := t.statefulSet(ns, s.Name)
		if st == nil || st.Status.ObservedGeneration < st.Generation {
			return false, nil
		}
		want := int32(1)
		if st.Spec.Replicas != nil {
			want = *st.Spec.Replicas
		}
		return st.Status.ReadyReplicas >= want && st.Status.UpdatedReplicas >= want, nil
	default:
		d := t.deployment(ns, s.Name)
		if d == nil || d.Status.ObservedGeneration < d.Generation {
			return false, nil
		}
		want := int32(1)
		if d.Spec.Replicas != nil {
			want = *d.Spec.Replicas
		}
		return d.Status.UpdatedReplicas >= want && d.Status.AvailableReplicas >= want && d.Status.Replicas == d.Status.UpdatedReplicas, nil
	}
}

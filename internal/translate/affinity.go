package translate

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devtool/devtool/internal/compose"
)

// coSchedule keeps the pods that share a named volume on one node: the volume is ReadWriteOnce,
// so a pod on a second node would wait forever for the volume to attach.
//
// The anchor is the first user, in dependency order, that keeps running (not a Job): the scheduler
// ignores pods that have finished, so an affinity to a Job's pods would strand every later pod once
// the Job completed. The other users require to run on the anchor's node. A Job placed before the
// anchor gets no affinity: it runs before the anchor exists (requiring the anchor would deadlock
// when the anchor waits for it) and its claim is released when it ends. The anchor requires its
// own pods when it has several replicas (the scheduler lets the first one go anywhere, because
// it matches its own term).
func (t *translator) coSchedule(plan *volumePlan, users map[string][]*compose.Service) {
	terms := map[string][]string{} // service -> anchors it must run beside, in order found
	addTerm := func(svc, anchor string) {
		for _, a := range terms[svc] {
			if a == anchor {
				return
			}
		}
		terms[svc] = append(terms[svc], anchor)
	}
	for _, v := range t.p.Volumes {
		if v == nil {
			continue
		}
		us := users[v.Name]
		anchorAt := -1
		for i, s := range us {
			if t.kinds[s.Name] != KindJob {
				anchorAt = i
				break
			}
		}
		if anchorAt < 0 {
			continue // only Jobs: they end, and a waiting one attaches when the other is done
		}
		anchor := us[anchorAt]
		if anchor.Scale > 1 {
			addTerm(anchor.Name, anchor.Name)
		}
		for _, s := range us[anchorAt+1:] {
			addTerm(s.Name, anchor.Name)
		}
	}
	for _, s := range t.order {
		anchors := terms[s.Name]
		if len(anchors) == 0 {
			continue
		}
		aff := &corev1.PodAffinity{}
		for _, a := range anchors {
			aff.RequiredDuringSchedulingIgnoredDuringExecution = append(aff.RequiredDuringSchedulingIgnoredDuringExecution, corev1.PodAffinityTerm{
				LabelSelector: &metav1.LabelSelector{MatchLabels: t.selectorLabels(a)},
				TopologyKey:   "kubernetes.io/hostname",
			})
		}
		plan.pods[s.Name].affinity = &corev1.Affinity{PodAffinity: aff}
	}
}

package kube

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
)

// PodReady reports whether a pod's Ready condition is True.
func PodReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// WaitForPods watches the pods matching selector until cond holds for the list, or ctx ends.
// It lists once, then follows the watch: no polling.
func WaitForPods(ctx context.Context, cs kubernetes.Interface, ns, selector string, cond func([]corev1.Pod) bool) ([]corev1.Pod, error) {
	lw := &cache.ListWatch{
		ListFunc: func(o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector = selector
			return cs.CoreV1().Pods(ns).List(ctx, o)
		},
		WatchFunc: func(o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = selector
			return cs.CoreV1().Pods(ns).Watch(ctx, o)
		},
	}
	pods := map[string]corev1.Pod{}
	snapshot := func() []corev1.Pod {
		out := make([]corev1.Pod, 0, len(pods))
		for _, p := range pods {
			out = append(out, p)
		}
		return out
	}
	var result []corev1.Pod
	_, err := watchtools.UntilWithSync(ctx, lw, &corev1.Pod{}, func(store cache.Store) (bool, error) {
		for _, o := range store.List() {
			p := o.(*corev1.Pod)
			pods[p.Name] = *p
		}
		result = snapshot()
		return cond(result), nil
	}, func(ev watch.Event) (bool, error) {
		p, ok := ev.Object.(*corev1.Pod)
		if !ok {
			return false, nil
		}
		if ev.Type == watch.Deleted {
			delete(pods, p.Name)
		} else {
			pods[p.Name] = *p
		}
		result = snapshot()
		return cond(result), nil
	})
	if err != nil {
		return result, fmt.Errorf("waiting for pods %q in namespace %s: %w", selector, ns, err)
	}
	return result, nil
}

// UntilNamed watches the one object called name, listed and watched through list and watchFn,
// until cond holds for it; cond gets nil while the object does not exist. It lists once, then
// follows the watch.
func UntilNamed(ctx context.Context, name string, example runtime.Object,
	list func(context.Context, metav1.ListOptions) (runtime.Object, error),
	watchFn func(context.Context, metav1.ListOptions) (watch.Interface, error),
	cond func(obj runtime.Object) bool) error {
	sel := fields.OneTermEqualSelector("metadata.name", name).String()
	lw := &cache.ListWatch{
		ListFunc: func(o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = sel
			return list(ctx, o)
		},
		WatchFunc: func(o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = sel
			return watchFn(ctx, o)
		},
	}
	_, err := watchtools.UntilWithSync(ctx, lw, example, func(store cache.Store) (bool, error) {
		items := store.List()
		if len(items) == 0 {
			return cond(nil), nil
		}
		return cond(items[0].(runtime.Object)), nil
	}, func(ev watch.Event) (bool, error) {
		if ev.Type == watch.Deleted {
			return cond(nil), nil
		}
		return cond(ev.Object), nil
	})
	return err
}

// WaitForPVCBound watches one PersistentVolumeClaim until it is Bound.
func WaitForPVCBound(ctx context.Context, cs kubernetes.Interface, ns, name string) error {
	pvcs := cs.CoreV1().PersistentVolumeClaims(ns)
	err := UntilNamed(ctx, name, &corev1.PersistentVolumeClaim{},
		func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return pvcs.List(ctx, o) },
		pvcs.Watch,
		func(obj runtime.Object) bool {
			pvc, ok := obj.(*corev1.PersistentVolumeClaim)
			return ok && pvc.Status.Phase == corev1.ClaimBound
		})
	if err != nil {
		return fmt.Errorf("waiting for PVC %s/%s to be bound: %w", ns, name, err)
	}
	return nil
}

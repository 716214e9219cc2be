package preview

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/devtool/devtool/internal/platform/api"
	"github.com/devtool/devtool/internal/platform/store"
)

// Sleep marks.
const (
	// AnnotationReplicas on a Deployment or StatefulSet put to sleep: its replicas before.
	AnnotationReplicas = "devtool.dev/sleep-replicas"
	// LabelPersistent "true" on a preview's namespace or one of its workloads keeps it awake.
	LabelPersistent = "devtool.dev/persistent"
)

// WakeTimeout bounds how long Wake waits for the woken workloads to be ready.
const WakeTimeout = 2 * time.Minute

func persistent(meta metav1.ObjectMeta) bool {
	return meta.Labels[LabelPersistent] == "true" || meta.Annotations[LabelPersistent] == "true"
}

// scalePatch sets replicas and the annotation (nil: removed).
func scalePatch(replicas int32, annotation *string) []byte {
	ann := "null"
	if annotation != nil {
		ann = strconv.Quote(*annotation)
	}
	return fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%s}},"spec":{"replicas":%d}}`, AnnotationReplicas, ann, replicas)
}

// sleep scales the preview's Deployments and StatefulSets to zero as its creator, recording each
// one's replicas in an annotation; the namespace or a workload labelled devtool.dev/persistent=true
// is left alone.
func (m *Manager) sleep(ctx context.Context, p *Preview) error {
	ns, err := m.o.Store.Kube.CoreV1().Namespaces().Get(ctx, p.Namespace, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if persistent(ns.ObjectMeta) {
		return nil
	}
	kc, err := m.o.Store.AsUser(p.Creator)
	if err != nil {
		return err
	}
	deps, err := kc.AppsV1().Deployments(p.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing the Deployments of preview %s: %w", p.Name, err)
	}
	for _, d := range deps.Items {
		if d.Spec.Replicas == nil || *d.Spec.Replicas == 0 || persistent(d.ObjectMeta) {
			continue
		}
		n := strconv.Itoa(int(*d.Spec.Replicas))
		if _, err := kc.AppsV1().Deployments(p.Namespace).Patch(ctx, d.Name, types.MergePatchType, scalePatch(0, &n), metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("scaling Deployment %s of preview %s to zero: %w", d.Name, p.Name, err)
		}
	}
	sts, err := kc.AppsV1().StatefulSets(p.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing the StatefulSets of preview %s: %w", p.Name, err)
	}
	for _, s := range sts.Items {
		if s.Spec.Replicas == nil || *s.Spec.Replicas == 0 || persistent(s.ObjectMeta) {
			continue
		}
		n := strconv.Itoa(int(*s.Spec.Replicas))
		if _, err := kc.AppsV1().StatefulSets(p.Namespace).Patch(ctx, s.Name, types.MergePatchType, scalePatch(0, &n), metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("scaling StatefulSet %s of preview %s to zero: %w", s.Name, p.Name, err)
		}
	}
	_, err = m.update(ctx, p.Name, func(x *Preview) { x.Sleeping = true })
	return err
}

// wake scales back what sleep scaled down (as the creator) and marks the preview awake.
func (m *Manager) wake(ctx context.Context, p *Preview) error {
	_, err := m.wakeWorkloads(ctx, p)
	return err
}

type woken struct{ deployments, statefulsets []string }

func (m *Manager) wakeWorkloads(ctx context.Context, p *Preview) (*woken, error) {
	kc, err := m.o.Store.AsUser(p.Creator)
	if err != nil {
		return nil, err
	}
	w := &woken{}
	deps, err := kc.AppsV1().Deployments(p.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing the Deployments of preview %s: %w", p.Name, err)
	}
	for _, d := range deps.Items {
		n, ok := recorded(d.Annotations)
		if !ok {
			continue
		}
		if _, err := kc.AppsV1().Deployments(p.Namespace).Patch(ctx, d.Name, types.MergePatchType, scalePatch(n, nil), metav1.PatchOptions{}); err != nil {
			return nil, fmt.Errorf("waking Deployment %s of preview %s: %w", d.Name, p.Name, err)
		}
		w.deployments = append(w.deployments, d.Name)
	}
	sts, err := kc.AppsV1().StatefulSets(p.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing the StatefulSets of preview %s: %w", p.Name, err)
	}
	for _, s := range sts.Items {
		n, ok := recorded(s.Annotations)
		if !ok {
			continue
		}
		if _, err := kc.AppsV1().StatefulSets(p.Namespace).Patch(ctx, s.Name, types.MergePatchType, scalePatch(n, nil), metav1.PatchOptions{}); err != nil {
			return nil, fmt.Errorf("waking StatefulSet %s of preview %s: %w", s.Name, p.Name, err)
		}
		w.statefulsets = append(w.statefulsets, s.Name)
	}
	now := m.o.Now().UTC()
	if _, err := m.update(ctx, p.Name, func(x *Preview) { x.Sleeping, x.LastActivity = false, now }); err != nil {
		return nil, err
	}
	m.mu.Lock()
	m.touched[p.Name] = m.o.Now()
	m.mu.Unlock()
	return w, nil
}

func recorded(ann map[string]string) (int32, bool) {
	v, ok := ann[AnnotationReplicas]
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || n > 1000 {
		return 1, true
	}
	return int32(n), true
}

// Wake is the ingress's hook for a request to an endpoint in namespace: it records the preview's
// activity and, when it sleeps, scales it back up and waits (by watch, at most WakeTimeout or ctx)
// until the woken workloads are ready, so the request that woke it is answered. A namespace that is
// no preview's is nil at once.
func (m *Manager) Wake(ctx context.Context, namespace string) error {
	p := m.cached(namespace)
	if p == nil || p.Namespace != namespace || p.Status == api.PreviewDestroying {
		return nil
	}
	if !p.Sleeping {
		m.Touch(ctx, p.Name)
		return nil
	}
	w, err := m.wakeWorkloads(ctx, p)
	if err != nil {
		return err
	}
	kc, err := m.o.Store.AsUser(p.Creator)
	if err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, WakeTimeout)
	defer cancel()
	return waitReady(wctx, kc, namespace, w)
}

// waitReady waits until the woken Deployments and StatefulSets have all their replicas ready.
func waitReady(ctx context.Context, kc kubernetes.Interface, ns string, w *woken) error {
	if len(w.deployments) > 0 {
		want := map[string]bool{}
		for _, n := range w.deployments {
			want[n] = true
		}
		lw := &cache.ListWatch{
			ListFunc:  func(o metav1.ListOptions) (runtime.Object, error) { return kc.AppsV1().Deployments(ns).List(ctx, o) },
			WatchFunc: func(o metav1.ListOptions) (watch.Interface, error) { return kc.AppsV1().Deployments(ns).Watch(ctx, o) },
		}
		ready := map[string]bool{}
		_, err := watchtools.UntilWithSync(ctx, lw, &appsv1.Deployment{}, nil, func(e watch.Event) (bool, error) {
			if d, ok := e.Object.(*appsv1.Deployment); ok && want[d.Name] {
				ready[d.Name] = d.Spec.Replicas != nil && d.Status.ReadyReplicas >= *d.Spec.Replicas && d.Status.ObservedGeneration >= d.Generation
			}
			return allTrue(ready, want), nil
		})
		if err != nil {
			return fmt.Errorf("waiting for the preview's Deployments (%v) to be ready: %w", notReady(ready, want), err)
		}
	}
	if len(w.statefulsets) > 0 {
		want := map[string]bool{}
		for _, n := range w.statefulsets {
			want[n] = true
		}
		lw := &cache.ListWatch{
			ListFunc:  func(o metav1.ListOptions) (runtime.Object, error) { return kc.AppsV1().StatefulSets(ns).List(ctx, o) },
			WatchFunc: func(o metav1.ListOptions) (watch.Interface, error) { return kc.AppsV1().StatefulSets(ns).Watch(ctx, o) },
		}
		ready := map[string]bool{}
		_, err := watchtools.UntilWithSync(ctx, lw, &appsv1.StatefulSet{}, nil, func(e watch.Event) (bool, error) {
			if s, ok := e.Object.(*appsv1.StatefulSet); ok && want[s.Name] {
				ready[s.Name] = s.Spec.Replicas != nil && s.Status.ReadyReplicas >= *s.Spec.Replicas && s.Status.ObservedGeneration >= s.Generation
			}
			return allTrue(ready, want), nil
		})
		if err != nil {
			return fmt.Errorf("waiting for the preview's StatefulSets (%v) to be ready: %w", notReady(ready, want), err)
		}
	}
	return nil
}

func allTrue(got, want map[string]bool) bool {
	for n := range want {
		if !got[n] {
			return false
		}
	}
	return true
}

func notReady(got, want map[string]bool) []string {
	var out []string
	for n := range want {
		if !got[n] {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

func errorsIsConflict(err error) bool { return errors.Is(err, store.ErrConflict) }

package deploy

import (
	"context"
	"fmt"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/devtool/devtool/internal/kube"
)

// tracker watches the environment's pods and workloads through informers and wakes waiters on
// every change, so conditions are evaluated on events, never by polling the API server.
type tracker struct {
	factory informers.SharedInformerFactory
	pods    cache.SharedIndexInformer
	deps    cache.SharedIndexInformer
	sts     cache.SharedIndexInformer
	jobs    cache.SharedIndexInformer

	mu      sync.Mutex
	changed chan struct{} // closed and replaced on every event
}

func newTracker(cs kubernetes.Interface, ns, env string) *tracker {
	f := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = kube.LabelDeployedBy + "=" + env }))
	t := &tracker{
		factory: f,
		pods:    f.Core().V1().Pods().Informer(),
		deps:    f.Apps().V1().Deployments().Informer(),
		sts:     f.Apps().V1().StatefulSets().Informer(),
		jobs:    f.Batch().V1().Jobs().Informer(),
		changed: make(chan struct{}),
	}
	h := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { t.notify() },
		UpdateFunc: func(any, any) { t.notify() },
		DeleteFunc: func(any) { t.notify() },
	}
	for _, i := range []cache.SharedIndexInformer{t.pods, t.deps, t.sts, t.jobs} {
		_, _ = i.AddEventHandler(h)
	}
	return t
}

func (t *tracker) start(ctx context.Context) error {
	t.factory.Start(ctx.Done())
	for typ, ok := range t.factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("watching %v: %w", typ, context.Cause(ctx))
		}
	}
	return nil
}

func (t *tracker) notify() {
	t.mu.Lock()
	close(t.changed)
	t.changed = make(chan struct{})
	t.mu.Unlock()
}

func (t *tracker) changes() <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.changed
}

// waitFor evaluates cond now and after every change until it returns true or an error.
// extraWake, when non-zero, also re-evaluates periodically: for checks that no watch reports
// (a TCP dial), bounded by ctx.
func (t *tracker) waitFor(ctx context.Context, extraWake time.Duration, cond func() (bool, error)) error {
	var tick <-chan time.Time
	if extraWake > 0 {
		tk := time.NewTicker(extraWake)
		defer tk.Stop()
		tick = tk.C
	}
	for {
		ch := t.changes()
		ok, err := cond()
		if err != nil || ok {
			return err
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-ch:
		case <-tick:
		}
	}
}

func (t *tracker) podsOf(selector string) []*corev1.Pod {
	sel, err := labels.Parse(selector)
	if err != nil {
		return nil
	}
	var out []*corev1.Pod
	for _, o := range t.pods.GetStore().List() {
		p := o.(*corev1.Pod)
		if p.DeletionTimestamp == nil && sel.Matches(labels.Set(p.Labels)) {
			out = append(out, p)
		}
	}
	return out
}

func (t *tracker) deployment(ns, name string) *appsv1.Deployment {
	o, ok, _ := t.deps.GetStore().GetByKey(ns + "/" + name)
	if !ok {
		return nil
	}
	return o.(*appsv1.Deployment)
}

func (t *tracker) statefulSet(ns, name string) *appsv1.StatefulSet {
	o, ok, _ := t.sts.GetStore().GetByKey(ns + "/" + name)
	if !ok {
		return nil
	}
	return o.(*appsv1.StatefulSet)
}

func (t *tracker) job(ns, name string) *batchv1.Job {
	o, ok, _ := t.jobs.GetStore().GetByKey(ns + "/" + name)
	if !ok {
		return nil
	}
	return o.(*batchv1.Job)
}

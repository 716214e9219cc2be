package dev

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"

	"github.com/devtool/devtool/internal/kube"
)

// Change is what the watcher saw.
type Change int

// What can happen to an active dev container from outside.
const (
	// OriginalChanged: someone redeployed the original (another template, or scaled it up):
	// activate again to rebuild the mirror from it.
	OriginalChanged Change = iota + 1
	// OriginalDeleted: the original workload is gone; `up` stops.
	OriginalDeleted
	// Deactivated: `down` ran elsewhere (mirror deleted and original restored); `up` stops.
	Deactivated
	// MirrorDeleted: the mirror is gone but the original still says it is replaced; `up` stops.
	MirrorDeleted
)

func (c Change) String() string {
	switch c {
	case OriginalChanged:
		return "the original workload was redeployed"
	case OriginalDeleted:
		return "the original workload was deleted"
	case Deactivated:
		return "the dev container was stopped by 'devtool down' elsewhere"
	case MirrorDeleted:
		return "the dev container's workload was deleted"
	}
	return "unknown"
}

// Watch follows the original and the mirror of an active dev container until one of them
// changes in a way `up` must react to, and says which. It returns ctx's error when ctx ends.
func Watch(ctx context.Context, cs kubernetes.Interface, ns string, a *Active) (Change, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type result struct {
		c   Change
		err error
	}
	results := make(chan result, 2)
	go func() {
		var got Change
		ex, list, watch := watchWorkload(cs, ns, a.Original.Kind())
		err := kube.UntilNamed(ctx, a.Original.Name(), ex, list, watch, func(obj runtime.Object) bool {
			if obj == nil {
				got = OriginalDeleted
				return true
			}
			w, ok := asWorkload(obj)
			if !ok {
				return false
			}
			if w.Meta().Annotations[AnnotationActive] == "" {
				got = Deactivated
				return true
			}
			if SpecDigest(w) != a.Digest || w.Replicas() > 0 {
				got = OriginalChanged
				return true
			}
			return false
		})
		results <- result{got, err}
	}()
	go func() {
		var got Change
		ex, list, watch := watchWorkload(cs, ns, a.Mirror.Kind())
		err := kube.UntilNamed(ctx, a.Mirror.Name(), ex, list, watch, func(obj runtime.Object) bool {
			if obj == nil {
				got = MirrorDeleted
				return true
			}
			return false
		})
		results <- result{got, err}
	}()
	r := <-results
	cancel()
	<-results
	if r.c == MirrorDeleted {
		// down deletes the mirror first, then restores the original: tell the two apart.
		w, ok, err := getWorkload(context.WithoutCancel(ctx), cs, ns, a.Original.Kind(), a.Original.Name())
		switch {
		case err != nil:
		case !ok:
			r.c = OriginalDeleted
		case w.Meta().Annotations[AnnotationActive] == "" || w.Replicas() > 0:
			r.c = Deactivated
		}
	}
	if r.c != 0 {
		return r.c, nil
	}
	if r.err == nil || errors.Is(r.err, context.Canceled) || ctx.Err() != nil {
		return 0, context.Cause(ctx)
	}
	return 0, fmt.Errorf("watching %s: %w", a.Original, r.err)
}

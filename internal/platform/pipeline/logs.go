package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/devtool/devtool/internal/platform/api"
	"github.com/devtool/devtool/internal/platform/runspec"
	"github.com/devtool/devtool/internal/platform/store"
)

// ErrLogGone says a run's log is no longer kept (its Job was pruned or deleted).
var ErrLogGone = errors.New("the log of this run is no longer kept")

// LogReader reads one run's log as one caller: OpenLog checked the caller may read it.
type LogReader struct {
	m   *Manager
	kc  kubernetes.Interface
	Run *Run
}

// OpenLog finds run ("latest" or a number) of pipeline name in ns for a member of ns and checks,
// as the caller, that the caller may list the run's pods (the API server decides, as for kubectl).
func (m *Manager) OpenLog(ctx context.Context, caller *store.User, ns, name, run string) (*LogReader, error) {
	r, err := m.find(caller, ns, name, run)
	if err != nil {
		return nil, err
	}
	kc, err := m.o.Store.AsUser(caller.Name)
	if err != nil {
		return nil, err
	}
	if _, err := m.runPod(ctx, kc, r, false); err != nil {
		return nil, err
	}
	return &LogReader{m: m, kc: kc, Run: r}, nil
}

// WriteTo writes the run's log to w. A finished run's log is its last LogBytes, with a first line
// saying how much was left out. With follow, a run still going on is streamed live from the start
// of its pod until it ends (waiting for the pod to start first); flush is called after each write.
func (lr *LogReader) WriteTo(ctx context.Context, w io.Writer, follow bool, flush func()) error {
	m, r, kc := lr.m, lr.Run, lr.kc
	if cur := m.cached(r.Namespace, r.Name, r.Number); cur != nil {
		r = cur
	}
	pod, err := m.runPod(ctx, kc, r, follow && !api.Finished(r.Phase))
	if err != nil || pod == nil {
		return err
	}
	live := follow && !terminated(pod)
	stream, err := kc.CoreV1().Pods(r.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{Container: runspec.Container, Follow: live}).Stream(ctx)
	if err != nil {
		if apierrors.IsForbidden(err) {
			return fmt.Errorf("reading the log of run #%d: the Kubernetes API refused it for your account: %w", r.Number, store.ErrForbidden)
		}
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("run #%d of pipeline %q: %w", r.Number, r.Name, ErrLogGone)
		}
		return fmt.Errorf("reading the log of run #%d: %w", r.Number, err)
	}
	defer stream.Close()
	if live {
		buf := make([]byte, 32<<10)
		for {
			n, rerr := stream.Read(buf)
			if n > 0 {
				if _, err := w.Write(buf[:n]); err != nil {
					return err
				}
				flush()
			}
			if rerr == io.EOF {
				return nil
			} else if rerr != nil {
				return rerr
			}
		}
	}
	tail := &TailBuffer{Max: int(m.o.LogBytes)}
	if _, err := io.Copy(tail, stream); err != nil {
		return err
	}
	if tail.Dropped > 0 {
		fmt.Fprintf(w, "[devtool: the first %d bytes of this run's log are not kept: the platform keeps the last %d KiB of each run]\n",
			tail.Dropped, m.o.LogBytes>>10)
	}
	_, err = w.Write(tail.Bytes())
	return err
}

func terminated(p *corev1.Pod) bool {
	if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return true
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name == runspec.Container && cs.State.Terminated != nil {
			return true
		}
	}
	return false
}

func started(p *corev1.Pod) bool {
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name == runspec.Container && (cs.State.Running != nil || cs.State.Terminated != nil) {
			return true
		}
	}
	return false
}

// runPod finds the run's pod (as the caller). With wait, it waits by watch until the runner's
// container has started, or the run has ended without one (nil, nil). A finished run without a pod
// is ErrLogGone.
func (m *Manager) runPod(ctx context.Context, kc kubernetes.Interface, r *Run, wait bool) (*corev1.Pod, error) {
	sel := labelJobName + "=" + r.Job
	newest := func(items []corev1.Pod) *corev1.Pod {
		if len(items) == 0 {
			return nil
		}
		sort.Slice(items, func(i, j int) bool { return items[i].CreationTimestamp.After(items[j].CreationTimestamp.Time) })
		return &items[0]
	}
	l, err := kc.CoreV1().Pods(r.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if apierrors.IsForbidden(err) {
		return nil, fmt.Errorf("reading the pods of run #%d: the Kubernetes API refused it for your account: %w", r.Number, store.ErrForbidden)
	} else if err != nil {
		return nil, err
	}
	if p := newest(l.Items); p != nil && (started(p) || !wait) {
		return p, nil
	}
	if !wait {
		if api.Finished(r.Phase) {
			return nil, fmt.Errorf("run #%d of pipeline %q: %w (its Job was pruned or deleted)", r.Number, r.Name, ErrLogGone)
		}
		return nil, nil // not started yet: nothing to show
	}
	// Wait for the container to start; stop waiting when the run ends without one.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		for {
			ch := m.changes()
			if cur := m.cached(r.Namespace, r.Name, r.Number); cur == nil || api.Finished(cur.Phase) {
				cancel()
				return
			}
			select {
			case <-ch:
			case <-wctx.Done():
				return
			}
		}
	}()
	lw := &cache.ListWatch{
		ListFunc: func(o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector = sel
			return kc.CoreV1().Pods(r.Namespace).List(wctx, o)
		},
		WatchFunc: func(o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = sel
			return kc.CoreV1().Pods(r.Namespace).Watch(wctx, o)
		},
	}
	var found *corev1.Pod
	_, err = watchtools.UntilWithSync(wctx, lw, &corev1.Pod{}, nil, func(e watch.Event) (bool, error) {
		if p, ok := e.Object.(*corev1.Pod); ok && e.Type != watch.Deleted && started(p) {
			found = p
			return true, nil
		}
		return false, nil
	})
	if found != nil {
		return found, nil
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, watchtools.ErrWatchClosed) && wctx.Err() == nil {
		return nil, err
	}
	// the run ended: its pod may have run after all
	l, err = kc.CoreV1().Pods(r.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, err
	}
	if p := newest(l.Items); p != nil && started(p) {
		return p, nil
	}
	return nil, nil
}

// TailBuffer keeps the last Max bytes written to it and counts what it dropped.
type TailBuffer struct {
	Max     int
	Dropped int64
	buf     []byte
}

func (t *TailBuffer) Write(p []byte) (int, error) {
	n := len(p)
	if len(p) >= t.Max {
		t.Dropped += int64(len(t.buf) + len(p) - t.Max)
		t.buf = append(t.buf[:0], p[len(p)-t.Max:]...)
		return n, nil
	}
	if over := len(t.buf) + len(p) - t.Max; over > 0 {
		t.Dropped += int64(over)
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	t.buf = append(t.buf, p...)
	return n, nil
}

// Bytes is what is kept.
func (t *TailBuffer) Bytes() []byte { return t.buf }

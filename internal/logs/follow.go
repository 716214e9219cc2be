package logs

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// Options say which pods to follow and where lines go.
type Options struct {
	Client    kubernetes.Interface
	Namespace string
	// Environment selects the pods labelled dev.devtool/deployed-by=<Environment>. With All it is
	// ignored and every pod of the namespace is followed.
	Environment string
	All         bool
	Filter      Filter

	Since time.Duration // only lines newer than this (0: no limit)
	Tail  int64         // last lines of each container found running at start (-1: all)

	Out       io.Writer // receives whole formatted lines, one Write each
	Formatter Formatter // TextFormatter{} when nil
	// Notify receives the few messages meant for the user (no pods match yet, a stream that keeps
	// failing); nil drops them.
	Notify func(string)
	Logger *slog.Logger // debug logs; nil discards
}

// Follow streams the logs of every started container (init containers included) of every selected pod,
// and of pods and container instances that start later, until ctx is cancelled. Cancellation is
// the normal end: Follow then returns nil once every stream has stopped. It returns an error when
// the pods cannot be listed or Out cannot be written.
//
// Lines of containers already running when Follow starts are limited by Since and Tail; a container
// instance that starts later (a new pod, a restart) is shown from its first line. When a stream ends
// while its container still runs, Follow reconnects from the last line's timestamp without repeating
// lines.
func Follow(ctx context.Context, o Options) error {
	if o.Formatter == nil {
		o.Formatter = TextFormatter{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Notify == nil {
		o.Notify = func(string) {}
	}
	sel := ""
	if !o.All {
		if o.Environment == "" {
			return errors.New("logs: no environment name (and not following the whole namespace)")
		}
		sel = Selector(o.Environment)
	}
	pods := o.Client.CoreV1().Pods(o.Namespace)
	if _, err := pods.List(ctx, metav1.ListOptions{LabelSelector: sel, Limit: 1}); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("listing pods in namespace %s: %w", o.Namespace, err)
	}

	parent := ctx
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	f := &follower{o: o, ctx: ctx, cancel: cancel, lw: &lineWriter{w: o.Out, fmt: o.Formatter}, tailers: map[string]*tailer{}}

	inf := cache.NewSharedIndexInformer(&cache.ListWatch{
		ListFunc: func(lo metav1.ListOptions) (runtime.Object, error) {
			lo.LabelSelector = sel
			return pods.List(ctx, lo)
		},
		WatchFunc: func(lo metav1.ListOptions) (watch.Interface, error) {
			lo.LabelSelector = sel
			return pods.Watch(ctx, lo)
		},
	}, &corev1.Pod{}, 0, cache.Indexers{})
	f.store = inf.GetStore()
	reg, err := inf.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		AddFunc:    func(obj any, initial bool) { f.sync(obj, initial) },
		UpdateFunc: func(_, obj any) { f.sync(obj, false) },
		DeleteFunc: f.forget,
	})
	if err != nil {
		return err
	}
	informerDone := make(chan struct{})
	go func() { defer close(informerDone); inf.Run(ctx.Done()) }()

	if cache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
		f.mu.Lock()
		matched := f.matched
		f.mu.Unlock()
		if !matched {
			o.Notify(f.noneMessage(sel))
		}
	}
	<-ctx.Done()
	<-informerDone
	f.wg.Wait()
	if parent.Err() != nil {
		return nil
	}
	return context.Cause(ctx)
}

func (f *follower) noneMessage(sel string) string {
	what := fmt.Sprintf("pods with label %s in namespace %s", sel, f.o.Namespace)
	if sel == "" {
		what = "pods in namespace " + f.o.Namespace
	}
	if s := f.o.Filter.String(); s != "" {
		what += " (" + s + ")"
	}
	return fmt.Sprintf("No %s yet; waiting for them to start (Ctrl-C to stop).", what)
}

type follower struct {
	o      Options
	ctx    context.Context
	cancel context.CancelCauseFunc
	lw     *lineWriter
	store  cache.Store
	wg     sync.WaitGroup

	mu      sync.Mutex
	matched bool               // a selected pod has been seen
	tailers map[string]*tailer // by pod UID + "/" + container
}

// tailer is the log of one container of one pod, across the container's restarts. At most one
// stream goroutine runs per tailer (active); only that goroutine touches last.
type tailer struct {
	key, pod, uid, container, service, prefix string

	active   bool
	streamed string // the container instance (container ID) last streamed
	tailID   string // the instance that was running at start: its first stream applies --tail
	last     time.Time
}

// instance identifies a started container instance, "" when it has not started (waiting).
func instance(s corev1.ContainerStatus) string {
	if s.State.Running == nil && s.State.Terminated == nil {
		return ""
	}
	return s.ContainerID
}

func statuses(p *corev1.Pod) []corev1.ContainerStatus {
	all := make([]corev1.ContainerStatus, 0, len(p.Status.InitContainerStatuses)+len(p.Status.ContainerStatuses))
	all = append(all, p.Status.InitContainerStatuses...)
	return append(all, p.Status.ContainerStatuses...)
}

func (f *follower) sync(obj any, initial bool) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	service := ServiceName(pod)
	if !f.o.Filter.Match(service) {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.matched = true
	for _, s := range statuses(pod) {
		key := string(pod.UID) + "/" + s.Name
		t := f.tailers[key]
		if t == nil {
			t = &tailer{key: key, pod: pod.Name, uid: string(pod.UID), container: s.Name, service: service,
				prefix: ShortPodName(service, pod.Name) + "/" + s.Name}
			f.tailers[key] = t
		}
		id := instance(s)
		if t.active || id == "" || id == t.streamed {
			continue
		}
		if initial && t.streamed == "" { // started before we did: --tail applies to it
			t.tailID = id
		}
		t.active, t.streamed = true, id
		f.wg.Add(1)
		go f.stream(t)
	}
}

func (f *follower) forget(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for k, t := range f.tailers {
		if t.uid == string(pod.UID) && !t.active {
			delete(f.tailers, k)
		}
	}
}

// current is the container's started instance in the informer's view, and whether it is running.
// gone is true when the pod no longer exists.
func (f *follower) current(t *tailer) (id string, running, gone bool) {
	obj, ok, _ := f.store.GetByKey(f.o.Namespace + "/" + t.pod)
	pod, _ := obj.(*corev1.Pod)
	if !ok || pod == nil || string(pod.UID) != t.uid {
		return "", false, true
	}
	for _, s := range statuses(pod) {
		if s.Name == t.container {
			return instance(s), s.State.Running != nil, false
		}
	}
	return "", false, false
}

// stream follows one tailer until its container instance ends and no newer one has started,
// reconnecting when a stream drops while the instance still runs.
func (f *follower) stream(t *tailer) {
	defer f.wg.Done()
	backoff := 500 * time.Millisecond
	failures := 0
	for {
		connected, err := f.streamOnce(t)
		if f.ctx.Err() != nil {
			return
		}
		if connected {
			failures, backoff = 0, 500*time.Millisecond
		}
		if err != nil {
			failures++
			f.o.Logger.Debug("log stream", "pod", t.pod, "container", t.container, "error", err)
			if failures == 3 && !apierrors.IsNotFound(err) {
				f.o.Notify(fmt.Sprintf("Cannot stream the logs of %s/%s: %v (retrying)", t.pod, t.container, err))
			}
		}
		f.mu.Lock()
		id, running, gone := f.current(t)
		switch {
		case gone:
			delete(f.tailers, t.key)
			t.active = false
			f.mu.Unlock()
			return
		case id != "" && id != t.streamed: // a newer instance: follow it from its first line
			t.streamed = id
			f.mu.Unlock()
			continue
		case id == t.streamed && (running || err != nil && failures < 10):
			// the stream dropped while the container still runs (or the informer has not seen it end)
			f.mu.Unlock()
			select {
			case <-f.ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 5*time.Second)
			continue
		default: // the instance ended; the informer starts the next one
			t.active = false
			f.mu.Unlock()
			return
		}
	}
}

// streamOnce reads one log stream to its end. connected reports whether the stream opened.
func (f *follower) streamOnce(t *tailer) (connected bool, err error) {
	lo := &corev1.PodLogOptions{Container: t.container, Follow: true, Timestamps: true}
	switch {
	case !t.last.IsZero():
		since := metav1.NewTime(t.last) // sent with second precision: lines up to t.last are skipped below
		lo.SinceTime = &since
	default:
		if f.o.Since > 0 {
			secs := int64((f.o.Since + time.Second - 1) / time.Second)
			lo.SinceSeconds = &secs
		}
		if f.o.Tail >= 0 && t.streamed == t.tailID {
			tail := f.o.Tail
			lo.TailLines = &tail
		}
	}
	rc, err := f.o.Client.CoreV1().Pods(f.o.Namespace).GetLogs(t.pod, lo).Stream(f.ctx)
	if err != nil {
		return false, err
	}
	defer rc.Close()
	r := bufio.NewReaderSize(rc, 32*1024)
	for {
		b, rerr := r.ReadBytes('\n')
		if len(b) > 0 {
			if err := f.emit(t, b); err != nil {
				f.cancel(err)
				return true, err
			}
		}
		if rerr == io.EOF {
			return true, nil
		}
		if rerr != nil {
			return true, rerr
		}
	}
}

func (f *follower) emit(t *tailer, b []byte) error {
	b = bytes.TrimSuffix(b, []byte("\n"))
	b = bytes.TrimSuffix(b, []byte("\r"))
	l := Line{Namespace: f.o.Namespace, Pod: t.pod, Container: t.container, Service: t.service, Prefix: t.prefix}
	if i := bytes.IndexByte(b, ' '); i > 0 {
		if ts, err := time.Parse(time.RFC3339Nano, string(b[:i])); err == nil {
			if !t.last.IsZero() && !ts.After(t.last) {
				return nil // already written before a reconnect
			}
			t.last, l.Time, l.RawTime = ts, ts, string(b[:i])
			b = b[i+1:]
		}
	} else if ts, err := time.Parse(time.RFC3339Nano, string(b)); err == nil { // an empty line
		if !t.last.IsZero() && !ts.After(t.last) {
			return nil
		}
		t.last, l.Time, l.RawTime = ts, ts, string(b)
		b = nil
	}
	l.Text = string(b)
	return f.lw.write(l)
}

package logs

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TailBytes caps what Tail reads of one container.
const TailBytes = 1 << 20

// Tail writes the last lines of every started container of the selected pods (the same selection
// as Follow: Environment or All, Filter, Since, Tail lines per container), merged in time order,
// and returns once every stream has ended: a snapshot, not a follow. At most TailBytes are read of
// each container.
func Tail(ctx context.Context, o Options) error {
	if o.Formatter == nil {
		o.Formatter = TextFormatter{}
	}
	lines, err := TailLines(ctx, o)
	if err != nil {
		return err
	}
	lw := &lineWriter{w: o.Out, fmt: o.Formatter}
	for _, l := range lines {
		if err := lw.write(l); err != nil {
			return err
		}
	}
	return nil
}

// TailLines is Tail's lines, in time order (Out and Formatter are not used). Containers that could
// not be read are told to Notify; when none could, the error says why.
func TailLines(ctx context.Context, o Options) ([]Line, error) {
	sel := ""
	if !o.All {
		if o.Environment == "" {
			return nil, errors.New("logs: no environment name (and not reading the whole namespace)")
		}
		sel = Selector(o.Environment)
	}
	pods, err := o.Client.CoreV1().Pods(o.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, fmt.Errorf("listing pods in namespace %s: %w", o.Namespace, err)
	}
	type job struct {
		pod       *corev1.Pod
		container string
		service   string
	}
	var jobs []job
	for i := range pods.Items {
		p := &pods.Items[i]
		service := ServiceName(p)
		if !o.Filter.Match(service) {
			continue
		}
		for _, s := range statuses(p) {
			if instance(s) != "" {
				jobs = append(jobs, job{pod: p, container: s.Name, service: service})
			}
		}
	}
	var (
		mu    sync.Mutex
		lines []Line
		errs  []error
		wg    sync.WaitGroup
		slots = make(chan struct{}, 8)
	)
	for _, j := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				return
			}
			defer func() { <-slots }()
			got, err := tailOne(ctx, o, j.pod, j.container, j.service)
			mu.Lock()
			defer mu.Unlock()
			lines = append(lines, got...)
			if err != nil {
				errs = append(errs, err)
			}
		}()
	}
	wg.Wait()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	sort.SliceStable(lines, func(i, k int) bool { return lines[i].Time.Before(lines[k].Time) })
	if len(errs) > 0 && len(lines) == 0 {
		return nil, errors.Join(errs...)
	}
	for _, e := range errs {
		if o.Notify != nil {
			o.Notify(e.Error())
		}
	}
	return lines, nil
}

func tailOne(ctx context.Context, o Options, pod *corev1.Pod, container, service string) ([]Line, error) {
	limit := int64(TailBytes)
	lo := &corev1.PodLogOptions{Container: container, Timestamps: true, LimitBytes: &limit}
	if o.Since > 0 {
		secs := int64((o.Since + time.Second - 1) / time.Second)
		lo.SinceSeconds = &secs
	}
	if o.Tail >= 0 {
		t := o.Tail
		lo.TailLines = &t
	}
	rc, err := o.Client.CoreV1().Pods(o.Namespace).GetLogs(pod.Name, lo).Stream(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the logs of %s/%s: %w", pod.Name, container, err)
	}
	defer rc.Close()
	prefix := ShortPodName(service, pod.Name) + "/" + container
	var out []Line
	r := bufio.NewReaderSize(rc, 32*1024)
	for {
		b, rerr := r.ReadString('\n')
		if b != "" {
			b = strings.TrimSuffix(strings.TrimSuffix(b, "\n"), "\r")
			l := Line{Namespace: o.Namespace, Pod: pod.Name, Container: container, Service: service, Prefix: prefix}
			ts, text, _ := strings.Cut(b, " ")
			if t, err := time.Parse(time.RFC3339Nano, ts); err == nil {
				l.Time, l.RawTime, l.Text = t, ts, text
			} else {
				l.Text = b
			}
			out = append(out, l)
		}
		if rerr == io.EOF {
			return out, nil
		}
		if rerr != nil {
			return out, fmt.Errorf("reading the logs of %s/%s: %w", pod.Name, container, rerr)
		}
	}
}

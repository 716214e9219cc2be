package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	batchlisters "k8s.io/client-go/listers/batch/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/devtool/devtool/internal/platform/api"
	"github.com/devtool/devtool/internal/platform/runspec"
)

// Controller timings.
const (
	resyncEvery = 30 * time.Second
	// stuckPodAfter is how long a run's pod may wait with a reason that does not heal by itself
	// (a missing image, a missing Secret) before the run is ended with that reason.
	stuckPodAfter = time.Minute
	maxMessage    = 3 << 10
)

var fatalWaiting = map[string]bool{
	"ErrImagePull": true, "ImagePullBackOff": true, "InvalidImageName": true,
	"CreateContainerConfigError": true, "CreateContainerError": true,
}

type controller struct {
	m     *Manager
	jobs  batchlisters.JobLister
	queue workqueue.TypedRateLimitingInterface[string]
}

// RunController finishes runs until ctx ends; run it on the leader only. It records a finished
// run's result (from its Job and its pod's termination message), revokes the run's token (deletes
// the anchor Secret, and the token's copy in the target namespace as the user), calls OnFinish,
// and keeps the last KeepRuns runs of the pipeline, deleting older runs and their Jobs.
func (m *Manager) RunController(ctx context.Context) error {
	f := informers.NewSharedInformerFactoryWithOptions(m.o.Store.Kube, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = LabelRun }))
	ji := f.Batch().V1().Jobs()
	c := &controller{m: m, jobs: ji.Lister(),
		queue: workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())}
	defer c.queue.ShutDown()
	onJob := func(obj any) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		if j, ok := obj.(*batchv1.Job); ok {
			if n, err := strconv.Atoi(j.Labels[LabelRun]); err == nil && j.Labels[LabelPipeline] != "" {
				c.queue.Add(ID(j.Namespace, j.Labels[LabelPipeline], n))
			}
		}
	}
	if _, err := ji.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: onJob, UpdateFunc: func(_, o any) { onJob(o) }, DeleteFunc: onJob,
	}); err != nil {
		return err
	}
	f.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), ji.Informer().HasSynced) {
		return ctx.Err()
	}
	go func() {
		t := time.NewTicker(resyncEvery)
		defer t.Stop()
		for {
			c.resync()
			select {
			case <-ctx.Done():
				c.queue.ShutDown()
				return
			case <-t.C:
			}
		}
	}()
	for c.next(ctx) {
	}
	return ctx.Err()
}

// resync queues every unfinished run, and every finished one not yet cleaned up.
func (c *controller) resync() {
	objs, err := c.m.runs.ByNamespace(c.m.o.Store.Namespace).List(labels.Everything())
	if err != nil {
		return
	}
	for _, o := range objs {
		u := o.(*unstructured.Unstructured)
		r := runFrom(u)
		if !api.Finished(r.Phase) || !cleaned(u) {
			c.queue.Add(u.GetName())
		}
	}
}

func cleaned(u *unstructured.Unstructured) bool {
	v, _, _ := unstructured.NestedBool(u.Object, "status", "cleaned")
	return v
}

func (c *controller) next(ctx context.Context) bool {
	key, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(key)
	pctx, cancel := context.WithTimeout(ctx, time.Minute)
	err := c.process(pctx, key)
	cancel()
	if err != nil && ctx.Err() == nil {
		c.m.o.Log.Warn("pipeline run not processed", "run", key, "err", err)
		c.queue.AddRateLimited(key)
		return true
	}
	c.queue.Forget(key)
	return true
}

func (c *controller) process(ctx context.Context, key string) error {
	o, err := c.m.runs.ByNamespace(c.m.o.Store.Namespace).Get(key)
	if apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		return err
	}
	u := o.(*unstructured.Unstructured)
	r := runFrom(u)
	if api.Finished(r.Phase) {
		if !cleaned(u) {
			return c.cleanup(ctx, r)
		}
		return nil
	}
	job, err := c.jobs.Jobs(r.Namespace).Get(r.Job)
	if apierrors.IsNotFound(err) {
		if c.m.o.Now().Sub(r.Created) < stuckAfter {
			c.queue.AddAfter(key, stuckAfter)
			return nil
		}
		return c.finish(ctx, r, outcome{phase: api.PhaseFailed, step: api.StepStart,
			message: "the run's Job is gone: it was deleted, or the platform stopped before it was created"})
	} else if err != nil {
		return err
	}
	if job.Labels[LabelPipeline] != r.Name || job.Labels[LabelRun] != itoa(r.Number) {
		return c.finish(ctx, r, outcome{phase: api.PhaseFailed, step: api.StepStart, message: "the Job " + r.Job + " is not this run's"})
	}
	if done, failed, reason, msg := jobDone(job); done {
		return c.finish(ctx, r, c.outcome(ctx, r, job, failed, reason, msg))
	}
	if c.m.o.Now().Sub(r.Created) > stuckPodAfter {
		if why := c.stuckPod(ctx, r); why != "" {
			kc, err := c.m.o.Store.AsUser(r.User)
			if err == nil {
				bg := metav1.DeletePropagationBackground
				err = kc.BatchV1().Jobs(r.Namespace).Delete(ctx, r.Job, metav1.DeleteOptions{PropagationPolicy: &bg})
			}
			if err != nil && !apierrors.IsNotFound(err) {
				c.m.o.Log.Warn("the Job of a run whose pod cannot start was not deleted", "run", key, "err", err)
			}
			return c.finish(ctx, r, outcome{phase: api.PhaseFailed, step: api.StepStart, message: "the run's pod could not start: " + why})
		}
	}
	return nil
}

func jobDone(j *batchv1.Job) (done, failed bool, reason, msg string) {
	for _, cond := range j.Status.Conditions {
		if cond.Status != corev1.ConditionTrue {
			continue
		}
		switch cond.Type {
		case batchv1.JobComplete:
			return true, false, cond.Reason, cond.Message
		case batchv1.JobFailed:
			return true, true, cond.Reason, cond.Message
		}
	}
	return false, false, "", ""
}

// stuckPod says why the run's pod waits for ever ("" when it does not).
func (c *controller) stuckPod(ctx context.Context, r *Run) string {
	pod := c.pod(ctx, r)
	if pod == nil {
		return ""
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil && fatalWaiting[w.Reason] {
			return strings.TrimSpace(w.Reason + ": " + w.Message)
		}
	}
	return ""
}

// pod is the newest pod of the run's Job (read with the platform's rights), nil when none.
func (c *controller) pod(ctx context.Context, r *Run) *corev1.Pod {
	l, err := c.m.o.Store.Kube.CoreV1().Pods(r.Namespace).List(ctx, metav1.ListOptions{LabelSelector: labelJobName + "=" + r.Job})
	if err != nil || len(l.Items) == 0 {
		return nil
	}
	sort.Slice(l.Items, func(i, j int) bool { return l.Items[i].CreationTimestamp.After(l.Items[j].CreationTimestamp.Time) })
	return &l.Items[0]
}

type outcome struct {
	phase, step, message string
	exit                 int
	started              *time.Time
	res                  runspec.Result
}

// outcome reads the run's result off its finished Job and its pod's termination message.
func (c *controller) outcome(ctx context.Context, r *Run, job *batchv1.Job, failed bool, reason, condMsg string) outcome {
	out := outcome{phase: api.PhaseSucceeded}
	var term *corev1.ContainerStateTerminated
	var wait *corev1.ContainerStateWaiting
	if pod := c.pod(ctx, r); pod != nil {
		for _, cs := range pod.Status.ContainerStatuses {
			if cs.Name != runspec.Container {
				continue
			}
			term, wait = cs.State.Terminated, cs.State.Waiting
			if term == nil {
				term = cs.LastTerminationState.Terminated
			}
		}
	}
	if term != nil {
		out.exit = int(term.ExitCode)
		if !term.StartedAt.IsZero() {
			t := term.StartedAt.UTC()
			out.started = &t
		}
		if msg := strings.TrimSpace(term.Message); msg != "" {
			if err := json.Unmarshal([]byte(msg), &out.res); err != nil {
				out.res.Tail = msg
			}
		}
	}
	if !failed {
		return out
	}
	out.phase, out.step = api.PhaseFailed, out.res.Step
	timeout := time.Duration(r.TimeoutSeconds) * time.Second
	switch {
	case out.res.TimedOut || reason == batchv1.JobReasonDeadlineExceeded:
		out.phase = api.PhaseTimedOut
		during := ""
		if out.step != "" {
			during = " during step " + out.step
		}
		out.message = fmt.Sprintf("the run timed out: it did not finish within %s (--timeout) and was stopped%s", timeout, during)
		if term == nil {
			out.step = api.StepStart
			out.message = fmt.Sprintf("the run timed out: its pod did not start within %s (--timeout)", timeout)
			if wait != nil {
				out.message += ": " + strings.TrimSpace(wait.Reason+" "+wait.Message)
			}
		}
		if out.res.Tail != "" {
			out.message += "\n" + out.res.Tail
		}
	case term == nil:
		out.step = api.StepStart
		out.message = "the run's pod did not start"
		if wait != nil {
			out.message += ": " + strings.TrimSpace(wait.Reason+" "+wait.Message)
		} else if condMsg != "" {
			out.message += ": " + condMsg
		}
	default:
		if out.step == "" {
			out.step = r.Action
		}
		out.message = out.res.Tail
		if out.message == "" {
			out.message = fmt.Sprintf("the runner ended with exit code %d (%s)", term.ExitCode, term.Reason)
		}
	}
	if out.exit == 0 {
		out.exit = 1
	}
	return out
}

// finish revokes the run's token, then records the outcome (so a finished run never has a live
// token), then calls OnFinish and prunes.
func (c *controller) finish(ctx context.Context, r *Run, o outcome) error {
	c.revoke(ctx, r)
	msg := o.message
	if len(msg) > maxMessage {
		msg = "…" + msg[len(msg)-maxMessage:]
	}
	done, err := c.m.update(ctx, r, func(x *Run) {
		now := c.m.o.Now().UTC()
		x.Phase, x.FailedStep, x.Message, x.ExitCode, x.Finished = o.phase, o.step, msg, o.exit, &now
		if o.phase == api.PhaseSucceeded {
			x.FailedStep, x.Message, x.ExitCode = "", "", 0
		}
		if o.started != nil {
			x.Started = o.started
		}
		if o.res.Commit != "" {
			x.Commit = o.res.Commit
		}
		if x.Branch == "" && o.res.Branch != "" {
			x.Branch = o.res.Branch
		}
		if o.res.CloneMillis > 0 {
			x.CloneMillis = o.res.CloneMillis
		}
	})
	if err != nil {
		return err
	}
	return c.after(ctx, done)
}

// revoke deletes the run's token anchor (which revokes the token) and the token's Secret in the
// target namespace (as the run's user).
func (c *controller) revoke(ctx context.Context, r *Run) {
	c.m.deleteAnchor(ctx, r)
	if kc, err := c.m.o.Store.AsUser(r.User); err == nil {
		c.m.deleteRunSecret(ctx, kc, r)
	}
}

// cleanup finishes the work on a run recorded finished but not cleaned (the leader changed).
func (c *controller) cleanup(ctx context.Context, r *Run) error {
	c.revoke(ctx, r)
	return c.after(ctx, r)
}

// after calls OnFinish, prunes old runs and marks the run cleaned.
func (c *controller) after(ctx context.Context, r *Run) error {
	if c.m.o.OnFinish != nil {
		c.m.o.OnFinish(ctx, r)
	}
	c.prune(ctx, r.Namespace, r.Name)
	patch := []byte(`{"status":{"cleaned":true}}`)
	_, err := c.m.o.Store.Dyn.Resource(RunResource).Namespace(c.m.o.Store.Namespace).
		Patch(ctx, ID(r.Namespace, r.Name, r.Number), types.MergePatchType, patch, metav1.PatchOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// prune keeps the newest KeepRuns runs of a pipeline: older ones lose their Job (and with it the
// pod and its log, deleted as the run's user) and their record.
func (c *controller) prune(ctx context.Context, ns, name string) {
	rs, err := c.m.cachedRuns(ns, name)
	if err != nil || len(rs) <= c.m.o.KeepRuns {
		return
	}
	for _, r := range rs[c.m.o.KeepRuns:] {
		if !api.Finished(r.Phase) {
			continue
		}
		if kc, err := c.m.o.Store.AsUser(r.User); err == nil {
			bg := metav1.DeletePropagationBackground
			if err := kc.BatchV1().Jobs(r.Namespace).Delete(ctx, r.Job, metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil && !apierrors.IsNotFound(err) {
				c.m.o.Log.Warn("an old run's Job was not deleted (its TTL will)", "run", ID(ns, name, r.Number), "err", err)
			}
		}
		err := c.m.o.Store.Dyn.Resource(RunResource).Namespace(c.m.o.Store.Namespace).Delete(ctx, ID(ns, name, r.Number), metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			c.m.o.Log.Warn("an old run was not deleted", "run", ID(ns, name, r.Number), "err", err)
		}
	}
}

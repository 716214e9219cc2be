package dev

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/devtool/devtool/internal/kube"
	"github.com/devtool/devtool/internal/manifest"
)

// State is a step of a dev container's life, as written to the state file and shown to the user.
type State string

// The states of `up`.
const (
	StateActivating    State = "activating"
	StateStarting      State = "starting"
	StatePulling       State = "pulling"
	StateAttaching     State = "attaching"
	StateStartingSync  State = "startingSync"
	StateSynchronizing State = "synchronizing"
	StateReady         State = "ready"
	// StateHalted: the dev container is ready, but the synchronization of a folder stopped
	// before deleting what looked like an accident (an emptied or replaced folder, a mass
	// deletion); the message names the folder and what was seen. The other folders go on.
	StateHalted State = "halted"
	StateFailed State = "failed"
)

// Event is one state change with a sentence saying what happens.
type Event struct {
	State   State
	Message string
}

// annotationMirrorDigest is on the mirror's pod template: which mirror spec a pod runs.
const annotationMirrorDigest = "dev.devtool/mirror-digest"

// ActivateOptions are the inputs of Activate.
type ActivateOptions struct {
	Client    kubernetes.Interface
	Namespace string
	Dev       *manifest.Dev
	Env       map[string]string // --env, on top of the dev entry's environment
	// Progress gets each state change; nil ignores them.
	Progress func(Event)
	// Unschedulable is how long a mirror pod may stay unschedulable before Activate gives up
	// (default 2 minutes): a volume no node can mount is reported, not waited on forever.
	Unschedulable time.Duration
}

func (o *ActivateOptions) progress(s State, format string, args ...any) {
	if o.Progress != nil {
		o.Progress(Event{State: s, Message: fmt.Sprintf(format, args...)})
	}
}

// Active is an activated dev container.
type Active struct {
	Original  Workload // as read before activation (its recorded annotations included after)
	Mirror    Workload
	Digest    string    // the original's spec digest the mirror was built from
	Pod       string    // the running mirror pod
	PodUID    types.UID // its UID (a StatefulSet's new pod has the old one's name)
	Container string    // the dev container's name
}

// Activate replaces the dev entry's workload by its mirror: creates the dev volume, records the
// original's replicas and spec digest on it, scales it to zero, creates or replaces the mirror,
// and waits until the mirror's dev container runs. Every step leaves a state Down undoes; an
// error other than cancellation undoes what this call did (the dev volume is kept if it was
// there before).
func Activate(ctx context.Context, o ActivateOptions) (*Active, error) {
	cs, ns, d := o.Client, o.Namespace, o.Dev
	o.progress(StateActivating, "activating dev container %s in namespace %s", d.Name, ns)
	orig, err := FindWorkload(ctx, cs, ns, d)
	if err != nil {
		return nil, err
	}
	if a := orig.Meta().Annotations[AnnotationActive]; a != "" && a != d.Name {
		return nil, fmt.Errorf("dev %s: %s is already replaced by dev container %s; run 'devtool down %s' first", d.Name, orig, a, a)
	}
	mirror, err := Mirror(orig, d, MirrorOptions{Env: o.Env})
	if err != nil {
		return nil, err
	}
	pvc, err := VolumeClaim(orig, d)
	if err != nil {
		return nil, err
	}
	digest := SpecDigest(orig)
	mt := mirror.Template()
	if mt.Annotations == nil {
		mt.Annotations = map[string]string{}
	}
	mt.Annotations[annotationMirrorDigest] = SpecDigest(mirror)

	undo := func(createdPVC bool) {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_, _ = Down(cctx, DownOptions{Client: cs, Namespace: ns, Dev: d, Volumes: createdPVC})
	}
	createdPVC := false
	if pvc != nil {
		// A dev volume still being deleted (`down --volumes` just now: its claim goes once
		// the last pod using it is gone) would leave the new pod unschedulable: wait it out.
		if err := waitVolumeDeleted(ctx, &o, pvc.Name); err != nil {
			return nil, err
		}
		_, err := cs.CoreV1().PersistentVolumeClaims(ns).Create(ctx, pvc, metav1.CreateOptions{FieldManager: FieldManager})
		switch {
		case err == nil:
			createdPVC = true
		case apierrors.IsAlreadyExists(err):
		default:
			return nil, fmt.Errorf("dev %s: creating the dev volume %s: %w", d.Name, pvc.Name, err)
		}
	}
	fail := func(err error) (*Active, error) {
		if errors.Is(err, context.Canceled) || ctx.Err() != nil {
			// Interrupted: nothing is undone (a second Ctrl-C must not wait on it), so the
			// original may stay at zero replicas; the error says so and how to restore it.
			return nil, &InterruptedError{Dev: d.Name, Original: orig.String(), Err: err}
		}
		undo(createdPVC)
		return nil, err
	}
	if err := markOriginal(ctx, cs, ns, orig, d.Name, digest); err != nil {
		return fail(fmt.Errorf("dev %s: scaling %s to zero: %w", d.Name, orig, err))
	}
	if err := applyMirror(ctx, cs, mirror); err != nil {
		return fail(fmt.Errorf("dev %s: %w", d.Name, err))
	}
	o.progress(StateStarting, "starting %s", mirror)
	idx, _ := DevContainer(&mt.Spec, d, orig.String())
	container := mt.Spec.Containers[idx].Name
	pod, uid, err := waitDevPod(ctx, &o, mirror, container, mt.Annotations[annotationMirrorDigest])
	if err != nil {
		return fail(err)
	}
	return &Active{Original: orig, Mirror: mirror, Digest: digest, Pod: pod, PodUID: uid, Container: container}, nil
}

// InterruptedError is an activation cancelled after it began to scale the original to zero:
// the original may stay at zero replicas until `devtool down` restores it. It unwraps to the
// cancellation.
type InterruptedError struct {
	Dev      string
	Original string // Kind/name
	Err      error
}

func (e *InterruptedError) Error() string {
	return fmt.Sprintf("dev %s: interrupted while activating: %s may stay at zero replicas; 'devtool down %s' restores it", e.Dev, e.Original, e.Dev)
}

func (e *InterruptedError) Unwrap() error { return e.Err }

// VolumeDeleteWait bounds how long up waits for a dev volume being deleted to be gone.
var VolumeDeleteWait = 2 * time.Minute

// waitVolumeDeleted returns once the claim name does not exist or is not being deleted.
func waitVolumeDeleted(ctx context.Context, o *ActivateOptions, name string) error {
	deadline := time.Now().Add(VolumeDeleteWait)
	said := false
	for {
		c, err := o.Client.CoreV1().PersistentVolumeClaims(o.Namespace).Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return nil
		case err != nil:
			return fmt.Errorf("dev %s: reading the dev volume %s: %w", o.Dev.Name, name, err)
		case c.DeletionTimestamp == nil:
			return nil
		}
		if !said {
			said = true
			o.progress(StateActivating, "waiting for the previous dev volume %s to be deleted", name)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("dev %s: the dev volume %s is still being deleted after %s (finalizers %v): a pod still uses it; delete that pod or wait, then run up again",
				o.Dev.Name, name, VolumeDeleteWait, c.Finalizers)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// markOriginal records the replicas (unless already recorded at zero replicas, which means a
// previous `up` scaled it), the digest and the dev name on the original and scales it to zero,
// in one patch guarded by the resourceVersion read.
func markOriginal(ctx context.Context, cs kubernetes.Interface, ns string, w Workload, dev, digest string) error {
	for attempt := 0; ; attempt++ {
		replicas := w.Replicas()
		if rec, ok := replicasAnnotation(w.Meta()); ok && replicas == 0 {
			replicas = rec
		}
		patch := map[string]any{
			"metadata": map[string]any{
				"resourceVersion": w.Meta().ResourceVersion,
				"annotations": map[string]any{
					AnnotationReplicas:   strconv.Itoa(int(replicas)),
					AnnotationSpecDigest: digest,
					AnnotationActive:     dev,
				},
			},
			"spec": map[string]any{"replicas": 0},
		}
		err := patchWorkload(ctx, cs, ns, w.Kind(), w.Name(), patch)
		if !apierrors.IsConflict(err) || attempt >= 5 {
			return err
		}
		nw, ok, gerr := getWorkload(ctx, cs, ns, w.Kind(), w.Name())
		if gerr != nil {
			return gerr
		}
		if !ok {
			return fmt.Errorf("%s was deleted", w)
		}
		w = nw
	}
}

// waitDevPod watches the mirror's pods until one running the current mirror spec has its dev
// container running; image pull failures, a container that exits (no sh in the image) and a
// pod that stays unschedulable end it with an error that says what to change.
func waitDevPod(ctx context.Context, o *ActivateOptions, mirror Workload, container, mirrorDigest string) (string, types.UID, error) {
	d := o.Dev
	sel := labels.SelectorFromSet(mirror.Template().Labels).String()
	limit := o.Unschedulable
	if limit <= 0 {
		limit = 2 * time.Minute
	}
	// An unschedulable pod gets no further events to wake the watch: a timer ends it.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var unschedTimer *time.Timer
	var unschedMsg, unschedPod string
	defer func() {
		if unschedTimer != nil {
			unschedTimer.Stop()
		}
	}()
	var last string
	var podName string
	var podUID types.UID
	var failure error
	report := func(s State, msg string) {
		if msg != last {
			last = msg
			o.progress(s, "%s", msg)
		}
	}
	_, err := kube.WaitForPods(wctx, o.Client, o.Namespace, sel, func(pods []corev1.Pod) bool {
		for i := range pods {
			p := &pods[i]
			if p.DeletionTimestamp != nil || p.Annotations[annotationMirrorDigest] != mirrorDigest {
				continue
			}
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionTrue && unschedTimer != nil {
					unschedTimer.Stop()
					unschedTimer, unschedPod = nil, ""
				}
				if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
					if unschedTimer == nil {
						unschedTimer = time.AfterFunc(limit, cancel)
					}
					unschedMsg, unschedPod = c.Message, p.Name
					report(StateStarting, "pod "+p.Name+" cannot be scheduled yet: "+c.Message)
				}
			}
			for _, cs := range p.Status.ContainerStatuses {
				if cs.Name != container {
					continue
				}
				if w := cs.State.Waiting; w != nil {
					switch w.Reason {
					case "ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull":
						failure = fmt.Errorf("dev %s: the image %s cannot be pulled (%s: %s); fix dev.%s.image or push the image", d.Name, cs.Image, w.Reason, w.Message, d.Name)
						return true
					case "CrashLoopBackOff", "RunContainerError", "CreateContainerError":
						failure = exitedError(d, cs)
						return true
					case "ContainerCreating", "PodInitializing":
						report(StatePulling, "pod "+p.Name+": creating the container (pulling "+cs.Image+" if needed)")
					}
				}
				if cs.State.Terminated != nil {
					failure = exitedError(d, cs)
					return true
				}
				if cs.State.Running != nil {
					podName, podUID = p.Name, p.UID
					return true
				}
			}
		}
		return false
	})
	if failure != nil {
		return "", "", failure
	}
	if err != nil && ctx.Err() == nil && unschedPod != "" {
		return "", "", fmt.Errorf("dev %s: pod %s cannot be scheduled: %s; check that a node can mount the dev volume %s (dev.%s.persistentVolume.storageClass) and has room for its resources",
			d.Name, unschedPod, unschedMsg, VolumeName(strings.TrimSuffix(mirror.Name(), mirrorSuffix)), d.Name)
	}
	if err != nil {
		if ctx.Err() != nil {
			return "", "", ctx.Err()
		}
		return "", "", fmt.Errorf("dev %s: %w", d.Name, err)
	}
	return podName, podUID, nil
}

func exitedError(d *manifest.Dev, cs corev1.ContainerStatus) error {
	t := cs.State.Terminated
	if t == nil {
		t = cs.LastTerminationState.Terminated
	}
	why := ""
	if w := cs.State.Waiting; w != nil {
		why = w.Reason + ": " + w.Message
	}
	if t != nil {
		why = fmt.Sprintf("exit code %d, %s %s", t.ExitCode, t.Reason, t.Message)
	}
	return fmt.Errorf("dev %s: the dev container %s stopped (%s); devtool starts its agent with sh, so the image %s must have /bin/sh (set dev.%s.image to an image with a shell)",
		d.Name, cs.Name, strings.TrimSpace(why), cs.Image, d.Name)
}

// DownOptions are the inputs of Down.
type DownOptions struct {
	Client    kubernetes.Interface
	Namespace string
	// Dev is the dev entry; only its Name is needed (the rest is on the original's annotations).
	Dev *manifest.Dev
	// Volumes also deletes the dev volume.
	Volumes bool
}

// DownResult says what Down did.
type DownResult struct {
	Restored      []string // Kind/name of the originals restored
	Mirrors       []string // Kind/name of the mirrors deleted
	VolumeDeleted []string // claim names deleted
}

// Down deletes the dev entry's mirror and restores the original exactly: the replica count
// recorded at activation, the dev annotations removed. It needs no local state: everything is
// found through the dev name (the mirror's label, the original's annotation).
func Down(ctx context.Context, o DownOptions) (DownResult, error) {
	cs, ns, name := o.Client, o.Namespace, o.Dev.Name
	var res DownResult
	sel := labels.SelectorFromSet(map[string]string{LabelDev: name}).String()
	deps, err := cs.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return res, fmt.Errorf("dev %s: listing mirrors: %w", name, err)
	}
	for _, m := range deps.Items {
		if err := deleteMirror(ctx, cs, ns, KindDeployment, m.Name); err != nil {
			return res, err
		}
		res.Mirrors = append(res.Mirrors, KindDeployment+"/"+m.Name)
	}
	stss, err := cs.AppsV1().StatefulSets(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return res, fmt.Errorf("dev %s: listing mirrors: %w", name, err)
	}
	for _, m := range stss.Items {
		if err := deleteMirror(ctx, cs, ns, KindStatefulSet, m.Name); err != nil {
			return res, err
		}
		res.Mirrors = append(res.Mirrors, KindStatefulSet+"/"+m.Name)
	}
	origs, err := activeWorkloads(ctx, cs, ns, name)
	if err != nil {
		return res, fmt.Errorf("dev %s: %w", name, err)
	}
	for _, w := range origs {
		if err := restore(ctx, cs, ns, w); err != nil {
			return res, fmt.Errorf("dev %s: restoring %s: %w", name, w, err)
		}
		res.Restored = append(res.Restored, w.String())
	}
	// The lease of the up that owned it goes with the dev container (that up stops: the
	// watcher sees the original restored).
	if err := cs.CoordinationV1().Leases(ns).Delete(ctx, LeaseName(name), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsForbidden(err) {
		return res, fmt.Errorf("dev %s: deleting its lease %s: %w", name, LeaseName(name), err)
	}
	if o.Volumes {
		pvcs, err := cs.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			return res, fmt.Errorf("dev %s: listing dev volumes: %w", name, err)
		}
		for _, p := range pvcs.Items {
			if err := cs.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return res, fmt.Errorf("dev %s: deleting dev volume %s: %w", name, p.Name, err)
			}
			res.VolumeDeleted = append(res.VolumeDeleted, p.Name)
		}
	}
	return res, nil
}

// restore sets the recorded replicas back and removes the dev annotations, in one patch.
func restore(ctx context.Context, cs kubernetes.Interface, ns string, w Workload) error {
	for attempt := 0; ; attempt++ {
		ann := map[string]any{AnnotationReplicas: nil, AnnotationSpecDigest: nil, AnnotationActive: nil}
		patch := map[string]any{"metadata": map[string]any{"resourceVersion": w.Meta().ResourceVersion, "annotations": ann}}
		if rec, ok := replicasAnnotation(w.Meta()); ok {
			patch["spec"] = map[string]any{"replicas": rec}
		}
		err := patchWorkload(ctx, cs, ns, w.Kind(), w.Name(), patch)
		if !apierrors.IsConflict(err) || attempt >= 5 {
			return err
		}
		nw, ok, gerr := getWorkload(ctx, cs, ns, w.Kind(), w.Name())
		if gerr != nil || !ok {
			return gerr
		}
		w = nw
	}
}

// Cleaned reports whether an object's annotations hold no dev annotation.
func Cleaned(annotations map[string]string) bool {
	_, a := annotations[AnnotationActive]
	_, r := annotations[AnnotationReplicas]
	_, d := annotations[AnnotationSpecDigest]
	return !a && !r && !d
}

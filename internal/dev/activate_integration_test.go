//go:build integration

package dev

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/devtool/devtool/internal/kube"
	"github.com/devtool/devtool/internal/manifest"
	"github.com/devtool/devtool/internal/testcluster"
)

func testTemplate(name string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr(int64(1)),
			Containers: []corev1.Container{{
				Name: name, Image: testcluster.Image, ImagePullPolicy: corev1.PullIfNotPresent,
				Command:        []string{"sh", "-c", "exec httpd -f -p 8080 -h /tmp"},
				Env:            []corev1.EnvVar{{Name: "FROM_ORIGINAL", Value: "yes"}},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}, PeriodSeconds: 1},
			}},
		},
	}
}

// snapshot is what `down` must give back exactly.
type snapshot struct {
	Spec        any
	Labels      map[string]string
	Annotations map[string]string
}

func snap(t *testing.T, ctx context.Context, cs kubernetes.Interface, ns, kind, name string) snapshot {
	t.Helper()
	w, ok, err := getWorkload(ctx, cs, ns, kind, name)
	if err != nil || !ok {
		t.Fatalf("reading %s %s: %v %v", kind, name, ok, err)
	}
	ann := map[string]string{}
	for k, v := range w.Meta().Annotations {
		if k != "deployment.kubernetes.io/revision" {
			ann[k] = v
		}
	}
	if w.StatefulSet != nil {
		return snapshot{w.StatefulSet.Spec, w.Meta().Labels, ann}
	}
	return snapshot{w.Deployment.Spec, w.Meta().Labels, ann}
}

func activateAndRestore(t *testing.T, kind string) {
	c := testcluster.Connect(t)
	ns := c.Namespace(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cs := c.Clientset
	name := "web"
	labels := map[string]string{"app": name}
	if kind == KindStatefulSet {
		sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"team": "a"}, Annotations: map[string]string{"note": "kept"}},
			Spec: appsv1.StatefulSetSpec{Replicas: ptr(int32(2)), ServiceName: name, Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: testTemplate(name)}}
		if _, err := cs.AppsV1().StatefulSets(ns).Create(ctx, sts, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	} else {
		dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"team": "a"}, Annotations: map[string]string{"note": "kept"}},
			Spec: appsv1.DeploymentSpec{Replicas: ptr(int32(2)), Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: testTemplate(name)}}
		if _, err := cs.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	before := snap(t, ctx, cs, ns, kind, name)

	d := &manifest.Dev{Name: name, Sync: []manifest.Sync{{Local: "/x", Remote: "/app"}},
		Environment: map[string]string{"FROM_DEV": "1"}, PersistentVolume: &manifest.PersistentVolume{Enabled: true, Size: "64Mi"}}
	var states []State
	a, err := Activate(ctx, ActivateOptions{Client: cs, Namespace: ns, Dev: d, Env: map[string]string{"FROM_FLAG": "2"},
		Progress: func(e Event) { states = append(states, e.State) }})
	if err != nil {
		t.Fatalf("activate: %v (states %v)", err, states)
	}
	if len(states) < 2 || states[0] != StateActivating {
		t.Errorf("states %v", states)
	}
	pod, err := cs.CoreV1().Pods(ns).Get(ctx, a.Pod, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pod.Labels["app"] != name || pod.Labels[LabelDev] != name {
		t.Errorf("mirror pod labels %v", pod.Labels)
	}
	env := map[string]string{}
	for _, e := range pod.Spec.Containers[0].Env {
		env[e.Name] = e.Value
	}
	if env["FROM_ORIGINAL"] != "yes" || env["FROM_DEV"] != "1" || env["FROM_FLAG"] != "2" || pod.Spec.Containers[0].ReadinessProbe != nil {
		t.Errorf("mirror container env %v probe %v", env, pod.Spec.Containers[0].ReadinessProbe)
	}
	// The launcher waits for the agent; the volume is mounted and the sync folder exists.
	if err := c.Exec(ctx, kubeExec(ns, a.Pod, a.Container, "test -d /devtool && test -d /app")); err != nil {
		t.Errorf("dev volume: %v", err)
	}
	w, _, _ := getWorkload(ctx, cs, ns, kind, name)
	if w.Replicas() != 0 || w.Meta().Annotations[AnnotationReplicas] != "2" || w.Meta().Annotations[AnnotationActive] != name ||
		w.Meta().Annotations[AnnotationSpecDigest] == "" {
		t.Errorf("original after activation: replicas %d annotations %v", w.Replicas(), w.Meta().Annotations)
	}

	// A second activation (up again) keeps the recorded replicas.
	if _, err := Activate(ctx, ActivateOptions{Client: cs, Namespace: ns, Dev: d}); err != nil {
		t.Fatalf("second activate: %v", err)
	}
	w, _, _ = getWorkload(ctx, cs, ns, kind, name)
	if w.Meta().Annotations[AnnotationReplicas] != "2" {
		t.Errorf("second activation recorded %v", w.Meta().Annotations)
	}

	// Down with nothing but the dev name (as after `up` was killed and its state removed).
	res, err := Down(ctx, DownOptions{Client: cs, Namespace: ns, Dev: &manifest.Dev{Name: name}, Volumes: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Restored) != 1 || len(res.Mirrors) != 1 || len(res.VolumeDeleted) != 1 {
		t.Errorf("down result %+v", res)
	}
	after := snap(t, ctx, cs, ns, kind, name)
	if !equality.Semantic.DeepEqual(before, after) {
		t.Errorf("original not restored exactly:\nbefore %+v\nafter  %+v", before, after)
	}
	if _, ok, _ := getWorkload(ctx, cs, ns, kind, MirrorName(name)); ok {
		t.Error("mirror still there")
	}
	if _, err := cs.CoreV1().PersistentVolumeClaims(ns).Get(ctx, VolumeName(name), metav1.GetOptions{}); err == nil {
		// deletion may still be finishing (finalizer): it must at least be terminating
		p, _ := cs.CoreV1().PersistentVolumeClaims(ns).Get(ctx, VolumeName(name), metav1.GetOptions{})
		if p != nil && p.DeletionTimestamp == nil {
			t.Error("dev volume not deleted with Volumes")
		}
	} else if !apierrors.IsNotFound(err) {
		t.Error(err)
	}
	// Down again is a no-op.
	if res, err := Down(ctx, DownOptions{Client: cs, Namespace: ns, Dev: &manifest.Dev{Name: name}}); err != nil || len(res.Restored)+len(res.Mirrors) != 0 {
		t.Errorf("second down: %+v %v", res, err)
	}
}

func TestActivateRestoreDeployment(t *testing.T)  { activateAndRestore(t, KindDeployment) }
func TestActivateRestoreStatefulSet(t *testing.T) { activateAndRestore(t, KindStatefulSet) }

func TestActivateErrors(t *testing.T) {
	c := testcluster.Connect(t)
	ns := c.Namespace(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cs := c.Clientset

	_, err := Activate(ctx, ActivateOptions{Client: cs, Namespace: ns, Dev: &manifest.Dev{Name: "missing"}})
	if !errors.Is(err, ErrNoWorkload) || !strings.Contains(err.Error(), "no Deployment or StatefulSet named missing") {
		t.Errorf("missing workload: %v", err)
	}

	// An image without sh: the activation fails saying so, and the original is restored.
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "nosh"},
		Spec: appsv1.DeploymentSpec{Replicas: ptr(int32(1)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "nosh"}}, Template: testTemplate("nosh")}}
	if _, err := cs.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	before := snap(t, ctx, cs, ns, KindDeployment, "nosh")
	_, err = Activate(ctx, ActivateOptions{Client: cs, Namespace: ns, Dev: &manifest.Dev{Name: "nosh", Image: "registry.k8s.io/pause:3.10"}})
	if err == nil || !strings.Contains(err.Error(), "must have /bin/sh") {
		t.Fatalf("image without sh: %v", err)
	}
	if after := snap(t, ctx, cs, ns, KindDeployment, "nosh"); !equality.Semantic.DeepEqual(before, after) {
		t.Errorf("not restored after a failed activation:\n%+v\n%+v", before, after)
	}
	if _, ok, _ := getWorkload(ctx, cs, ns, KindDeployment, MirrorName("nosh")); ok {
		t.Error("mirror left after a failed activation")
	}
}

// TestActivateUnschedulableVolume: a dev volume no node can get is reported, naming what to
// change, and the cluster is left as before (the claim this activation made is deleted).
func TestActivateUnschedulableVolume(t *testing.T) {
	c := testcluster.Connect(t)
	ns := c.Namespace(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cs := c.Clientset
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{Replicas: ptr(int32(1)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}, Template: testTemplate("web")}}
	if _, err := cs.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	before := snap(t, ctx, cs, ns, KindDeployment, "web")
	d := &manifest.Dev{Name: "web", PersistentVolume: &manifest.PersistentVolume{Enabled: true, Size: "1Gi", StorageClass: "no-such-class"}}
	_, err := Activate(ctx, ActivateOptions{Client: cs, Namespace: ns, Dev: d, Unschedulable: 5 * time.Second})
	if err == nil || !strings.Contains(err.Error(), "cannot be scheduled") || !strings.Contains(err.Error(), "storageClass") {
		t.Fatalf("want an unschedulable error naming the storage class, got %v", err)
	}
	if after := snap(t, ctx, cs, ns, KindDeployment, "web"); !equality.Semantic.DeepEqual(before, after) {
		t.Errorf("not restored:\n%+v\n%+v", before, after)
	}
	if p, err := cs.CoreV1().PersistentVolumeClaims(ns).Get(ctx, VolumeName("web"), metav1.GetOptions{}); err == nil && p.DeletionTimestamp == nil {
		t.Error("the claim made by the failed activation is left")
	}
}

// TestWatchOriginalChanged: a redeploy of the original (new template, scaled up again) is seen,
// activating again rebuilds the mirror and scales the original back to zero; a down elsewhere
// stops the watcher.
func TestWatch(t *testing.T) {
	c := testcluster.Connect(t)
	ns := c.Namespace(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cs := c.Clientset
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{Replicas: ptr(int32(1)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}, Template: testTemplate("web")}}
	if _, err := cs.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	d := &manifest.Dev{Name: "web"}
	a, err := Activate(ctx, ActivateOptions{Client: cs, Namespace: ns, Dev: d})
	if err != nil {
		t.Fatal(err)
	}
	changes := make(chan Change, 1)
	go func() { ch, _ := Watch(ctx, cs, ns, a); changes <- ch }()
	time.Sleep(time.Second) // let the watch start (not a pass/fail timing)
	patch := []byte(`{"spec":{"replicas":1,"template":{"spec":{"containers":[{"name":"web","env":[{"name":"V","value":"2"}]}]}}}}`)
	if _, err := cs.AppsV1().Deployments(ns).Patch(ctx, "web", "application/strategic-merge-patch+json", patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if ch := <-changes; ch != OriginalChanged {
		t.Fatalf("change %v", ch)
	}
	a2, err := Activate(ctx, ActivateOptions{Client: cs, Namespace: ns, Dev: d})
	if err != nil {
		t.Fatal(err)
	}
	if a2.Pod == a.Pod {
		t.Error("the mirror was not rebuilt")
	}
	w, _, _ := getWorkload(ctx, cs, ns, KindDeployment, "web")
	if w.Replicas() != 0 || w.Meta().Annotations[AnnotationReplicas] != "1" {
		t.Errorf("original after re-activation: %d %v", w.Replicas(), w.Meta().Annotations)
	}
	go func() { ch, _ := Watch(ctx, cs, ns, a2); changes <- ch }()
	time.Sleep(time.Second)
	if _, err := Down(ctx, DownOptions{Client: cs, Namespace: ns, Dev: d}); err != nil {
		t.Fatal(err)
	}
	if ch := <-changes; ch != Deactivated && ch != MirrorDeleted {
		t.Errorf("after down: %v", ch)
	}
}

func kubeExec(ns, pod, container, script string) kube.ExecOptions {
	return kube.ExecOptions{Namespace: ns, Pod: pod, Container: container, Command: []string{"sh", "-c", script}, Stdout: io.Discard, Stderr: io.Discard}
}

// TestInstallAgent uploads an "agent" (a shell script standing in for the binary: the upload
// does not look inside) into a fresh dev pod: the launcher starts it, the key is written 0600,
// and a second install with the same hash uploads nothing.
func TestInstallAgent(t *testing.T) {
	c := testcluster.Connect(t)
	ns := c.Namespace(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cs := c.Clientset
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{Replicas: ptr(int32(1)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}, Template: testTemplate("web")}}
	if _, err := cs.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	a, err := Activate(ctx, ActivateOptions{Client: cs, Namespace: ns, Dev: &manifest.Dev{Name: "web"}})
	if err != nil {
		t.Fatal(err)
	}
	agent := []byte("#!/bin/sh\necho \"agent $*\" > /devtool/started\nexec sleep 3600\n")
	src := func(arch string) ([]byte, string, error) { return agent, "abc123-" + arch, nil }
	key := []byte("ssh-ed25519 AAAAtestkey dev\n")
	o := InstallOptions{Exec: c.Client, Namespace: ns, Pod: a.Pod, Container: a.Container, Agent: src, AuthorizedKey: key}
	res, err := Install(ctx, o)
	if err != nil || !res.Uploaded || (res.Arch != "amd64" && res.Arch != "arm64") {
		t.Fatalf("install: %+v %v", res, err)
	}
	var out strings.Builder
	script := "for i in $(seq 50); do [ -f /devtool/started ] && break; sleep 0.2; done; cat /devtool/started; stat -c %a /devtool/ssh/authorized_keys; cat /devtool/ssh/authorized_keys"
	if err := c.Exec(ctx, kube.ExecOptions{Namespace: ns, Pod: a.Pod, Container: a.Container, Command: []string{"sh", "-c", script}, Stdout: &out, Stderr: &out}); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	if got := out.String(); !strings.Contains(got, "agent serve --home /devtool --addr 127.0.0.1:2222") || !strings.Contains(got, "600") || !strings.Contains(got, "AAAAtestkey") {
		t.Errorf("in the pod: %q", got)
	}
	res, err = Install(ctx, o)
	if err != nil || res.Uploaded {
		t.Errorf("second install: %+v %v", res, err)
	}
}

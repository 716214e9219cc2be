//go:build integration

package dev

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devtool/devtool/internal/kube"
	"github.com/devtool/devtool/internal/manifest"
	"github.com/devtool/devtool/internal/testcluster"
)

// BenchmarkActivateWarm: the cluster half of `up` with a warm dev volume and the image
// present (activation until the dev container runs), against the cluster's own time to start
// the same pod from a new Deployment, measured in the same run. Reports the ratio.
//
//	DEVTOOL_TEST_KUBECONFIG=... nice go test -tags integration -run '^$' -bench ActivateWarm -benchtime 3x ./internal/dev/
func BenchmarkActivateWarm(b *testing.B) {
	c := testcluster.Connect(b)
	ns := c.Namespace(b)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cs := c.Clientset
	d := &manifest.Dev{Name: "web", PersistentVolume: &manifest.PersistentVolume{Enabled: true, Size: "64Mi"}}
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{Replicas: ptr(int32(1)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}, Template: testTemplate("web")}}
	if _, err := cs.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	// Warm up: the volume exists and is bound, the image is on the node.
	if _, err := Activate(ctx, ActivateOptions{Client: cs, Namespace: ns, Dev: d}); err != nil {
		b.Fatal(err)
	}
	down := func() {
		if _, err := Down(ctx, DownOptions{Client: cs, Namespace: ns, Dev: d}); err != nil {
			b.Fatal(err)
		}
		// Wait until the mirror's pod is gone so the next activation starts from scratch.
		if _, err := kube.WaitForPods(ctx, cs, ns, LabelDev+"=web", func(p []corev1.Pod) bool { return len(p) == 0 }); err != nil {
			b.Fatal(err)
		}
	}
	down()
	var act, base time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		if _, err := Activate(ctx, ActivateOptions{Client: cs, Namespace: ns, Dev: d}); err != nil {
			b.Fatal(err)
		}
		act += time.Since(start)
		b.StopTimer()
		down()

		// Baseline: the same pod spec as a plain new Deployment, until its container runs.
		name := fmt.Sprintf("base%d", i)
		bd := dep.DeepCopy()
		bd.Name = name
		bd.Spec.Selector.MatchLabels = map[string]string{"app": name}
		bd.Spec.Template.Labels = map[string]string{"app": name}
		bd.Spec.Template.Spec.Containers[0].ReadinessProbe = nil
		start = time.Now()
		if _, err := cs.AppsV1().Deployments(ns).Create(ctx, bd, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		if _, err := kube.WaitForPods(ctx, cs, ns, "app="+name, func(p []corev1.Pod) bool {
			return len(p) == 1 && containerRunning(&p[0], "web")
		}); err != nil {
			b.Fatal(err)
		}
		base += time.Since(start)
		_ = cs.AppsV1().Deployments(ns).Delete(ctx, name, metav1.DeleteOptions{})
		b.StartTimer()
	}
	b.ReportMetric(act.Seconds()/float64(b.N), "activate-s/op")
	b.ReportMetric(base.Seconds()/float64(b.N), "baseline-s/op")
	b.ReportMetric(float64(act)/float64(base), "ratio")
}

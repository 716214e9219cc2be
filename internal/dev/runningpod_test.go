package dev

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/devtool/devtool/internal/manifest"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func devPod(name string, running bool) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: map[string]string{LabelDev: "web"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web"}}},
	}
	if running {
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "web", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
	}
	return p
}

func TestRunningPod(t *testing.T) {
	d := &manifest.Dev{Name: "web"}
	mirror := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web-devtool", Namespace: "ns", Labels: map[string]string{LabelDev: "web"}}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	t.Run("no mirror: not active, at once", func(t *testing.T) {
		cs := fake.NewClientset(devPod("old", false))
		_, _, err := RunningPod(ctx, cs, "ns", d)
		if err == nil || !strings.Contains(err.Error(), "no active dev container web") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("running pod", func(t *testing.T) {
		cs := fake.NewClientset(mirror.DeepCopy(), devPod("p1", true))
		pod, c, err := RunningPod(ctx, cs, "ns", d)
		if err != nil || pod != "p1" || c != "web" {
			t.Fatalf("got %q %q %v", pod, c, err)
		}
	})
	t.Run("mirror being rebuilt: waits for its next running pod", func(t *testing.T) {
		cs := fake.NewClientset(mirror.DeepCopy(), devPod("p1", false))
		go func() {
			time.Sleep(200 * time.Millisecond)
			_, _ = cs.CoreV1().Pods("ns").Create(context.Background(), devPod("p2", true), metav1.CreateOptions{})
		}()
		pod, _, err := RunningPod(ctx, cs, "ns", d)
		if err != nil || pod != "p2" {
			t.Fatalf("got %q %v", pod, err)
		}
	})
}

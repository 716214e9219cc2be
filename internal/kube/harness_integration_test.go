//go:build integration

package kube_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/devtool/devtool/internal/kube"
	"github.com/devtool/devtool/internal/testcluster"
)

// TestHarness proves the local cluster and the kube layer end to end through client-go:
// a Deployment and Service applied, the pod Ready, exec, logs, a port-forward answering HTTP,
// and a PVC bound and written by a pod.
func TestHarness(t *testing.T) {
	c := testcluster.Connect(t)
	ns := c.Namespace(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cs := c.Clientset
	labels := map[string]string{"app": "web"}

	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "web", Image: testcluster.Image, ImagePullPolicy: corev1.PullNever,
					Command: []string{"sh", "-c", `echo "web starting"; echo "hello from $(hostname)" > /www/index.html; exec httpd -f -p 8080 -h /www`},
					Ports:   []corev1.ContainerPort{{ContainerPort: 8080}},
					ReadinessProbe: &corev1.Probe{
						ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromInt32(8080)}},
						PeriodSeconds: 1,
					},
				}}},
			},
		},
	}
	if _, err := cs.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create deployment: %v", err)
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec:       corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}
	if _, err := cs.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create service: %v", err)
	}

	pods, err := kube.WaitForPods(ctx, cs, ns, "app=web", func(ps []corev1.Pod) bool {
		return len(ps) == 1 && kube.PodReady(&ps[0])
	})
	if err != nil {
		t.Fatalf("pod never became Ready: %v", err)
	}
	pod := pods[0].Name

	t.Run("exec", func(t *testing.T) {
		var out, errOut bytes.Buffer
		err := c.Exec(ctx, kube.ExecOptions{Namespace: ns, Pod: pod, Command: []string{"cat", "/www/index.html"}, Stdout: &out, Stderr: &errOut})
		if err != nil {
			t.Fatalf("exec: %v (stderr %q)", err, errOut.String())
		}
		if want := "hello from " + pod; strings.TrimSpace(out.String()) != want {
			t.Fatalf("exec output %q, want %q", out.String(), want)
		}
		err = c.Exec(ctx, kube.ExecOptions{Namespace: ns, Pod: pod, Command: []string{"sh", "-c", "exit 3"}, Stdout: io.Discard})
		if err == nil || !strings.Contains(err.Error(), "3") {
			t.Fatalf("exec of a failing command: got %v, want an error carrying exit code 3", err)
		}
	})

	t.Run("logs", func(t *testing.T) {
		raw, err := cs.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{}).DoRaw(ctx)
		if err != nil {
			t.Fatalf("logs: %v", err)
		}
		if !strings.Contains(string(raw), "web starting") {
			t.Fatalf("logs %q do not contain the container's first line", raw)
		}
	})

	t.Run("port-forward", func(t *testing.T) {
		fctx, stop := context.WithCancel(ctx)
		defer stop()
		ports, done, err := c.PortForward(fctx, ns, pod, []string{":8080"})
		if err != nil {
			t.Fatalf("port-forward: %v", err)
		}
		url := fmt.Sprintf("http://127.0.0.1:%d/", ports[0].Local)
		resp, err := http.Get(url)
		if err != nil {
			t.Fatalf("GET %s: %v", url, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || strings.TrimSpace(string(body)) != "hello from "+pod {
			t.Fatalf("GET %s: %d %q", url, resp.StatusCode, body)
		}
		stop()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("port-forward did not stop after its context ended")
		}
	})

	t.Run("service", func(t *testing.T) {
		eps, err := cs.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: "kubernetes.io/service-name=web"})
		if err != nil || len(eps.Items) == 0 {
			t.Fatalf("service has no endpoint slice: %v", err)
		}
	})

	t.Run("pvc", func(t *testing.T) {
		pvc := &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: "data"},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
			},
		}
		if _, err := cs.CoreV1().PersistentVolumeClaims(ns).Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create pvc: %v", err)
		}
		writer := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "writer", Labels: map[string]string{"app": "writer"}},
			Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{
					Name: "w", Image: testcluster.Image, ImagePullPolicy: corev1.PullNever,
					Command:      []string{"sh", "-c", "echo persisted > /data/f && cat /data/f"},
					VolumeMounts: []corev1.VolumeMount{{Name: "d", MountPath: "/data"}},
				}},
				Volumes: []corev1.Volume{{Name: "d", VolumeSource: corev1.VolumeSource{
					PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}},
			},
		}
		if _, err := cs.CoreV1().Pods(ns).Create(ctx, writer, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create writer pod: %v", err)
		}
		if err := kube.WaitForPVCBound(ctx, cs, ns, "data"); err != nil {
			t.Fatal(err)
		}
		ps, err := kube.WaitForPods(ctx, cs, ns, "app=writer", func(ps []corev1.Pod) bool {
			return len(ps) == 1 && (ps[0].Status.Phase == corev1.PodSucceeded || ps[0].Status.Phase == corev1.PodFailed)
		})
		if err != nil {
			t.Fatal(err)
		}
		if ps[0].Status.Phase != corev1.PodSucceeded {
			t.Fatalf("writer pod %s", ps[0].Status.Phase)
		}
		raw, err := cs.CoreV1().Pods(ns).GetLogs("writer", &corev1.PodLogOptions{}).DoRaw(ctx)
		if err != nil || strings.TrimSpace(string(raw)) != "persisted" {
			t.Fatalf("writer logs %q (%v), want %q", raw, err, "persisted")
		}
	})
}

// startPod creates a one-container pod of the test image running command (no grace period on
// delete) through cs, and waits until it is Ready.
func startPod(t *testing.T, ctx context.Context, cs kubernetes.Interface, ns, name string, command ...string) {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"test-pod": name}},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: new(int64),
			Containers: []corev1.Container{{Name: name, Image: testcluster.Image, ImagePullPolicy: corev1.PullNever,
				Command: command}},
		},
	}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.WaitForPods(ctx, cs, ns, "test-pod="+name, func(ps []corev1.Pod) bool {
		return len(ps) == 1 && kube.PodReady(&ps[0])
	}); err != nil {
		t.Fatalf("pod %s not ready: %v", name, err)
	}
}

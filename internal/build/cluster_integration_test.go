//go:build integration

package build

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devtool/devtool/internal/compose"
	"github.com/devtool/devtool/internal/kube"
	"github.com/devtool/devtool/internal/testcluster"
)

// An image built here and pushed to the local cluster's registry runs as a pod: the cluster's
// containerd pulls it from 127.0.0.1:25000 over plain HTTP.
func TestBuiltImageRunsInCluster(t *testing.T) {
	needDaemons(t)
	c := testcluster.Connect(t)
	ns := c.Namespace(t)
	dir := t.TempDir()
	marker := "built-by-devtool-" + time.Now().Format("150405.000000")
	writeFiles(t, dir, map[string]string{
		"Dockerfile": "FROM " + env.busyboxBase + "\nCOPY msg.txt /msg.txt\nCMD [\"/bin/cat\", \"/msg.txt\"]\n",
		"msg.txt":    marker + "\n",
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	res, err := EnsureImages(ctx, EnsureOptions{Builder: bk(), Registry: clusterRegistry, Namespace: ns, Name: "it"},
		[]Image{{Service: "hello", Build: &compose.Build{Context: dir}}})
	if err != nil {
		t.Fatal(err)
	}
	ref := res["hello"].Ref
	if !strings.HasPrefix(ref, clusterRegistry+"/"+ns+"/it-hello:") {
		t.Fatalf("ref %s", ref)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "hello", Labels: map[string]string{"app": "hello"}},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "hello", Image: ref, ImagePullPolicy: corev1.PullAlways}},
		},
	}
	if _, err := c.Clientset.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pods, err := kube.WaitForPods(ctx, c.Clientset, ns, "app=hello", func(ps []corev1.Pod) bool {
		return len(ps) == 1 && (ps[0].Status.Phase == corev1.PodSucceeded || ps[0].Status.Phase == corev1.PodFailed)
	})
	if err != nil {
		p, _ := c.Clientset.CoreV1().Pods(ns).Get(context.Background(), "hello", metav1.GetOptions{})
		t.Fatalf("pod did not finish: %v\nstatus: %+v", err, p.Status)
	}
	if pods[0].Status.Phase != corev1.PodSucceeded {
		t.Fatalf("pod %s: %+v", pods[0].Status.Phase, pods[0].Status)
	}
	logs, err := c.Clientset.CoreV1().Pods(ns).GetLogs("hello", &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(string(logs)) != marker {
		t.Fatalf("pod printed %q, want %q", logs, marker)
	}
}

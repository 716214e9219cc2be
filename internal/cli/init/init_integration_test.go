//go:build integration

package initcmd

import (
	"context"
	"errors"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devtool/devtool/internal/cmdutil"
	"github.com/devtool/devtool/internal/iostreams"
	"github.com/devtool/devtool/internal/testcluster"
)

// TestInitV1 runs init -v1 against the local cluster: workloads are listed from the namespace,
// picked by flag or prompt, and their image and ports become the dev entry.
func TestInitV1(t *testing.T) {
	c := testcluster.Connect(t)
	ns := c.Namespace(t)
	ctx := context.Background()
	labels := map[string]string{"app": "api"}
	pod := func(name string, ports ...int32) corev1.PodTemplateSpec {
		ct := corev1.Container{Name: name, Image: "busybox:local", ImagePullPolicy: corev1.PullNever, Command: []string{"sleep", "3600"}}
		for _, p := range ports {
			ct.Ports = append(ct.Ports, corev1.ContainerPort{ContainerPort: p})
		}
		return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{Containers: []corev1.Container{ct}}}
	}
	if _, err := c.Clientset.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "api"},
		Spec:       appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: pod("api", 8080, 9229)},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dbLabels := map[string]string{"app": "db"}
	dbPod := pod("db", 5432)
	dbPod.Labels = dbLabels
	if _, err := c.Clientset.AppsV1().StatefulSets(ns).Create(ctx, &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "db"},
		Spec:       appsv1.StatefulSetSpec{Selector: &metav1.LabelSelector{MatchLabels: dbLabels}, Template: dbPod},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var asked []cmdutil.KubeFlags
	target := func(k cmdutil.KubeFlags) (*cmdutil.Target, error) {
		asked = append(asked, k)
		return &cmdutil.Target{Kube: c.Client, Namespace: k.Namespace}, nil
	}

	t.Run("no terminal and two workloads names the flag", func(t *testing.T) {
		ios, _, _, _ := iostreams.Test()
		opts := &Options{IO: ios, Target: target, WorkDir: t.TempDir(), File: "devtool.yml", V1: true, Kube: cmdutil.KubeFlags{Namespace: ns}}
		err := run(ctx, opts)
		var fe *cmdutil.FlagError
		if !errors.As(err, &fe) || !strings.Contains(err.Error(), "--workload is required") || !strings.Contains(err.Error(), "api, db") {
			t.Fatalf("err = %v", err)
		}
	})

	t.Run("--workload", func(t *testing.T) {
		dir := t.TempDir()
		ios, _, _, _ := iostreams.Test()
		opts := &Options{IO: ios, Target: target, WorkDir: dir, File: "devtool.yml", V1: true, Workload: "api", Kube: cmdutil.KubeFlags{Namespace: ns}}
		if err := run(ctx, opts); err != nil {
			t.Fatal(err)
		}
		m := loadWritten(t, dir)
		d := m.DevByName("api")
		if d == nil || d.Image != "busybox:local" || d.Workdir != "/app" || len(d.Sync) != 1 || d.Sync[0].Local != dir || d.Sync[0].Remote != "/app" {
			t.Fatalf("dev = %+v", m.Dev)
		}
		var fw []string
		for _, f := range d.Forward {
			fw = append(fw, strings.Join([]string{itoa(f.Local), itoa(f.Remote)}, ":"))
		}
		if !reflect.DeepEqual(fw, []string{"8080:8080", "9229:9229"}) {
			t.Errorf("forward = %v", fw)
		}
	})

	t.Run("prompt picks the StatefulSet", func(t *testing.T) {
		dir := t.TempDir()
		ios, in, _, errOut := iostreams.Test()
		ios.SetTTY(true)
		in.WriteString("2\n")
		opts := &Options{IO: ios, Target: target, WorkDir: dir, File: "devtool.yml", V1: true, Kube: cmdutil.KubeFlags{Namespace: ns}}
		if err := run(ctx, opts); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(errOut.String(), "db (StatefulSet)") {
			t.Errorf("prompt = %q", errOut)
		}
		m := loadWritten(t, dir)
		if d := m.DevByName("db"); d == nil || len(d.Forward) != 1 || d.Forward[0].Local != 5432 {
			t.Fatalf("dev = %+v", m.Dev)
		}
		if m.File != filepath.Join(dir, "devtool.yml") {
			t.Errorf("file = %s", m.File)
		}
	})

	t.Run("unknown workload", func(t *testing.T) {
		ios, _, _, _ := iostreams.Test()
		opts := &Options{IO: ios, Target: target, WorkDir: t.TempDir(), File: "devtool.yml", V1: true, Workload: "nope", Kube: cmdutil.KubeFlags{Namespace: ns}}
		if err := run(ctx, opts); err == nil || !strings.Contains(err.Error(), `--workload "nope"`) {
			t.Fatalf("err = %v", err)
		}
	})
	if len(asked) == 0 || asked[0].Namespace != ns {
		t.Errorf("Target asked with %+v", asked)
	}
}

func itoa(v int32) string { return strconv.Itoa(int(v)) }

//go:build integration

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/devtool/devtool/internal/compose"
	"github.com/devtool/devtool/internal/kube"
	"github.com/devtool/devtool/internal/testcluster"
	"github.com/devtool/devtool/internal/translate"
)

const benchServices = 20

func twentyServices() string {
	var b strings.Builder
	b.WriteString("services:\n")
	for i := 0; i < benchServices; i++ {
		fmt.Fprintf(&b, "  svc%02d:\n    image: docker.io/library/busybox:local\n    command: [\"httpd\", \"-f\", \"-p\", \"8080\", \"-h\", \"/www\"]\n    ports: [\"8080\"]\n    stop_grace_period: 1s\n", i)
	}
	return b.String()
}

// BenchmarkDeployTwentyServices: `devtool deploy --wait` of 20 services (the whole binary: load,
// translate, apply, wait) against the cluster's own time to run the same objects: applied directly
// with client-go and waited for until every pod is Ready. Both in the same run, alternating, each in
// a fresh namespace. Reports the ratio (target ≤ 1.1).
//
//	go test -tags integration -run '^$' -bench DeployTwenty -benchtime 3x ./test/e2e/
func BenchmarkDeployTwentyServices(b *testing.B) {
	c := testcluster.Connect(b)
	var devtool, direct time.Duration
	for i := 0; i < b.N; i++ {
		direct += applyDirect(b, c)
		devtool += deployWithDevtool(b, c)
	}
	b.ReportMetric(devtool.Seconds()/float64(b.N), "devtool-s/op")
	b.ReportMetric(direct.Seconds()/float64(b.N), "direct-s/op")
	b.ReportMetric(devtool.Seconds()/direct.Seconds(), "ratio")
}

// freshNamespace makes a namespace for one round and removes it, pods and all, before the next:
// rounds must not accumulate pods on the single node (110 at most).
func freshNamespace(b *testing.B, c *testcluster.Cluster) (string, func()) {
	ns := c.Namespace(b)
	return ns, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		objs, err := c.Objects()
		if err != nil {
			b.Fatal(err)
		}
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("v1")
		u.SetKind("Namespace")
		u.SetName(ns)
		if err := objs.DeleteAndWait(ctx, u); err != nil {
			b.Fatal(err)
		}
	}
}

func deployWithDevtool(b *testing.B, c *testcluster.Cluster) time.Duration {
	ns, done := freshNamespace(b, c)
	defer done()
	u := newUser(b, c)
	u.write("compose.yml", twentyServices())
	start := time.Now()
	if _, errOut, err := u.run("deploy", "--namespace", ns, "--name", "bench", "--wait"); err != nil {
		b.Fatalf("deploy: %v\n%s", err, errOut)
	}
	return time.Since(start)
}

func applyDirect(b *testing.B, c *testcluster.Cluster) time.Duration {
	ns, done := freshNamespace(b, c)
	defer done()
	dir := b.TempDir()
	p, err := compose.LoadBytes(compose.LoadOptions{File: dir + "/compose.yml", Environ: map[string]string{}}, []byte(twentyServices()))
	if err != nil {
		b.Fatal(err)
	}
	res, err := translate.Translate(p, translate.Options{Name: "bench", Namespace: ns})
	if err != nil {
		b.Fatal(err)
	}
	objs, err := c.Objects()
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	for _, o := range res.Objects {
		u, err := kube.ToUnstructured(o)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := objs.Apply(ctx, u, "bench", false); err != nil {
			b.Fatal(err)
		}
	}
	_, err = kube.WaitForPods(ctx, c.Clientset, ns, "dev.devtool/deployed-by=bench", func(ps []corev1.Pod) bool {
		ready := 0
		for i := range ps {
			if kube.PodReady(&ps[i]) {
				ready++
			}
		}
		return ready == benchServices
	})
	if err != nil {
		b.Fatal(err)
	}
	return time.Since(start)
}

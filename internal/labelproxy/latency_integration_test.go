//go:build integration

package labelproxy

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/devtool/devtool/internal/testcluster"
)

// BenchmarkCreateLatency measures one ConfigMap create (client-go, JSON) through the proxy and directly,
// alternating, to show the proxy's per-request cost without kubectl's own time. Run:
//
//	go test -tags integration -run '^$' -bench CreateLatency -benchtime 400x ./internal/labelproxy/
func BenchmarkCreateLatency(b *testing.B) {
	c := testcluster.Connect(b)
	ns := c.Namespace(b)
	_, k := throughProxy(b, c, ns)
	cfg, err := clientcmd.BuildConfigFromFlags("", k.kubeconfig)
	if err != nil {
		b.Fatal(err)
	}
	cfg.QPS, cfg.Burst = 1000, 1000
	cfg.ContentType = "application/json"
	viaProxy, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	dcfg := *c.Config
	dcfg.QPS, dcfg.Burst = 1000, 1000
	dcfg.ContentType = "application/json"
	direct, err := kubernetes.NewForConfig(&dcfg)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	create := func(cs kubernetes.Interface, name string) time.Duration {
		start := time.Now()
		if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"a": "b"}}, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	create(viaProxy, "warm-p")
	create(direct, "warm-d")
	var tp, td time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%2 == 0 {
			tp += create(viaProxy, fmt.Sprintf("p-%d", i))
			td += create(direct, fmt.Sprintf("d-%d", i))
		} else {
			td += create(direct, fmt.Sprintf("d-%d", i))
			tp += create(viaProxy, fmt.Sprintf("p-%d", i))
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(tp.Microseconds())/float64(b.N), "proxy-µs/create")
	b.ReportMetric(float64(td.Microseconds())/float64(b.N), "direct-µs/create")
	b.ReportMetric(float64(tp)/float64(td), "proxy/direct")
}

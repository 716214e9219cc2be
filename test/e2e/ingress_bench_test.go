//go:build integration

package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/devtool/devtool/internal/kube"
	"github.com/devtool/devtool/internal/platform/client"
	"github.com/devtool/devtool/internal/testcluster"
)

// BenchmarkIngressVsPortForward: one echo server pod, reached in the same run through the platform's
// ingress (HTTPS, the node port on loopback) and through a port-forward to the same pod (what a
// developer uses without an ingress), alternating: small responses from 8 clients (requests per
// second, p99) and a 100 MiB download (MiB/s), to the ingress over HTTP/2 (as browsers and curl
// speak to it) and over HTTP/1.1 (as the port-forward is spoken to). Reports each and the ratios
// (target for the download: ingress ≥ 0.8× direct).
//
//	DEVTOOL_TEST_PLATFORM_DIR=/tmp/devtool-platform-ingress go test -tags integration -run '^$' -bench IngressVsPortForward -benchtime 1x ./test/e2e/
func BenchmarkIngressVsPortForward(b *testing.B) {
	p := benchPlatform(b)
	c := testcluster.Connect(b)
	ns := c.Namespace(b)
	image := pushEchoServer(b, "127.0.0.1:25000/"+ns+"/echoserver")
	host := "bench-" + ns + "." + p.info.Domain
	pod := deployEcho(b, c, ns, image, host, p.info.IngressClass)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fwd, done, err := c.PortForward(ctx, ns, pod, []string{":8080"})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { cancel(); <-done }()
	direct := fmt.Sprintf("http://127.0.0.1:%d", fwd[0].Local)
	viaIngress := fmt.Sprintf("https://%s:%d", host, p.info.EndpointPort)
	ic := p.httpClient(b, nil)
	// the route is served once the ingress has seen the Ingress
	deadline := time.Now().Add(time.Minute)
	for {
		if code, _ := mustGet(b, ic, viaIngress+"/small"); code == 200 {
			break
		}
		if time.Now().After(deadline) {
			b.Fatal("the Ingress was not served within a minute")
		}
		time.Sleep(200 * time.Millisecond)
	}
	dc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}, Timeout: 5 * time.Minute}
	defer dc.CloseIdleConnections()
	// HTTP/1.1 to the ingress too (a connection per client, as through the port-forward); ic is
	// HTTP/2 (one connection for all, as browsers do).
	h1 := p.httpClient(b, nil)
	h1t := h1.Transport.(*http.Transport).Clone()
	h1t.ForceAttemptHTTP2 = false
	h1t.TLSClientConfig.NextProtos = []string{"http/1.1"}
	h1t.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
	h1t.MaxIdleConnsPerHost = 16
	h1.Transport = h1t
	defer h1t.CloseIdleConnections()

	const requests, clients, download = 2000, 8, 100 << 20
	var ing, ing1, dir smallResult
	var ingMiB, ing1MiB, dirMiB float64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		dir.add(small(b, dc, direct+"/small", requests, clients))
		ing.add(small(b, ic, viaIngress+"/small", requests, clients))
		ing1.add(small(b, h1, viaIngress+"/small", requests, clients))
		dirMiB += fetchMiBs(b, dc, fmt.Sprintf("%s/bytes?n=%d", direct, download), download)
		ingMiB += fetchMiBs(b, ic, fmt.Sprintf("%s/bytes?n=%d", viaIngress, download), download)
		ing1MiB += fetchMiBs(b, h1, fmt.Sprintf("%s/bytes?n=%d", viaIngress, download), download)
	}
	b.StopTimer()
	n := float64(b.N)
	b.ReportMetric(ing.rps/n, "ingress-req/s")
	b.ReportMetric(dir.rps/n, "portforward-req/s")
	b.ReportMetric(ing.rps/dir.rps, "req/s-ratio")
	b.ReportMetric(ing1.rps/n, "ingress-h1-req/s")
	b.ReportMetric(ing1.rps/dir.rps, "req/s-h1-ratio")
	b.ReportMetric(ing.p99.Seconds()*1000/n, "ingress-p99-ms")
	b.ReportMetric(ing1.p99.Seconds()*1000/n, "ingress-h1-p99-ms")
	b.ReportMetric(dir.p99.Seconds()*1000/n, "portforward-p99-ms")
	b.ReportMetric(ingMiB/n, "ingress-MiB/s")
	b.ReportMetric(dirMiB/n, "portforward-MiB/s")
	b.ReportMetric(ingMiB/dirMiB, "download-ratio")
	b.ReportMetric(ing1MiB/n, "ingress-h1-MiB/s")
	b.ReportMetric(ing1MiB/dirMiB, "download-h1-ratio")
}

func benchPlatform(b *testing.B) *ingressPlatform {
	dir := os.Getenv("DEVTOOL_TEST_PLATFORM_DIR")
	if dir == "" {
		dir = "/tmp/devtool-cluster"
	}
	read := func(name string) []byte {
		v, err := os.ReadFile(dir + "/" + name)
		if err != nil {
			b.Skip("no platform installed: " + err.Error())
		}
		return v
	}
	url := string(trimNL(read("platform-url")))
	ca := read("platform-ca.crt")
	pc, err := client.New(client.Options{URL: url, CA: ca})
	if err != nil {
		b.Fatal(err)
	}
	defer pc.Close()
	info, err := pc.Info(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	if info.EndpointPort == 0 {
		b.Skip("the platform has no ingress")
	}
	return &ingressPlatform{platformFiles: platformFiles{url: url}, ca: ca, info: info}
}

func trimNL(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}

// deployEcho runs one echo server pod with a Service and an Ingress of the platform's class, and
// returns the pod's name once it is ready.
func deployEcho(b testing.TB, c *testcluster.Cluster, ns, image, host, class string) string {
	ctx := context.Background()
	labels := map[string]string{"app": "echo"}
	one := int32(1)
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "echo", Namespace: ns}, Spec: appsv1.DeploymentSpec{
		Replicas: &one, Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "echo", Image: image, Ports: []corev1.ContainerPort{{ContainerPort: 8080}},
			ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/small", Port: intstr.FromInt32(8080)}}, PeriodSeconds: 1},
		}}}},
	}}
	if _, err := c.Clientset.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "echo", Namespace: ns}, Spec: corev1.ServiceSpec{Selector: labels,
		Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}}}}
	if _, err := c.Clientset.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	prefix := networkingv1.PathTypePrefix
	ing := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Name: "echo", Namespace: ns}, Spec: networkingv1.IngressSpec{
		IngressClassName: &class, Rules: []networkingv1.IngressRule{{Host: host, IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
			Paths: []networkingv1.HTTPIngressPath{{Path: "/", PathType: &prefix, Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
				Name: "echo", Port: networkingv1.ServiceBackendPort{Number: 80}}}}}}}}}}}
	if _, err := c.Clientset.NetworkingV1().Ingresses(ns).Create(ctx, ing, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	pods, err := kube.WaitForPods(wctx, c.Clientset, ns, "app=echo", func(ps []corev1.Pod) bool {
		return len(ps) == 1 && ps[0].DeletionTimestamp == nil && kube.PodReady(&ps[0])
	})
	if err != nil {
		b.Fatal(err)
	}
	return pods[0].Name
}

type smallResult struct {
	rps float64
	p99 time.Duration
}

func (r *smallResult) add(o smallResult) { r.rps += o.rps; r.p99 += o.p99 }

// small sends n GETs of u from k clients and answers the rate and the 99th percentile latency.
func small(b *testing.B, c *http.Client, u string, n, k int) smallResult {
	lat := make([]time.Duration, n)
	var next int
	var mu sync.Mutex
	var wg sync.WaitGroup
	var failed error
	start := time.Now()
	for range k {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				i := next
				next++
				mu.Unlock()
				if i >= n {
					return
				}
				t0 := time.Now()
				resp, err := c.Get(u)
				if err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != 200 {
						err = fmt.Errorf("status %d", resp.StatusCode)
					}
				}
				if err != nil {
					mu.Lock()
					failed = err
					mu.Unlock()
					return
				}
				lat[i] = time.Since(t0)
			}
		}()
	}
	wg.Wait()
	if failed != nil {
		b.Fatalf("GET %s: %v", u, failed)
	}
	elapsed := time.Since(start)
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	return smallResult{rps: float64(n) / elapsed.Seconds(), p99: lat[n*99/100]}
}

// fetchMiBs downloads u (want bytes) and answers MiB/s.
func fetchMiBs(b *testing.B, c *http.Client, u string, want int64) float64 {
	start := time.Now()
	resp, err := c.Get(u)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	if err != nil || n != want {
		b.Fatalf("download %s: %d bytes, %v", u, n, err)
	}
	return float64(n) / (1 << 20) / time.Since(start).Seconds()
}

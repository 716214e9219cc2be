//go:build integration

package labelproxy

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/devtool/devtool/internal/kube"
	"github.com/devtool/devtool/internal/testcluster"
)

const env = "itest"

// kubectlPath finds kubectl: the local cluster's build, else PATH.
func kubectlPath(t testing.TB) string {
	t.Helper()
	if home, err := os.UserHomeDir(); err == nil {
		p := filepath.Join(home, ".cache/devtool-cluster/bin/k8s-v1.32.5/kubectl")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	p, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("SKIP: no kubectl binary")
	}
	return p
}

// kubectlRunner runs the real kubectl with one kubeconfig and its own discovery cache.
type kubectlRunner struct {
	bin, kubeconfig, cacheDir, namespace string
	env                                  []string // extra environment
}

func (k kubectlRunner) cmd(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, k.bin, append([]string{"--namespace", k.namespace}, args...)...)
	cmd.Env = append(append(os.Environ(), "KUBECONFIG="+k.kubeconfig, "KUBECACHEDIR="+k.cacheDir), k.env...)
	return cmd
}

func (k kubectlRunner) run(t testing.TB, stdin string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	cmd := k.cmd(ctx, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("kubectl %s: %v\n%s%s", strings.Join(args, " "), err, out.String(), errb.String())
	}
	return out.String()
}

// throughProxy starts a proxy in front of the test cluster and a kubectl that uses it.
func throughProxy(t testing.TB, c *testcluster.Cluster, ns string) (*Proxy, kubectlRunner) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	p, err := Start(ctx, Options{Upstream: c.Config, Labels: map[string]string{kube.LabelDeployedBy: env}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		if err := p.Wait(); err != nil {
			t.Errorf("proxy: %v", err)
		}
	})
	dir := t.TempDir()
	kc := filepath.Join(dir, "kubeconfig")
	if err := p.WriteKubeconfig(kc, ns); err != nil {
		t.Fatal(err)
	}
	return p, kubectlRunner{bin: kubectlPath(t), kubeconfig: kc, cacheDir: filepath.Join(dir, "cache"), namespace: ns}
}

const webManifest = `apiVersion: v1
kind: ConfigMap
metadata:
  name: web-config
data:
  greeting: hello
---
apiVersion: v1
kind: Service
metadata:
  name: web
spec:
  selector:
    app: web
  ports:
  - port: 80
    targetPort: 8080
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 1
  selector:
    matchLabels:
      app: web
  template:
    metadata:
      labels:
        app: web
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: web
        image: docker.io/library/busybox:local
        imagePullPolicy: IfNotPresent
        command: ["sh", "-c", "mkdir -p /www && echo hello-through-proxy > /www/index.html && echo web-started && exec httpd -f -p 8080 -h /www"]
        ports:
        - containerPort: 8080
`

const ssaManifest = `apiVersion: v1
kind: ConfigMap
metadata:
  name: ssa-config
data:
  a: b
---
apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: ssa
spec:
  replicas: 0
  serviceName: ssa
  selector:
    matchLabels:
      app: ssa
  template:
    metadata:
      labels:
        app: ssa
    spec:
      containers:
      - name: c
        image: docker.io/library/busybox:local
        imagePullPolicy: IfNotPresent
`

func wantLabel(t *testing.T, what string, labels map[string]string) {
	t.Helper()
	if labels[kube.LabelDeployedBy] != env {
		t.Errorf("%s: labels %v, want %s=%s", what, labels, kube.LabelDeployedBy, env)
	}
}

// TestKubectlThroughProxy runs the real kubectl against the local cluster through the proxy: apply
// (client- and server-side), create, rollout status, exec, logs, port-forward and watches.
func TestKubectlThroughProxy(t *testing.T) {
	c := testcluster.Connect(t)
	ns := c.Namespace(t)
	_, k := throughProxy(t, c, ns)
	ctx := context.Background()
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}

	// Client-side apply: creates (POST) the three objects.
	k.run(t, "", "apply", "-f", write("web.yaml", webManifest))
	cm, err := c.Clientset.CoreV1().ConfigMaps(ns).Get(ctx, "web-config", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wantLabel(t, "ConfigMap", cm.Labels)
	svc, err := c.Clientset.CoreV1().Services(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wantLabel(t, "Service", svc.Labels)
	if len(svc.Spec.Selector) != 1 || svc.Spec.Selector["app"] != "web" {
		t.Errorf("Service selector changed: %v", svc.Spec.Selector)
	}
	dep, err := c.Clientset.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wantLabel(t, "Deployment", dep.Labels)
	wantLabel(t, "Deployment pod template", dep.Spec.Template.Labels)
	if ml := dep.Spec.Selector.MatchLabels; len(ml) != 1 || ml["app"] != "web" {
		t.Errorf("Deployment selector changed: %v", dep.Spec.Selector)
	}

	// Client-side apply of a change: a strategic merge patch keeps the label.
	k.run(t, "", "apply", "-f", write("web2.yaml", strings.Replace(webManifest, "greeting: hello", "greeting: hi", 1)))
	cm, _ = c.Clientset.CoreV1().ConfigMaps(ns).Get(ctx, "web-config", metav1.GetOptions{})
	if cm.Data["greeting"] != "hi" {
		t.Errorf("apply of a change did not reach the ConfigMap: %v", cm.Data)
	}
	wantLabel(t, "patched ConfigMap", cm.Labels)
	dep2, _ := c.Clientset.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
	if dep2.Generation != dep.Generation {
		t.Errorf("a re-apply that changes only a ConfigMap changed the Deployment (generation %d -> %d)", dep.Generation, dep2.Generation)
	}

	// Server-side apply, twice (the second must be a conflict-free no-op).
	ssa := write("ssa.yaml", ssaManifest)
	k.run(t, "", "apply", "--server-side", "-f", ssa)
	k.run(t, "", "apply", "--server-side", "-f", ssa)
	cm, _ = c.Clientset.CoreV1().ConfigMaps(ns).Get(ctx, "ssa-config", metav1.GetOptions{})
	wantLabel(t, "server-side applied ConfigMap", cm.Labels)
	sts, err := c.Clientset.AppsV1().StatefulSets(ns).Get(ctx, "ssa", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wantLabel(t, "server-side applied StatefulSet", sts.Labels)
	wantLabel(t, "server-side applied StatefulSet template", sts.Spec.Template.Labels)
	if sts.Generation != 1 {
		t.Errorf("the second server-side apply changed the StatefulSet (generation %d)", sts.Generation)
	}

	// Imperative create.
	k.run(t, "", "create", "configmap", "created", "--from-literal=a=b")
	cm, _ = c.Clientset.CoreV1().ConfigMaps(ns).Get(ctx, "created", metav1.GetOptions{})
	wantLabel(t, "kubectl create configmap", cm.Labels)

	// Rollout status is a watch through the proxy.
	k.run(t, "", "rollout", "status", "deployment/web", "--timeout=300s")
	pods, err := c.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
	if err != nil || len(pods.Items) == 0 {
		t.Fatalf("no web pod: %v", err)
	}
	wantLabel(t, "pod", pods.Items[0].Labels)

	// Exec (an upgraded connection), with stdin both ways.
	if out := k.run(t, "", "exec", "deploy/web", "--", "cat", "/www/index.html"); strings.TrimSpace(out) != "hello-through-proxy" {
		t.Errorf("exec output %q", out)
	}
	if out := k.run(t, "ping-through-proxy\n", "exec", "-i", "deploy/web", "--", "cat"); strings.TrimSpace(out) != "ping-through-proxy" {
		t.Errorf("exec -i output %q", out)
	}

	// The same over SPDY, which kubectl falls back to when WebSockets are refused.
	spdy := k
	spdy.env = []string{"KUBECTL_REMOTE_COMMAND_WEBSOCKETS=false", "KUBECTL_PORT_FORWARD_WEBSOCKETS=false"}
	if out := spdy.run(t, "ping-over-spdy\n", "exec", "-i", "deploy/web", "--", "cat"); strings.TrimSpace(out) != "ping-over-spdy" {
		t.Errorf("exec -i over SPDY output %q", out)
	}
	portForward(t, spdy)

	// Logs.
	if out := k.run(t, "", "logs", "deploy/web"); !strings.Contains(out, "web-started") {
		t.Errorf("logs %q", out)
	}

	// Port-forward and an HTTP request through it.
	portForward(t, k)

	// Everything the commands created is found by label, as destroy will.
	out := k.run(t, "", "get", "configmaps,services,deployments,statefulsets", "-l", kube.LabelDeployedBy+"="+env, "-o", "name")
	for _, want := range []string{"configmap/web-config", "configmap/ssa-config", "configmap/created", "service/web", "deployment.apps/web", "statefulset.apps/ssa"} {
		if !strings.Contains(out, want) {
			t.Errorf("%s not found by label; got:\n%s", want, out)
		}
	}

	// Watches: kubectl get -w and a client-go watch, both through the proxy.
	kubectlWatch(t, c, ns, k)
	clientGoWatch(t, c, ns, k)
}

var forwarding = regexp.MustCompile(`Forwarding from 127\.0\.0\.1:(\d+) -> 8080`)

func portForward(t *testing.T, k kubectlRunner) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := k.cmd(ctx, "port-forward", "--address", "127.0.0.1", "deploy/web", ":8080")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	port := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := forwarding.FindStringSubmatch(sc.Text()); m != nil {
				port <- m[1]
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	var p string
	select {
	case p = <-port:
	case <-time.After(60 * time.Second):
		t.Fatalf("port-forward never said where it listens; stderr:\n%s", stderr.String())
	}
	for i := 0; i < 3; i++ { // several requests: each is a new stream on the forwarded connection
		resp, err := http.Get("http://127.0.0.1:" + p + "/index.html")
		if err != nil {
			t.Fatalf("GET through port-forward: %v (kubectl: %s)", err, stderr.String())
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.TrimSpace(string(body)) != "hello-through-proxy" {
			t.Errorf("GET through port-forward: %d %q", resp.StatusCode, body)
		}
	}
}

func kubectlWatch(t *testing.T, c *testcluster.Cluster, ns string, k kubectlRunner) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := k.cmd(ctx, "get", "configmaps", "-w", "-o", "name")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	// The initial list shows an existing object; then a new one arrives as a watch event.
	waitLine(t, lines, "configmap/web-config")
	if _, err := c.Clientset.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "watched-by-kubectl"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitLine(t, lines, "configmap/watched-by-kubectl")
}

func waitLine(t *testing.T, lines <-chan string, want string) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("kubectl get -w ended before %s", want)
			}
			if strings.TrimSpace(l) == want {
				return
			}
		case <-deadline:
			t.Fatalf("kubectl get -w never showed %s", want)
		}
	}
}

func clientGoWatch(t *testing.T, c *testcluster.Cluster, ns string, k kubectlRunner) {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", k.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w, err := cs.CoreV1().ConfigMaps(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=watched-by-client-go"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if _, err := c.Clientset.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "watched-by-client-go"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-w.ResultChan():
		if ev.Type != watch.Added {
			t.Errorf("watch event %s %v", ev.Type, ev.Object)
		}
	case <-ctx.Done():
		t.Fatal("no watch event through the proxy")
	}
}

// BenchmarkKubectlApply200 measures the proxy's overhead: `kubectl apply -f` of 200 new ConfigMaps in
// one multi-document file, through the proxy and directly against the API server, alternating which
// goes first, in the same run. Both kubectls have a warm discovery cache. It reports the ratio
// proxy/direct (target ≤ 1.2). Run:
//
//	go test -tags integration -run '^$' -bench KubectlApply200 -benchtime 5x ./internal/labelproxy/
func BenchmarkKubectlApply200(b *testing.B) {
	c := testcluster.Connect(b)
	ns := c.Namespace(b)
	_, viaProxy := throughProxy(b, c, ns)
	direct := kubectlRunner{bin: viaProxy.bin, kubeconfig: c.Kubeconfig, cacheDir: filepath.Join(b.TempDir(), "cache"), namespace: ns}
	dir := b.TempDir()
	file := func(prefix string, n int) string {
		var sb strings.Builder
		for i := 0; i < n; i++ {
			fmt.Fprintf(&sb, "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s-%03d\ndata:\n  i: \"%d\"\n", prefix, i, i)
		}
		p := filepath.Join(dir, prefix+".yaml")
		if err := os.WriteFile(p, []byte(sb.String()), 0o644); err != nil {
			b.Fatal(err)
		}
		return p
	}
	timeApply := func(k kubectlRunner, prefix string) time.Duration {
		f := file(prefix, 200)
		start := time.Now()
		k.run(b, "", "apply", "-f", f)
		return time.Since(start)
	}
	// Warm both discovery caches (untimed).
	viaProxy.run(b, "", "apply", "-f", file("warm-proxy", 1))
	direct.run(b, "", "apply", "-f", file("warm-direct", 1))

	var tp, td time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%2 == 0 {
			tp += timeApply(viaProxy, fmt.Sprintf("p%d", i))
			td += timeApply(direct, fmt.Sprintf("d%d", i))
		} else {
			td += timeApply(direct, fmt.Sprintf("d%d", i))
			tp += timeApply(viaProxy, fmt.Sprintf("p%d", i))
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(tp.Milliseconds())/float64(b.N), "proxy-ms/apply")
	b.ReportMetric(float64(td.Milliseconds())/float64(b.N), "direct-ms/apply")
	b.ReportMetric(float64(tp)/float64(td), "proxy/direct")

	// Everything applied through the proxy is labelled; nothing applied directly is.
	ctx := context.Background()
	list, err := c.Clientset.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{LabelSelector: kube.LabelDeployedBy + "=" + env})
	if err != nil {
		b.Fatal(err)
	}
	if want := 200*b.N + 1; len(list.Items) != want {
		b.Errorf("%d labelled ConfigMaps, want %d", len(list.Items), want)
	}
}

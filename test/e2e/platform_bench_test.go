//go:build integration

package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/devtool/devtool/internal/platform/api"
	"github.com/devtool/devtool/internal/platform/client"
	"github.com/devtool/devtool/internal/testcluster"
)

// benchUser makes a platform user logged in with the built CLI (its own home and kubeconfig), and a
// Kubernetes client acting as that user (a token of its ServiceAccount).
func benchUser(b *testing.B, p platformFiles) (*platformUser, string, kubernetes.Interface) {
	b.Helper()
	ca, err := os.ReadFile(p.caFile)
	if err != nil {
		b.Fatal(err)
	}
	admin, err := client.New(client.Options{URL: p.url, Token: p.adminToken, CA: ca})
	if err != nil {
		b.Fatal(err)
	}
	defer admin.Close()
	name := "bench-" + randomSuffix()
	r, err := admin.CreateUser(context.Background(), api.CreateUserRequest{Name: name})
	if err != nil {
		b.Fatal(err)
	}
	c := testcluster.Connect(b)
	b.Cleanup(func() {
		ac, _ := client.New(client.Options{URL: p.url, Token: p.adminToken, CA: ca})
		_ = ac.DeleteUser(context.Background(), name)
		ac.Close()
		_ = c.Clientset.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	u := newPlatformUser(b)
	u.mustRun("context", "use", p.url, "--token", r.Token, "--ca-cert", p.caFile)
	uc, err := client.New(client.Options{URL: p.url, Token: r.Token, CA: ca})
	if err != nil {
		b.Fatal(err)
	}
	defer uc.Close()
	kt, err := uc.KubeToken(context.Background(), 3600)
	if err != nil {
		b.Fatal(err)
	}
	kc, err := kubernetes.NewForConfig(&rest.Config{Host: kt.APIServer, BearerToken: kt.Token,
		TLSClientConfig: rest.TLSClientConfig{CAData: []byte(kt.APIServerCA)}})
	if err != nil {
		b.Fatal(err)
	}
	return u, name, kc
}

// usable waits until the user can create (and so use) a ConfigMap in ns.
func usable(b *testing.B, kc kubernetes.Interface, ns string) {
	b.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		_, err := kc.CoreV1().ConfigMaps(ns).Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "probe-"}}, metav1.CreateOptions{})
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("namespace %s not usable within a minute: %v", ns, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// BenchmarkPlatformNamespaceCreate: `devtool namespace create` until the user can work in it,
// against an admin doing it by hand (kubectl create namespace, then kubectl create rolebinding of
// the same ClusterRole to the user's ServiceAccount) until the same check passes. Same run,
// alternating; reports the ratio.
//
//	go test -tags integration -run '^$' -bench PlatformNamespaceCreate -benchtime 5x ./test/e2e/
func BenchmarkPlatformNamespaceCreate(b *testing.B) {
	p := findPlatformB(b)
	c := testcluster.Connect(b)
	u, name, kc := benchUser(b, p)
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		b.Skip("no kubectl in PATH")
	}
	var dt, kt time.Duration
	for i := 0; i < b.N; i++ {
		ns := "bc-" + randomSuffix()
		start := time.Now()
		u.mustRun("namespace", "create", ns)
		usable(b, kc, ns)
		dt += time.Since(start)

		hand := "bk-" + randomSuffix()
		start = time.Now()
		for _, args := range [][]string{{"create", "namespace", hand},
			{"create", "rolebinding", "devtool-member-" + name, "-n", hand, "--clusterrole", "devtool-owner", "--serviceaccount", platformNamespace(b, c, p) + ":u-" + name}} {
			cmd := exec.Command(kubectl, append([]string{"--kubeconfig", c.Kubeconfig}, args...)...)
			if out, err := cmd.CombinedOutput(); err != nil {
				b.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
			}
		}
		usable(b, kc, hand)
		kt += time.Since(start)
		for _, n := range []string{ns, hand} {
			_ = c.Clientset.CoreV1().Namespaces().Delete(context.Background(), n, metav1.DeleteOptions{})
		}
	}
	b.ReportMetric(dt.Seconds()/float64(b.N), "devtool-s/op")
	b.ReportMetric(kt.Seconds()/float64(b.N), "kubectl-s/op")
	b.ReportMetric(dt.Seconds()/kt.Seconds(), "ratio")
}

// BenchmarkPlatformDeployHello: `devtool deploy --wait` of examples/hello through a platform context
// (the user's own short-lived Kubernetes token, the platform's namespace with its quota and limits)
// against the same deploy with the admin kubeconfig into a plain namespace. Same run, alternating,
// each destroyed (volumes too) before the next; reports the ratio (target ≤ 1.1).
//
//	go test -tags integration -run '^$' -bench PlatformDeployHello -benchtime 3x ./test/e2e/
func BenchmarkPlatformDeployHello(b *testing.B) {
	p := findPlatformB(b)
	c := testcluster.Connect(b)
	pu, _, _ := benchUser(b, p)
	au := newUser(b, c)
	ns := c.Namespace(b)
	for _, f := range []string{"compose.yml", "devtool.yml", "web/index.html"} {
		data, err := os.ReadFile(filepath.Join("..", "..", "examples", "hello", f))
		if err != nil {
			b.Fatal(err)
		}
		au.write(f, string(data))
		if err := os.MkdirAll(filepath.Dir(filepath.Join(pu.dir, f)), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(pu.dir, f), data, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	var viaPlatform, viaAdmin time.Duration
	for i := 0; i < b.N; i++ {
		start := time.Now()
		au.mustRun("deploy", "--wait", "-n", ns)
		viaAdmin += time.Since(start)
		au.mustRun("destroy", "--volumes", "--wait", "-n", ns)

		start = time.Now()
		pu.mustRun("deploy", "--wait")
		viaPlatform += time.Since(start)
		pu.mustRun("destroy", "--volumes", "--wait")
	}
	b.ReportMetric(viaPlatform.Seconds()/float64(b.N), "platform-s/op")
	b.ReportMetric(viaAdmin.Seconds()/float64(b.N), "admin-s/op")
	b.ReportMetric(viaPlatform.Seconds()/viaAdmin.Seconds(), "ratio")
}

// findPlatformB is findPlatform for a benchmark.
func findPlatformB(b *testing.B) platformFiles {
	dir := os.Getenv("DEVTOOL_TEST_PLATFORM_DIR")
	if dir == "" {
		dir = "/tmp/devtool-cluster"
	}
	read := func(name string) string {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			b.Skip("no platform installed (run 'make platform-up'): " + err.Error())
		}
		return strings.TrimSpace(string(data))
	}
	return platformFiles{url: read("platform-url"), caFile: filepath.Join(dir, "platform-ca.crt"), adminToken: read("platform-admin-token")}
}

// Package testcluster connects integration tests to a real Kubernetes cluster: the local one that
// `make cluster-up` starts, or the one KUBECONFIG names. Each test gets its own namespace, removed
// when the test ends. A missing cluster fails the test under CI=true and skips it, with the reason,
// everywhere else.
package testcluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/devtool/devtool/internal/kube"
)

// LocalKubeconfig is where hack/cluster writes the local cluster's kubeconfig.
func LocalKubeconfig() string {
	state := os.Getenv("DEVTOOL_CLUSTER_STATE")
	if state == "" {
		state = "/tmp/devtool-cluster"
	}
	return filepath.Join(state, "kubeconfig")
}

// KubeconfigPath picks the cluster for tests: DEVTOOL_TEST_KUBECONFIG, else the local cluster
// when its kubeconfig exists, else KUBECONFIG. Empty when none is found.
func KubeconfigPath() string {
	if p := os.Getenv("DEVTOOL_TEST_KUBECONFIG"); p != "" {
		return p
	}
	if p := LocalKubeconfig(); fileExists(p) {
		return p
	}
	return os.Getenv("KUBECONFIG")
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// Cluster is a connection to the test cluster.
type Cluster struct {
	*kube.Client
	Kubeconfig string
}

// Connect returns the test cluster, or ends the test: Fatal under CI=true, Skip otherwise.
func Connect(t testing.TB) *Cluster {
	t.Helper()
	path := KubeconfigPath()
	if path == "" {
		unavailable(t, "no cluster: run 'make cluster-up' (or set KUBECONFIG) to run integration tests")
	}
	c, err := kube.Load(kube.LoadOptions{Kubeconfig: path})
	if err != nil {
		unavailable(t, fmt.Sprintf("cluster from %s unusable: %v", path, err))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.Clientset.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx); err != nil {
		unavailable(t, fmt.Sprintf("cluster from %s not answering: %v (run 'make cluster-up')", path, err))
	}
	sweepOnce.Do(func() { sweepStaleNamespaces(ctx, c) })
	return &Cluster{Client: c, Kubeconfig: path}
}

var sweepOnce sync.Once

// staleAfter is the age past which a test namespace is certainly abandoned (a run killed before
// its cleanups, e.g. by a timeout): no test run lasts that long.
const staleAfter = time.Hour

// sweepStaleNamespaces deletes test namespaces left by killed runs, so they cannot fill the node.
func sweepStaleNamespaces(ctx context.Context, c *kube.Client) {
	l, err := c.Clientset.CoreV1().Namespaces().List(ctx, metav1.ListOptions{LabelSelector: "dev.devtool/test=true"})
	if err != nil {
		return
	}
	for _, ns := range l.Items {
		if time.Since(ns.CreationTimestamp.Time) > staleAfter && ns.DeletionTimestamp == nil {
			_ = c.Clientset.CoreV1().Namespaces().Delete(ctx, ns.Name, metav1.DeleteOptions{})
		}
	}
}

func unavailable(t testing.TB, reason string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("integration test needs a cluster (CI=true): %s", reason)
	}
	t.Skipf("SKIP integration test: %s", reason)
}

var nonDNS = regexp.MustCompile(`[^a-z0-9-]+`)

// Namespace creates a fresh namespace for the test, waits until pods can be created in it
// (its default ServiceAccount exists), and deletes it when the test ends.
func (c *Cluster) Namespace(t testing.TB) string {
	t.Helper()
	name := namespaceName(t.Name())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, err := c.Clientset.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"dev.devtool/test": "true"}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating test namespace %s: %v", name, err)
	}
	t.Cleanup(func() {
		if os.Getenv("DEVTOOL_TEST_KEEP_NAMESPACES") != "" {
			t.Logf("keeping namespace %s (DEVTOOL_TEST_KEEP_NAMESPACES)", name)
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		bg := metav1.DeletePropagationBackground
		if err := c.Clientset.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting test namespace %s: %v", name, err)
		}
	})
	if err := waitForDefaultServiceAccount(ctx, c, name); err != nil {
		t.Fatalf("namespace %s: %v", name, err)
	}
	return name
}

func namespaceName(testName string) string {
	base := strings.Trim(nonDNS.ReplaceAllString(strings.ToLower(testName), "-"), "-")
	if len(base) > 40 {
		base = strings.TrimRight(base[:40], "-")
	}
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return fmt.Sprintf("t-%s-%s", base, hex.EncodeToString(b))
}

// A pod cannot be created in a new namespace until the controller-manager made its default ServiceAccount.
func waitForDefaultServiceAccount(ctx context.Context, c *Cluster, ns string) error {
	sas := c.Clientset.CoreV1().ServiceAccounts(ns)
	err := kube.UntilNamed(ctx, "default", &corev1.ServiceAccount{},
		func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return sas.List(ctx, o) },
		sas.Watch,
		func(obj runtime.Object) bool { return obj != nil })
	if err != nil {
		return fmt.Errorf("default ServiceAccount never appeared: %w", err)
	}
	return nil
}

// Image is the image every test pod uses: busybox, imported into the local cluster's containerd
// (nothing can be pulled from the internet here), so pods must use PullNever/IfNotPresent.
const Image = "docker.io/library/busybox:local"

// PodClients returns one HTTP client per ready pod of namespace ns that selector matches (not
// being deleted, with an IP), each made by newClient (its Transport an *http.Transport) and
// dialling that pod's IP and port directly, whatever host a URL names: a test reaches each replica
// of a Deployment over the pod bridge. Their idle connections are closed when the test ends.
func (c *Cluster) PodClients(t testing.TB, ns, selector string, port int, newClient func() (*http.Client, error)) []*http.Client {
	t.Helper()
	pods, err := c.Clientset.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	var out []*http.Client
	for _, pod := range pods.Items {
		ready := false
		for _, cond := range pod.Status.Conditions {
			ready = ready || cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue
		}
		if !ready || pod.DeletionTimestamp != nil || pod.Status.PodIP == "" {
			continue
		}
		hc, err := newClient()
		if err != nil {
			t.Fatal(err)
		}
		addr := net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(port))
		tr := hc.Transport.(*http.Transport)
		d := &net.Dialer{Timeout: 10 * time.Second}
		tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) }
		t.Cleanup(hc.CloseIdleConnections)
		out = append(out, hc)
	}
	return out
}

package environment

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"

	"github.com/devtool/devtool/internal/contexts"
	"github.com/devtool/devtool/internal/kube"
)

// TestDestroyOfNothing: an environment with no state and no objects is reported, and its destroy
// commands do not run (the command would fail: there is no labelling proxy upstream).
func TestDestroyOfNothing(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "devtool.yml"), "name: shop\ndeploy:\n  commands: [echo hi]\ndestroy:\n  - exit 3\n")
	env, err := Load(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	// The API server's list of labelled objects is empty (a loopback server answering the dynamic
	// client); discovery and the state ConfigMap come from a fake clientset.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"ConfigMapList","apiVersion":"v1","metadata":{},"items":[]}`))
	}))
	defer srv.Close()
	cs := fake.NewClientset()
	cs.Discovery().(*fakediscovery.FakeDiscovery).Resources = []*metav1.APIResourceList{{GroupVersion: "v1",
		APIResources: []metav1.APIResource{{Name: "configmaps", Namespaced: true, Kind: "ConfigMap", Verbs: []string{"list", "delete"}}}}}
	var progress []string
	d := &Deployer{Env: env, Target: &contexts.Target{Namespace: "dev",
		Kube: &kube.Client{Config: &rest.Config{Host: srv.URL}, Clientset: cs, Namespace: "dev"}},
		Progress: func(s string) { progress = append(progress, s) }}
	res, err := d.Destroy(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !res.Nothing || len(progress) != 0 {
		t.Fatalf("result %+v, progress %q", res, strings.Join(progress, "; "))
	}
	names, err := d.DestroyAll(context.Background())
	if err != nil || len(names) != 0 {
		t.Fatalf("destroy all: %v %v", names, err)
	}
}

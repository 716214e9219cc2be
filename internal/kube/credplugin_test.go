//go:build unix

package kube

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// TestCredentialPluginToken: devtool's runner gives the plugin client-go's input (cluster info
// included), puts its token on requests, keeps it until it expires and runs the plugin again
// after a 401. Timeout 0 leaves the plugin to client-go.
func TestCredentialPluginToken(t *testing.T) {
	dir := t.TempDir()
	count := filepath.Join(dir, "count")
	info := filepath.Join(dir, "info")
	plugin := filepath.Join(dir, "plugin")
	// Each run appends a line to count and answers token-<number of lines>, expired at once when
	// EXPIRE is set (an expiration in the past).
	script := "#!/bin/sh\necho x >> " + count + "\nn=$(wc -l < " + count + " | tr -d ' ')\n" +
		"printf '%s' \"$KUBERNETES_EXEC_INFO\" > " + info + "\n" +
		"exp=''\n[ -n \"$EXPIRE\" ] && exp=',\"expirationTimestamp\":\"2000-01-01T00:00:00Z\"'\n" +
		"echo \"{\\\"apiVersion\\\":\\\"client.authentication.k8s.io/v1beta1\\\",\\\"kind\\\":\\\"ExecCredential\\\",\\\"status\\\":{\\\"token\\\":\\\"token-$n\\\"$exp}}\"\n"
	if err := os.WriteFile(plugin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var seen []string
	refuse := ""
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		auth := r.Header.Get("Authorization")
		seen = append(seen, auth)
		if auth == refuse {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"NamespaceList","apiVersion":"v1","items":[]}`))
	}))
	defer srv.Close()

	newClient := func(t *testing.T, env []string, timeout time.Duration) (kubernetes.Interface, *rest.Config) {
		cfg := &rest.Config{Host: srv.URL, ExecProvider: &clientcmdapi.ExecConfig{
			APIVersion: "client.authentication.k8s.io/v1beta1", Command: plugin, InteractiveMode: clientcmdapi.NeverExecInteractiveMode,
			ProvideClusterInfo: true, Env: []clientcmdapi.ExecEnvVar{{Name: "EXPIRE", Value: strings.Join(env, "")}}}}
		if err := BoundCredentialPlugin(cfg, "me", timeout); err != nil {
			t.Fatal(err)
		}
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return cs, cfg
	}
	list := func(t *testing.T, cs kubernetes.Interface) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	}
	reset := func() {
		os.Remove(count)
		mu.Lock()
		seen, refuse = nil, ""
		mu.Unlock()
	}

	t.Run("cached until a 401", func(t *testing.T) {
		reset()
		cs, cfg := newClient(t, nil, 10*time.Second)
		if cfg.ExecProvider != nil {
			t.Fatal("client-go still runs the plugin")
		}
		list(t, cs)
		list(t, cs)
		mu.Lock()
		refuse = "Bearer token-1"
		mu.Unlock()
		list(t, cs) // refused: the token is dropped
		list(t, cs) // the plugin runs again
		mu.Lock()
		defer mu.Unlock()
		want := []string{"Bearer token-1", "Bearer token-1", "Bearer token-1", "Bearer token-2"}
		if strings.Join(seen, ",") != strings.Join(want, ",") {
			t.Fatalf("Authorization headers %q, want %q", seen, want)
		}
		b, _ := os.ReadFile(info)
		if !strings.Contains(string(b), `"server":"`+srv.URL+`"`) || !strings.Contains(string(b), `"interactive":false`) {
			t.Errorf("KUBERNETES_EXEC_INFO %s", b)
		}
	})
	t.Run("an expired token is replaced", func(t *testing.T) {
		reset()
		cs, _ := newClient(t, []string{"1"}, 10*time.Second)
		list(t, cs)
		list(t, cs)
		mu.Lock()
		defer mu.Unlock()
		if strings.Join(seen, ",") != "Bearer token-1,Bearer token-2" {
			t.Fatalf("Authorization headers %q", seen)
		}
	})
	t.Run("timeout 0 leaves the plugin to client-go", func(t *testing.T) {
		reset()
		_, cfg := newClient(t, nil, 0)
		if cfg.ExecProvider == nil {
			t.Fatal("the plugin was taken from client-go")
		}
	})
}

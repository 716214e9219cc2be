package contexts

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/devtool/devtool/internal/errs"
	"github.com/devtool/devtool/internal/platform/client/clienttest"
)

// kubeAPI is a stand-in Kubernetes API that accepts only the bearer tokens in ok.
type kubeAPI struct {
	*httptest.Server
	mu   sync.Mutex
	ok   map[string]bool
	seen []string
}

func newKubeAPI(t *testing.T, f *clienttest.Fake) *kubeAPI {
	k := &kubeAPI{ok: map[string]bool{}}
	k.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k.mu.Lock()
		defer k.mu.Unlock()
		tok := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		k.seen = append(k.seen, tok)
		if !k.ok[tok] {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(401)
			_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Unauthorized","code":401}`))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"major":"1","minor":"32","gitVersion":"v1.32.5"}`))
	}))
	t.Cleanup(k.Close)
	f.Info.APIServer = k.URL // httptest servers share one certificate: the fake's CA fits
	return k
}

func (k *kubeAPI) allow(tok string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.ok = map[string]bool{tok: true}
}

func TestEnvContextWithNoSavedContext(t *testing.T) {
	f := clienttest.New(t)
	alice := f.AddUser("alice", false)
	k := newKubeAPI(t, f)
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.crt")
	writeFile(t, ca, string(f.CAPEM))
	home := t.TempDir()
	env := map[string]string{"KUBECONFIG": filepath.Join(dir, "none"), "DEVTOOL_URL": f.URL() + "/",
		"DEVTOOL_TOKEN": alice, "DEVTOOL_CA_CERT": ca}
	r := &Resolver{Home: home, Getenv: envMap(env)}

	tg, err := r.Resolve(Flags{})
	if err != nil {
		t.Fatal(err)
	}
	if !tg.IsPlatform || tg.Namespace != "alice" || tg.ContextName != f.URL() || tg.Registry != "registry.example:5000" ||
		tg.ClusterDomain != "apps.example" || tg.Kube.Config.Host != k.URL {
		t.Fatalf("target: %+v (host %s)", tg, tg.Kube.Config.Host)
	}
	k.allow("kube-alice-1")
	if _, err := tg.Kube.Clientset.Discovery().ServerVersion(); err != nil {
		t.Fatalf("request with the kube token: %v", err)
	}
	// Nothing was saved, and the kube token is cached (0600): a second resolve asks the platform for none.
	if _, err := os.Stat(NewStore(home).Path()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the context store was written: %v", err)
	}
	env["DEVTOOL_NAMESPACE"] = "team"
	tg, err = r.Resolve(Flags{})
	if err != nil || tg.Namespace != "team" {
		t.Fatalf("with DEVTOOL_NAMESPACE: %+v, %v", tg, err)
	}
	if f.KubeTokens != 1 {
		t.Errorf("kube tokens issued: %d, want 1 (cached)", f.KubeTokens)
	}
	files, _ := filepath.Glob(filepath.Join(home, ".devtool", "kubetoken", "*.json"))
	if len(files) != 1 {
		t.Fatalf("cache files: %v", files)
	}
	if fi, _ := os.Stat(files[0]); fi.Mode().Perm() != 0o600 {
		t.Errorf("cache mode %v", fi.Mode())
	}

	// A revoked API token: exit code 4 with a hint, once the cache cannot serve.
	f.Revoke(alice)
	os.Remove(files[0])
	_, err = r.Resolve(Flags{})
	if errs.ExitCode(err) != errs.ExitAuth || !strings.Contains(errs.Hint(err), "--token") {
		t.Fatalf("revoked: %v (exit %d)", err, errs.ExitCode(err))
	}
}

func TestKubeTokenRenewedAtEightyPercentAndAfterRefusal(t *testing.T) {
	f := clienttest.New(t)
	alice := f.AddUser("alice", false)
	k := newKubeAPI(t, f)
	home := t.TempDir()
	now := time.Now()
	tokens := &KubeTokens{Store: NewStore(home), Now: func() time.Time { return now }}
	c := &Context{Name: f.URL(), Token: alice, Certificate: string(f.CAPEM), IsDevtool: true}
	ctx := context.Background()

	kt, err := tokens.Get(ctx, c)
	if err != nil || kt.Token != "kube-alice-1" {
		t.Fatalf("first: %+v %v", kt, err)
	}
	now = now.Add(47 * time.Minute) // 78% of an hour: still fresh
	if kt, _ := tokens.Get(ctx, c); kt.Token != "kube-alice-1" {
		t.Fatalf("at 78%%: %s", kt.Token)
	}
	now = now.Add(2 * time.Minute) // 82%
	if kt, _ := tokens.Get(ctx, c); kt.Token != "kube-alice-2" {
		t.Fatalf("at 82%%: %s", kt.Token)
	}
	// Another API token (another user) never shares the cache.
	bob := f.AddUser("bob", false)
	if kt, _ := tokens.Get(ctx, &Context{Name: f.URL(), Token: bob, Certificate: string(f.CAPEM)}); kt.Token != "kube-bob-3" {
		t.Fatalf("bob got %s", kt.Token)
	}

	// The cluster refuses the cached token (ServiceAccount token revoked): the transport renews once and retries.
	cfg, err := PlatformRESTConfig(ctx, tokens, c)
	if err != nil {
		t.Fatal(err)
	}
	k.allow("kube-alice-4")
	cs, err := newClientset(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.Discovery().ServerVersion(); err != nil {
		t.Fatalf("after renewal: %v (tokens seen %v)", err, k.seen)
	}
	if strings.Join(k.seen, ",") != "kube-alice-2,kube-alice-4" {
		t.Errorf("tokens presented: %v", k.seen)
	}
}

func newClientset(cfg *rest.Config) (kubernetes.Interface, error) {
	return kubernetes.NewForConfig(cfg)
}

func TestEnsureNamespace(t *testing.T) {
	f := clienttest.New(t)
	alice := f.AddUser("alice", false)
	f.AddUser("bob", false)
	c := &Context{Name: f.URL(), Token: alice, Certificate: string(f.CAPEM), IsDevtool: true}
	ctx := context.Background()
	if created, err := EnsureNamespace(ctx, c, "shop"); err != nil || !created || f.Namespace("shop") == nil {
		t.Fatalf("missing: %v %v", created, err)
	}
	if created, err := EnsureNamespace(ctx, c, "shop"); err != nil || created {
		t.Fatalf("existing: %v %v", created, err)
	}
	if _, err := EnsureNamespace(ctx, c, "bob"); err == nil || !strings.Contains(err.Error(), "409") {
		t.Fatalf("bob's: %v", err)
	}
}

// TestEndpointSettings: the endpoints' class and port come from the platform (DEVTOOL_URL, a saved
// context, and a context saved before they were kept, which asks once per command), else from
// DEVTOOL_INGRESS_CLASS and DEVTOOL_ENDPOINT_PORT.
func TestEndpointSettings(t *testing.T) {
	f := clienttest.New(t)
	alice := f.AddUser("alice", false)
	k := newKubeAPI(t, f)
	k.allow("kube-alice-1")
	f.Info.IngressClass, f.Info.EndpointPort = "devtool", 31443
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.crt")
	writeFile(t, ca, string(f.CAPEM))
	env := map[string]string{"KUBECONFIG": filepath.Join(dir, "none"), "DEVTOOL_URL": f.URL(), "DEVTOOL_TOKEN": alice, "DEVTOOL_CA_CERT": ca,
		EnvIngressClass: "ignored", EnvEndpointPort: "8443"}
	tg, err := (&Resolver{Home: t.TempDir(), Getenv: envMap(env)}).Resolve(Flags{})
	if err != nil {
		t.Fatal(err)
	}
	if tg.IngressClass != "devtool" || tg.EndpointPort != 31443 || tg.ClusterDomain != "apps.example" {
		t.Errorf("from DEVTOOL_URL: %q %d %q", tg.IngressClass, tg.EndpointPort, tg.ClusterDomain)
	}

	infos := func() int {
		n := 0
		for _, r := range f.Requests {
			if r == "GET /api/v1/info" {
				n++
			}
		}
		return n
	}
	home := t.TempDir()
	saved := &Context{Name: f.URL(), Token: alice, Certificate: string(f.CAPEM), Username: "alice", Namespace: "alice", ClusterDomain: "apps.example"}
	if err := SavePlatform(NewStore(home), saved); err != nil {
		t.Fatal(err)
	}
	r := &Resolver{Home: home, Getenv: envMap(map[string]string{"KUBECONFIG": filepath.Join(dir, "none")})}
	before := infos()
	if tg, err = r.Resolve(Flags{}); err != nil {
		t.Fatal(err)
	}
	if tg.IngressClass != "devtool" || tg.EndpointPort != 31443 || infos() != before+1 {
		t.Errorf("an older saved context: %q %d, info asked %d times", tg.IngressClass, tg.EndpointPort, infos()-before)
	}
	saved.IngressClass, saved.EndpointPort = "nginx", 0
	if err := SavePlatform(NewStore(home), saved); err != nil {
		t.Fatal(err)
	}
	before = infos()
	if tg, err = r.Resolve(Flags{}); err != nil {
		t.Fatal(err)
	}
	if tg.IngressClass != "nginx" || tg.EndpointPort != 0 || infos() != before {
		t.Errorf("a saved context: %q %d, info asked %d times", tg.IngressClass, tg.EndpointPort, infos()-before)
	}

	for v, want := range map[string]int{"": 0, "443": 443, "30443": 30443} {
		got, err := EndpointPortFromEnv(envMap(map[string]string{EnvEndpointPort: v}))
		if err != nil || got != want {
			t.Errorf("%q: %d %v", v, got, err)
		}
	}
	for _, v := range []string{"x", "0", "70000", "-1"} {
		if _, err := EndpointPortFromEnv(envMap(map[string]string{EnvEndpointPort: v})); errs.ExitCode(err) != errs.ExitUsage {
			t.Errorf("%q: %v (exit %d)", v, err, errs.ExitCode(err))
		}
	}
}

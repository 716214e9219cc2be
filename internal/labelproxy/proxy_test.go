package labelproxy

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/devtool/devtool/internal/labels"
)

const (
	upstreamToken = "upstream-secret-token"
	deployedBy    = "dev.devtool/deployed-by"
)

// seen is one request as the fake API server received it.
type seen struct {
	method, path, contentType, auth string
	header                          http.Header
	body                            []byte
	proto                           int
}

// fakeAPI is an HTTP/2-capable TLS server standing in for the API server.
type fakeAPI struct {
	srv  *httptest.Server
	mu   sync.Mutex
	reqs []seen
	// handle, when set, answers requests itself (after recording).
	handle func(w http.ResponseWriter, r *http.Request) bool
}

func newFakeAPI(t *testing.T) *fakeAPI {
	t.Helper()
	f := &fakeAPI{}
	f.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.reqs = append(f.reqs, seen{r.Method, r.URL.Path, r.Header.Get("Content-Type"), r.Header.Get("Authorization"), r.Header.Clone(), body, r.ProtoMajor})
		h := f.handle
		f.mu.Unlock()
		if h != nil && h(w, r) {
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"Status","status":"Success"}`))
	}))
	f.srv.EnableHTTP2 = true
	f.srv.StartTLS()
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeAPI) config() *rest.Config {
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: f.srv.Certificate().Raw})
	return &rest.Config{Host: f.srv.URL, BearerToken: upstreamToken, TLSClientConfig: rest.TLSClientConfig{CAData: ca}}
}

func (f *fakeAPI) last(t *testing.T) seen {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.reqs) == 0 {
		t.Fatal("the API server received no request")
	}
	return f.reqs[len(f.reqs)-1]
}

func (f *fakeAPI) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.reqs)
}

// startProxy starts a proxy in front of api and returns it with a client configured by its kubeconfig.
func startProxy(t *testing.T, api *fakeAPI, mod func(*Options)) (*Proxy, *http.Client, *rest.Config) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	o := Options{Upstream: api.config(), Labels: map[string]string{deployedBy: "myenv"}}
	if mod != nil {
		mod(&o)
	}
	p, err := Start(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		if err := p.Wait(); err != nil {
			t.Errorf("proxy stopped with %v", err)
		}
	})
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := p.WriteKubeconfig(path, "ns1"); err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(hc.CloseIdleConnections)
	return p, hc, cfg
}

func do(t *testing.T, hc *http.Client, p *Proxy, method, path, contentType, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, p.URL()+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func TestRejectsRequestsWithoutTheToken(t *testing.T) {
	api := newFakeAPI(t)
	p, _, cfg := startProxy(t, api, nil)
	tlsCfg, err := rest.TLSConfigFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	plain := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsCfg}}
	defer plain.CloseIdleConnections()
	for name, auth := range map[string]string{
		"none":          "",
		"wrong token":   "Bearer nope",
		"upstream's":    "Bearer " + upstreamToken,
		"basic":         "Basic dXNlcjpwYXNz",
		"token prefix":  "Bearer " + p.creds.token[:10],
		"token, no key": p.creds.token,
	} {
		req, _ := http.NewRequest("POST", p.URL()+"/api/v1/namespaces/ns1/configmaps", strings.NewReader(`{}`))
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := plain.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(b), `"reason":"Unauthorized"`) {
			t.Errorf("%s: got %d %s, want 401 Status", name, resp.StatusCode, b)
		}
	}
	if n := api.count(); n != 0 {
		t.Errorf("unauthenticated requests reached the API server %d times", n)
	}
}

func TestForwardsWithTheUsersCredentialsOnly(t *testing.T) {
	api := newFakeAPI(t)
	p, hc, _ := startProxy(t, api, nil)
	resp := do(t, hc, p, "GET", "/api/v1/namespaces/ns1/pods?labelSelector=a%3Db", "", "")
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	got := api.last(t)
	if got.auth != "Bearer "+upstreamToken {
		t.Errorf("upstream Authorization = %q, want the user's token", got.auth)
	}
	for k, vs := range got.header {
		for _, v := range vs {
			if strings.Contains(v, p.creds.token) {
				t.Errorf("the proxy token reached the API server in header %s", k)
			}
		}
	}
	if got.path != "/api/v1/namespaces/ns1/pods" {
		t.Errorf("path %q", got.path)
	}
	if got.proto != 2 {
		t.Errorf("regular requests should reuse HTTP/2 upstream, got HTTP/%d", got.proto)
	}
}

// labelsAt returns the labels map at path in a JSON body.
func labelsAt(t *testing.T, body []byte, path ...string) map[string]any {
	t.Helper()
	var obj map[string]any
	if err := json.Unmarshal(body, &obj); err != nil {
		t.Fatalf("upstream body is not JSON: %v\n%s", err, body)
	}
	m, _ := lookup(obj, append(path, "labels")).(map[string]any)
	return m
}

const deployment = `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","labels":{"app":"web"}},
 "spec":{"replicas":1,"selector":{"matchLabels":{"app":"web"}},
  "template":{"metadata":{"labels":{"app":"web"}},"spec":{"containers":[{"name":"c","image":"busybox"}]}}}}`

const deploymentYAML = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  selector:
    matchLabels:
      app: web
  template:
    metadata:
      labels:
        app: web
    spec:
      containers:
      - name: c
        image: busybox
`

func TestLabelsWrites(t *testing.T) {
	type check struct {
		path []string // where labels must (want=true) or must not be
		want bool
	}
	meta := check{[]string{"metadata"}, true}
	tmpl := check{[]string{"spec", "template", "metadata"}, true}
	noTmpl := check{[]string{"spec", "template", "metadata"}, false}
	cases := []struct {
		name, method, path, ct, body string
		checks                       []check
		wantCT                       string
	}{
		{"create configmap", "POST", "/api/v1/namespaces/ns1/configmaps", "application/json",
			`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","labels":{"keep":"me"}},"data":{"n":"12345678901234567890"}}`,
			[]check{meta}, ""},
		{"create configmap without metadata labels", "POST", "/api/v1/namespaces/ns1/configmaps", "application/json; charset=utf-8",
			`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"}}`, []check{meta}, ""},
		{"create namespace", "POST", "/api/v1/namespaces", "application/json",
			`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"x"}}`, []check{meta}, ""},
		{"create deployment", "POST", "/apis/apps/v1/namespaces/ns1/deployments", "application/json", deployment,
			[]check{meta, tmpl}, ""},
		{"replace deployment", "PUT", "/apis/apps/v1/namespaces/ns1/deployments/web", "application/json", deployment,
			[]check{meta, tmpl}, ""},
		{"create deployment from YAML", "POST", "/apis/apps/v1/namespaces/ns1/deployments", "application/yaml", deploymentYAML,
			[]check{meta, tmpl}, "application/json"},
		{"server-side apply YAML", "PATCH", "/apis/apps/v1/namespaces/ns1/deployments/web?fieldManager=kubectl", "application/apply-patch+yaml", deploymentYAML,
			[]check{meta, tmpl}, "application/apply-patch+yaml"},
		{"server-side apply JSON", "PATCH", "/apis/apps/v1/namespaces/ns1/statefulsets/web", "application/apply-patch+yaml",
			strings.Replace(deployment, "Deployment", "StatefulSet", 1), []check{meta, tmpl}, "application/apply-patch+yaml"},
		{"strategic patch without template", "PATCH", "/apis/apps/v1/namespaces/ns1/deployments/web", "application/strategic-merge-patch+json",
			`{"spec":{"replicas":3}}`, []check{meta, noTmpl}, ""},
		{"merge patch with template", "PATCH", "/apis/apps/v1/namespaces/ns1/daemonsets/web", "application/merge-patch+json",
			`{"spec":{"template":{"spec":{"containers":[{"name":"c","image":"b2"}]}}}}`, []check{meta, tmpl}, ""},
		{"merge patch deleting all labels", "PATCH", "/api/v1/namespaces/ns1/configmaps/c", "application/merge-patch+json",
			`{"metadata":{"labels":null}}`, []check{meta}, ""},
		{"create job", "POST", "/apis/batch/v1/namespaces/ns1/jobs", "application/json",
			`{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"j"},"spec":{"template":{"spec":{"restartPolicy":"Never"}}}}`,
			[]check{meta, tmpl}, ""},
		{"apply job keeps its immutable template", "PATCH", "/apis/batch/v1/namespaces/ns1/jobs/j", "application/apply-patch+yaml",
			`{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"j"},"spec":{"template":{"metadata":{},"spec":{"restartPolicy":"Never"}}}}`,
			[]check{meta, noTmpl}, ""},
		{"create cronjob", "POST", "/apis/batch/v1/namespaces/ns1/cronjobs", "application/json",
			`{"apiVersion":"batch/v1","kind":"CronJob","metadata":{"name":"cj"},"spec":{"schedule":"* * * * *","jobTemplate":{"spec":{"template":{"spec":{"restartPolicy":"Never"}}}}}}`,
			[]check{meta, {[]string{"spec", "jobTemplate", "metadata"}, true}, {[]string{"spec", "jobTemplate", "spec", "template", "metadata"}, true}}, ""},
		{"custom resource", "POST", "/apis/example.com/v1/namespaces/ns1/widgets", "application/json",
			`{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"template":{"x":1}}}`,
			[]check{meta, {[]string{"spec", "template", "metadata"}, false}}, ""},
		{"overrides another environment's value", "POST", "/api/v1/namespaces/ns1/configmaps", "application/json",
			`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","labels":{"dev.devtool/deployed-by":"other"}}}`,
			[]check{meta}, ""},
	}
	api := newFakeAPI(t)
	p, hc, _ := startProxy(t, api, nil)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp := do(t, hc, p, c.method, c.path, c.ct, c.body)
			if resp.StatusCode != 200 {
				t.Fatalf("status %d", resp.StatusCode)
			}
			got := api.last(t)
			if c.wantCT != "" && got.contentType != c.wantCT {
				t.Errorf("content type %q, want %q", got.contentType, c.wantCT)
			}
			for _, ch := range c.checks {
				l := labelsAt(t, got.body, ch.path...)
				has := l[deployedBy] == "myenv"
				if has != ch.want {
					t.Errorf("label at %s: present=%v, want %v\n%s", strings.Join(ch.path, "."), has, ch.want, got.body)
				}
			}
			if strings.Contains(c.body, `"keep":"me"`) && !strings.Contains(string(got.body), `"keep":"me"`) {
				t.Errorf("existing label lost: %s", got.body)
			}
			if strings.Contains(c.body, "12345678901234567890") && !strings.Contains(string(got.body), "12345678901234567890") {
				t.Errorf("number changed: %s", got.body)
			}
			if strings.Contains(c.body, `"selector"`) || strings.Contains(c.body, "selector:") {
				sel := labelsAt(t, got.body, "spec", "selector")
				if _, ok := lookup(mustJSON(t, got.body), []string{"spec", "selector", "matchLabels", deployedBy}).(string); ok || sel != nil {
					t.Errorf("selector changed: %s", got.body)
				}
				if ml, _ := lookup(mustJSON(t, got.body), []string{"spec", "selector", "matchLabels"}).(map[string]any); len(ml) != 1 || ml["app"] != "web" {
					t.Errorf("selector changed: %v", ml)
				}
			}
			if c.name == "strategic patch without template" && strings.Contains(string(got.body), "template") {
				t.Errorf("a patch without a template got one: %s", got.body)
			}
		})
	}
}

func mustJSON(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestLabelsListItems(t *testing.T) {
	api := newFakeAPI(t)
	p, hc, _ := startProxy(t, api, nil)
	body := `{"apiVersion":"v1","kind":"List","items":[` +
		`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}},` + deployment + `]}`
	do(t, hc, p, "POST", "/api/v1/namespaces/ns1/configmaps", "application/json", body)
	obj := mustJSON(t, api.last(t).body)
	items := obj["items"].([]any)
	for i, it := range items {
		if l, _ := lookup(it.(map[string]any), []string{"metadata", "labels", deployedBy}).(string); l != "myenv" {
			t.Errorf("item %d not labelled: %v", i, it)
		}
	}
	if l, _ := lookup(items[1].(map[string]any), []string{"spec", "template", "metadata", "labels", deployedBy}).(string); l != "myenv" {
		t.Errorf("Deployment item's template not labelled")
	}
}

func TestPassesThroughUntouched(t *testing.T) {
	cases := []struct{ name, method, path, ct, body string }{
		{"scale subresource", "PUT", "/apis/apps/v1/namespaces/ns1/deployments/web/scale", "application/json", `{"kind":"Scale","metadata":{"name":"web"},"spec":{"replicas":2}}`},
		{"status subresource", "PATCH", "/apis/apps/v1/namespaces/ns1/deployments/web/status", "application/merge-patch+json", `{"status":{"replicas":2}}`},
		{"namespace status", "PUT", "/api/v1/namespaces/ns1/status", "application/json", `{"kind":"Namespace","metadata":{"name":"ns1"}}`},
		{"namespace finalize", "PUT", "/api/v1/namespaces/ns1/finalize", "application/json", `{"kind":"Namespace","metadata":{"name":"ns1"}}`},
		{"eviction", "POST", "/api/v1/namespaces/ns1/pods/p/eviction", "application/json", `{"kind":"Eviction","metadata":{"name":"p"}}`},
		{"binding", "POST", "/api/v1/namespaces/ns1/bindings", "application/json", `{"kind":"Binding","metadata":{"name":"p"}}`},
		{"token request", "POST", "/api/v1/namespaces/ns1/serviceaccounts/default/token", "application/json", `{"kind":"TokenRequest","metadata":{}}`},
		{"access review", "POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", "application/json", `{"kind":"SelfSubjectAccessReview","metadata":{}}`},
		{"exec without upgrade", "POST", "/api/v1/namespaces/ns1/pods/p/exec?command=ls", "application/json", `{"metadata":{}}`},
		{"json patch", "PATCH", "/api/v1/namespaces/ns1/configmaps/c", "application/json-patch+json", `[{"op":"add","path":"/data/x","value":"1"}]`},
		{"malformed protobuf", "POST", "/api/v1/namespaces/ns1/configmaps", "application/vnd.kubernetes.protobuf", "k8s\x00\x0a\x0f\x0a\x02v1\x12\x09ConfigMap"},
		{"invalid JSON", "POST", "/api/v1/namespaces/ns1/configmaps", "application/json", `{"metadata":`},
		{"delete with options", "DELETE", "/api/v1/namespaces/ns1/configmaps/c", "application/json", `{"kind":"DeleteOptions","propagationPolicy":"Foreground"}`},
		{"post to a named object", "POST", "/api/v1/namespaces/ns1/configmaps/c", "application/json", `{"metadata":{}}`},
	}
	api := newFakeAPI(t)
	p, hc, _ := startProxy(t, api, nil)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			do(t, hc, p, c.method, c.path, c.ct, c.body)
			got := api.last(t)
			if string(got.body) != c.body || got.contentType != c.ct {
				t.Errorf("forwarded %q (%s), want it untouched: %q", got.body, got.contentType, c.body)
			}
		})
	}
}

func TestBodyTooLarge(t *testing.T) {
	api := newFakeAPI(t)
	p, hc, _ := startProxy(t, api, func(o *Options) { o.MaxBodyBytes = 1000 })
	big := `{"kind":"ConfigMap","metadata":{"name":"c"},"data":{"x":"` + strings.Repeat("a", 2000) + `"}}`
	resp := do(t, hc, p, "POST", "/api/v1/namespaces/ns1/configmaps", "application/json", big)
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(b), "larger than 1000 bytes") {
		t.Errorf("got %d %s", resp.StatusCode, b)
	}
	if api.count() != 0 {
		t.Error("an oversized body was forwarded")
	}
	// Bodies the proxy does not need to read are not capped.
	do(t, hc, p, "PUT", "/apis/apps/v1/namespaces/ns1/deployments/web/scale", "application/json", big)
	if got := api.last(t); len(got.body) != len(big) {
		t.Errorf("subresource body cut to %d bytes", len(got.body))
	}
}

func TestWatchStreams(t *testing.T) {
	api := newFakeAPI(t)
	release := make(chan struct{})
	api.handle = func(w http.ResponseWriter, r *http.Request) bool {
		if r.URL.Query().Get("watch") != "true" {
			return false
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintln(w, `{"type":"ADDED","object":{"kind":"Pod"}}`)
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
		return true
	}
	defer close(release)
	p, hc, _ := startProxy(t, api, nil)
	resp := do(t, hc, p, "GET", "/api/v1/namespaces/ns1/pods?watch=true", "", "")
	line := make(chan string, 1)
	go func() {
		l, _ := bufio.NewReader(resp.Body).ReadString('\n')
		line <- l
	}()
	select {
	case l := <-line:
		if !strings.Contains(l, "ADDED") {
			t.Errorf("first event %q", l)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the first watch event was not flushed through the proxy")
	}
}

// upgradeEcho answers an Upgrade request like the API server does for exec: 101, then it echoes the
// raw connection.
func upgradeEcho(w http.ResponseWriter, r *http.Request) bool {
	if r.Header.Get("Upgrade") == "" {
		return false
	}
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return true
	}
	defer conn.Close()
	fmt.Fprintf(brw, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: %s\r\n\r\n", r.Header.Get("Upgrade"))
	_ = brw.Flush()
	_, _ = io.Copy(conn, brw)
	return true
}

// openUpgrade sends an SPDY-style upgrade to the proxy over HTTP/1.1 and returns the switched connection.
func openUpgrade(t *testing.T, p *Proxy, cfg *rest.Config) net.Conn {
	t.Helper()
	tlsCfg, err := rest.TLSConfigFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tlsCfg.NextProtos = []string{"http/1.1"}
	conn, err := tls.Dial("tcp", strings.TrimPrefix(p.URL(), "https://"), tlsCfg)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "POST /api/v1/namespaces/ns1/pods/p/exec?command=sh HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"+
		"Connection: Upgrade\r\nUpgrade: SPDY/3.1\r\nX-Stream-Protocol-Version: v4.channel.k8s.io\r\nContent-Length: 0\r\n\r\n", cfg.BearerToken)
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade answered %d", resp.StatusCode)
	}
	return &bufConn{Conn: conn, r: br}
}

type bufConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufConn) Read(b []byte) (int, error) { return c.r.Read(b) }

func TestUpgradePassesThroughOverHTTP1(t *testing.T) {
	api := newFakeAPI(t)
	api.handle = upgradeEcho
	p, _, cfg := startProxy(t, api, nil)
	conn := openUpgrade(t, p, cfg)
	defer conn.Close()
	if _, err := conn.Write([]byte("ping\n")); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	got, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil || got != "ping\n" {
		t.Fatalf("echo through the upgraded connection: %q %v", got, err)
	}
	s := api.last(t)
	if s.proto != 1 || s.auth != "Bearer "+upstreamToken || s.header.Get("Upgrade") != "SPDY/3.1" {
		t.Errorf("upstream saw HTTP/%d auth %q upgrade %q", s.proto, s.auth, s.header.Get("Upgrade"))
	}
}

func TestKubeconfigAndCredentials(t *testing.T) {
	api := newFakeAPI(t)
	p1, _, _ := startProxy(t, api, nil)
	p2, _, _ := startProxy(t, api, nil)
	if !strings.HasPrefix(p1.URL(), "https://127.0.0.1:") {
		t.Errorf("proxy URL %s is not loopback", p1.URL())
	}
	if p1.creds.token == p2.creds.token || bytes.Equal(p1.creds.caPEM, p2.creds.caPEM) || p1.URL() == p2.URL() {
		t.Error("two runs share a token, CA or port")
	}
	path := filepath.Join(t.TempDir(), "kc")
	if err := p1.WriteKubeconfig(path, "team-a"); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("kubeconfig mode %v, want 0600", st.Mode().Perm())
	}
	kc, err := clientcmd.LoadFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := kc.Contexts[kc.CurrentContext]
	if ctx.Namespace != "team-a" || kc.Clusters[ctx.Cluster].Server != p1.URL() || kc.AuthInfos[ctx.AuthInfo].Token != p1.creds.token {
		t.Errorf("kubeconfig does not point at the proxy: %+v", ctx)
	}
	leaf := p1.creds.server.Leaf
	if k, ok := leaf.PublicKey.(*ecdsa.PublicKey); !ok || k.Curve != elliptic.P256() {
		t.Errorf("server key is not ECDSA P-256")
	}
	if len(leaf.IPAddresses) != 1 || !leaf.IPAddresses[0].Equal(net.IPv4(127, 0, 0, 1)) || len(leaf.DNSNames) != 0 {
		t.Errorf("server certificate names %v %v, want only 127.0.0.1", leaf.IPAddresses, leaf.DNSNames)
	}
	if v := leaf.NotAfter.Sub(leaf.NotBefore); v > DefaultValidity+2*time.Minute {
		t.Errorf("certificate valid for %v", v)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(p2.creds.caPEM)
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool}); err == nil {
		t.Error("one run's certificate verifies under another run's CA")
	}
	block, _ := pem.Decode(p1.creds.caPEM)
	if block == nil || strings.Contains(string(mustRead(t, path)), "PRIVATE KEY") {
		t.Error("kubeconfig holds a private key")
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestStartValidates(t *testing.T) {
	api := newFakeAPI(t)
	for name, o := range map[string]Options{
		"no upstream":  {Labels: map[string]string{deployedBy: "x"}},
		"no labels":    {Upstream: api.config()},
		"bad key":      {Upstream: api.config(), Labels: map[string]string{"a b": "x"}},
		"bad value":    {Upstream: api.config(), Labels: map[string]string{deployedBy: "not valid!"}},
		"bad upstream": {Upstream: &rest.Config{Host: "::::"}, Labels: map[string]string{deployedBy: "x"}},
	} {
		if _, err := Start(context.Background(), o); err == nil {
			t.Errorf("%s: Start accepted it", name)
		}
	}
}

// TestStopsCleanly cancels the proxy with a watch and an upgraded connection open: both end, the
// listener closes, and no goroutine is left behind.
func TestStopsCleanly(t *testing.T) {
	api := newFakeAPI(t)
	api.handle = func(w http.ResponseWriter, r *http.Request) bool {
		if upgradeEcho(w, r) {
			return true
		}
		if r.URL.Query().Get("watch") == "true" {
			w.WriteHeader(200)
			w.(http.Flusher).Flush()
			<-r.Context().Done()
			return true
		}
		return false
	}
	before := runtime.NumGoroutine()

	ctx, cancel := context.WithCancel(context.Background())
	p, err := Start(ctx, Options{Upstream: api.config(), Labels: map[string]string{deployedBy: "x"}})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kc")
	if err := p.WriteKubeconfig(path, ""); err != nil {
		t.Fatal(err)
	}
	cfg, _ := clientcmd.BuildConfigFromFlags("", path)
	hc, _ := rest.HTTPClientFor(cfg)
	resp, err := hc.Get(p.URL() + "/api/v1/pods?watch=true")
	if err != nil {
		t.Fatal(err)
	}
	conn := openUpgrade(t, p, cfg)

	cancel()
	select {
	case <-p.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the proxy did not stop within 5s")
	}
	if _, err := io.ReadAll(resp.Body); err == nil {
		// A clean end is fine too; what matters is that it ended.
		t.Log("watch ended cleanly")
	}
	resp.Body.Close()
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := conn.Read(make([]byte, 1)); err == nil {
		t.Error("the upgraded connection is still open after the proxy stopped")
	}
	conn.Close()
	hc.CloseIdleConnections()
	if _, err := net.DialTimeout("tcp", strings.TrimPrefix(p.URL(), "https://"), time.Second); err == nil {
		t.Error("the proxy still accepts connections")
	}

	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		buf := make([]byte, 1<<20)
		t.Errorf("%d goroutines before, %d after the proxy stopped:\n%s", before, n, buf[:runtime.Stack(buf, true)])
	}
}

func protoBody(t *testing.T, obj kruntime.Object) string {
	t.Helper()
	var buf bytes.Buffer
	if err := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme).Encode(obj, &buf); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

func fromProto(t *testing.T, b []byte) kruntime.Object {
	t.Helper()
	obj, _, err := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme).Decode(b, nil, nil)
	if err != nil {
		t.Fatalf("upstream body is not protobuf: %v", err)
	}
	return obj
}

// TestLabelsProtobuf: kubectl create and typed clients send protobuf. The labels are spliced in at the
// wire level; every other field arrives as sent.
func TestLabelsProtobuf(t *testing.T) {
	api := newFakeAPI(t)
	p, hc, _ := startProxy(t, api, nil)
	const ct = "application/vnd.kubernetes.protobuf"
	replicas := int32(3)
	dep := &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: map[string]string{"app": "web", deployedBy: "other"}, Annotations: map[string]string{"a": "b"}},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox", Args: []string{"x", "y"}}}},
			},
		},
	}
	do(t, hc, p, "POST", "/apis/apps/v1/namespaces/ns1/deployments", ct, protoBody(t, dep))
	got := fromProto(t, api.last(t).body).(*appsv1.Deployment)
	want := dep.DeepCopy()
	want.Labels[deployedBy] = "myenv"
	want.Spec.Template.Labels[deployedBy] = "myenv"
	got.TypeMeta = want.TypeMeta
	if !equality.Semantic.DeepEqual(got, want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}

	cj := &batchv1.CronJob{
		TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "CronJob"},
		ObjectMeta: metav1.ObjectMeta{Name: "cj"},
		Spec: batchv1.CronJobSpec{Schedule: "* * * * *", JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever}}}}},
	}
	do(t, hc, p, "POST", "/apis/batch/v1/namespaces/ns1/cronjobs", ct, protoBody(t, cj))
	gotCJ := fromProto(t, api.last(t).body).(*batchv1.CronJob)
	if gotCJ.Labels[deployedBy] != "myenv" || gotCJ.Spec.JobTemplate.Labels[deployedBy] != "myenv" ||
		gotCJ.Spec.JobTemplate.Spec.Template.Labels[deployedBy] != "myenv" || gotCJ.Spec.Schedule != "* * * * *" {
		t.Errorf("CronJob: %+v", gotCJ)
	}

	job := &batchv1.Job{
		TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{Name: "j"},
		Spec:       batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever}}},
	}
	do(t, hc, p, "PUT", "/apis/batch/v1/namespaces/ns1/jobs/j", ct, protoBody(t, job))
	gotJob := fromProto(t, api.last(t).body).(*batchv1.Job)
	if gotJob.Labels[deployedBy] != "myenv" || gotJob.Spec.Template.Labels != nil {
		t.Errorf("updated Job: labels %v, template labels %v (must stay untouched)", gotJob.Labels, gotJob.Spec.Template.Labels)
	}

	cm := &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}, ObjectMeta: metav1.ObjectMeta{Name: "c"}, Data: map[string]string{"k": "v"}}
	do(t, hc, p, "PUT", "/api/v1/namespaces/ns1/configmaps/c/status", ct, protoBody(t, cm))
	if got := fromProto(t, api.last(t).body).(*corev1.ConfigMap); got.Labels != nil {
		t.Errorf("subresource body changed: %v", got.Labels)
	}
}

// TestWarnsTheUserOfUnlabelledWrites: a write destroy will not find reaches Options.Warn, once per path.
func TestWarnsTheUserOfUnlabelledWrites(t *testing.T) {
	api := newFakeAPI(t)
	var mu sync.Mutex
	var warnings []string
	p, hc, _ := startProxy(t, api, func(o *Options) {
		o.Warn = func(s string) { mu.Lock(); warnings = append(warnings, s); mu.Unlock() }
	})
	for i := 0; i < 2; i++ {
		do(t, hc, p, "POST", "/api/v1/namespaces/ns1/configmaps", "application/vnd.kubernetes.protobuf", "k8s\x00\x0a\x0f\x0a\x02v1\x12\x09ConfigMap")
	}
	do(t, hc, p, "POST", "/api/v1/namespaces/ns1/secrets", "application/cbor", "\xa0")
	do(t, hc, p, "PATCH", "/api/v1/namespaces/ns1/configmaps/c", "application/json-patch+json", `[{"op":"add","path":"/data/x","value":"1"}]`)
	mu.Lock()
	defer mu.Unlock()
	if len(warnings) != 2 || !strings.Contains(warnings[0], "/configmaps") || !strings.Contains(warnings[1], "CBOR") {
		t.Fatalf("warnings %q", warnings)
	}
}

// A devtool command run by a devtool.yml command (`devtool deploy --name other`) labels its objects
// for its own environment, selectors included: the proxy keeps what devtool's own client set, and
// still replaces what any other client (kubectl, helm) sets, and labels what devtool left unlabelled.
func TestKeepsTheEnvironmentDevtoolSets(t *testing.T) {
	other := strings.ReplaceAll(deployment, `{"app":"web"}`, `{"app":"web","`+deployedBy+`":"other"}`)
	cases := []struct {
		name, ua, body, want string
	}{
		{"devtool's own deploy", labels.ClientUserAgent, other, "other"},
		{"devtool with a version", labels.ClientUserAgent + "/v1.2.3", other, "other"},
		{"devtool, nothing set", labels.ClientUserAgent, deployment, "myenv"},
		{"kubectl", "kubectl/v1.32.5 (linux/amd64)", other, "myenv"},
		{"a name that only starts like devtool", labels.ClientUserAgent + "-lookalike", other, "myenv"},
	}
	api := newFakeAPI(t)
	p, hc, _ := startProxy(t, api, nil)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req, err := http.NewRequest("POST", p.URL()+"/apis/apps/v1/namespaces/ns1/deployments", strings.NewReader(c.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("User-Agent", c.ua)
			resp, err := hc.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			got := api.last(t)
			for _, path := range [][]string{{"metadata"}, {"spec", "template", "metadata"}} {
				if v := labelsAt(t, got.body, path...)[deployedBy]; v != c.want {
					t.Errorf("%s: deployed-by %v, want %q", strings.Join(path, "."), v, c.want)
				}
			}
			if c.want == "other" && !strings.Contains(string(got.body), `"matchLabels":{"app":"web","`+deployedBy+`":"other"}`) {
				t.Errorf("selector changed: %s", got.body)
			}
		})
	}
}

// TestLabelsClusterScopedWithTheNamespace: Options.ClusterLabels go on cluster-scoped objects
// (and Namespaces), in JSON, YAML and protobuf bodies, and never on namespaced objects or pod
// templates.
func TestLabelsClusterScopedWithTheNamespace(t *testing.T) {
	const deployedNS = "dev.devtool/deployed-namespace"
	api := newFakeAPI(t)
	p, hc, _ := startProxy(t, api, func(o *Options) {
		o.ClusterLabels = map[string]string{deployedNS: "ns1"}
	})
	cases := []struct {
		name, method, path, ct, body string
		cluster                      bool
	}{
		{"create clusterrole", "POST", "/apis/rbac.authorization.k8s.io/v1/clusterroles", "application/json",
			`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRole","metadata":{"name":"r"}}`, true},
		{"apply clusterrolebinding", "PATCH", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/b?fieldManager=kubectl", "application/apply-patch+yaml",
			"apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata:\n  name: b\n", true},
		{"patch ingressclass", "PATCH", "/apis/networking.k8s.io/v1/ingressclasses/c", "application/merge-patch+json",
			`{"metadata":{"annotations":{"a":"b"}}}`, true},
		{"create namespace", "POST", "/api/v1/namespaces", "application/json",
			`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"x"}}`, true},
		{"replace namespace", "PUT", "/api/v1/namespaces/x", "application/json",
			`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"x"}}`, true},
		{"create configmap", "POST", "/api/v1/namespaces/ns1/configmaps", "application/json",
			`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"}}`, false},
		{"create deployment", "POST", "/apis/apps/v1/namespaces/ns1/deployments", "application/json", deployment, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			do(t, hc, p, c.method, c.path, c.ct, c.body)
			got := api.last(t)
			l := labelsAt(t, got.body, "metadata")
			if l[deployedBy] != "myenv" {
				t.Errorf("deployed-by %v: %s", l[deployedBy], got.body)
			}
			if has := l[deployedNS] == "ns1"; has != c.cluster {
				t.Errorf("deployed-namespace present=%v, want %v: %s", has, c.cluster, got.body)
			}
			if strings.Contains(c.body, `"template"`) {
				tl := labelsAt(t, got.body, "spec", "template", "metadata")
				if tl[deployedBy] != "myenv" || tl[deployedNS] != nil {
					t.Errorf("template labels %v: want deployed-by only", tl)
				}
			}
		})
	}

	t.Run("protobuf clusterrole", func(t *testing.T) {
		cr := &rbacv1.ClusterRole{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"},
			ObjectMeta: metav1.ObjectMeta{Name: "r", Labels: map[string]string{"keep": "me"}},
			Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}}}}
		do(t, hc, p, "POST", "/apis/rbac.authorization.k8s.io/v1/clusterroles", "application/vnd.kubernetes.protobuf", protoBody(t, cr))
		got := fromProto(t, api.last(t).body).(*rbacv1.ClusterRole)
		want := map[string]string{"keep": "me", deployedBy: "myenv", deployedNS: "ns1"}
		if !equality.Semantic.DeepEqual(got.Labels, want) || !equality.Semantic.DeepEqual(got.Rules, cr.Rules) {
			t.Errorf("labels %v rules %v; want labels %v and the rules unchanged", got.Labels, got.Rules, want)
		}
	})
	t.Run("protobuf configmap", func(t *testing.T) {
		cm := &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}, ObjectMeta: metav1.ObjectMeta{Name: "c"}}
		do(t, hc, p, "POST", "/api/v1/namespaces/ns1/configmaps", "application/vnd.kubernetes.protobuf", protoBody(t, cm))
		got := fromProto(t, api.last(t).body).(*corev1.ConfigMap)
		if got.Labels[deployedBy] != "myenv" || got.Labels[deployedNS] != "" {
			t.Errorf("labels %v: want deployed-by only", got.Labels)
		}
	})
	t.Run("list items", func(t *testing.T) {
		body := `{"apiVersion":"v1","kind":"List","items":[` +
			`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRole","metadata":{"name":"a"}},` +
			`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"b","namespace":"ns1"}}]}`
		do(t, hc, p, "POST", "/apis/rbac.authorization.k8s.io/v1/clusterroles", "application/json", body)
		items := mustJSON(t, api.last(t).body)["items"].([]any)
		for i, want := range []any{"ns1", nil} {
			if got := lookup(items[i].(map[string]any), []string{"metadata", "labels", deployedNS}); got != want {
				t.Errorf("item %d: deployed-namespace %v, want %v", i, got, want)
			}
		}
	})
}

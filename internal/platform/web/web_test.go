package web

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kfake "k8s.io/client-go/kubernetes/fake"
	kptr "k8s.io/utils/ptr"

	"github.com/devtool/devtool/internal/deploy"
	"github.com/devtool/devtool/internal/dev"
	"github.com/devtool/devtool/internal/kube"
	"github.com/devtool/devtool/internal/platform/api"
	"github.com/devtool/devtool/internal/platform/store"
	"github.com/devtool/devtool/internal/platform/store/storetest"
)

func TestValidReturn(t *testing.T) {
	const domain = "devtool.localhost"
	for _, c := range []struct {
		in, want string
		ok       bool
	}{
		{"/namespaces/alice", "/namespaces/alice", true},
		{"/namespaces?x=1", "/namespaces?x=1", true},
		{"https://web-alice.devtool.localhost:30245/path?q=1", "https://web-alice.devtool.localhost:30245/path?q=1", true},
		{"https://devtool.localhost/", "https://devtool.localhost/", true},
		{"https://DEVTOOL.localhost/", "https://DEVTOOL.localhost/", true},
		{"", "", false},
		{"//evil.example/x", "", false},
		{"/\\evil.example", "", false},
		{"\\\\evil.example", "", false},
		{"http://web-alice.devtool.localhost/", "", false},     // not https
		{"https://evil.example/", "", false},                   // another site
		{"https://evil-devtool.localhost/", "", false},         // a suffix, not a subdomain
		{"https://devtool.localhost.evil.example/", "", false}, // the domain as a prefix
		{"https://user@web.devtool.localhost/", "", false},     // user info
		{"javascript:alert(1)", "", false},
		{"namespaces", "", false},
		{"/a\nb", "", false},
		{"https://web.devtool.localhost/" + strings.Repeat("a", 3000), "", false},
	} {
		got, ok := ValidReturn(c.in, domain)
		if ok != c.ok || got != c.want {
			t.Errorf("ValidReturn(%q) = %q, %v; want %q, %v", c.in, got, ok, c.want, c.ok)
		}
	}
	if _, ok := ValidReturn("https://web.devtool.localhost/", ""); ok {
		t.Error("an absolute return URL was accepted with no domain configured")
	}
	if got := SignInURL("https://devtool.localhost:30244/", "https://web-a.devtool.localhost:30245/x?y=1"); got !=
		"https://devtool.localhost:30244/signin?return=https%3A%2F%2Fweb-a.devtool.localhost%3A30245%2Fx%3Fy%3D1" {
		t.Errorf("SignInURL = %s", got)
	}
}

// fixture is the UI on fake clients: a unit test of the pages' HTTP layer (the fakes enforce no
// RBAC; the integration tests on the local cluster prove isolation with real impersonation).
type fixture struct {
	t      *testing.T
	st     *store.Store
	kc     *kfake.Clientset
	ts     *httptest.Server
	tokens map[string]string
}

// newUsers is the store on fake clients with the users admin, alice and bob (each with a token, no
// password); the caller serves it.
func newUsers(t *testing.T) *fixture {
	t.Helper()
	st, kc := storetest.New(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	f := &fixture{t: t, st: st, kc: kc, tokens: map[string]string{}}
	for _, u := range []struct {
		name  string
		admin bool
	}{{"admin", true}, {"alice", false}, {"bob", false}} {
		_, tok, err := st.CreateUser(ctx, u.name, u.admin, "")
		if err != nil {
			t.Fatal(err)
		}
		f.tokens[u.name] = tok
	}
	f.waitSynced("alice")
	return f
}

// newFixture is the UI alone on fake clients.
func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := newUsers(t)
	ui, err := New(Options{Store: f.st, Info: api.Info{Version: "test", Domain: "devtool.localhost"},
		Log: slog.New(slog.NewTextHandler(testWriter{t}, nil))})
	if err != nil {
		t.Fatal(err)
	}
	f.ts = httptest.NewTLSServer(ui.Handler())
	t.Cleanup(f.ts.Close)
	return f
}

// testWriter sends the UI's log to the test's.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}

// waitSynced waits until the store's caches show user's personal namespace and membership.
func (f *fixture) waitSynced(user string) {
	deadline := time.Now().Add(10 * time.Second)
	for f.st.RoleIn(user, user) == "" || f.st.ManagedNamespace(user) == nil {
		if time.Now().After(deadline) {
			f.t.Fatalf("the store's caches never showed %s's namespace", user)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// browser is a client with a cookie jar that follows no redirects.
func (f *fixture) browser() *http.Client {
	jar, _ := cookiejar.New(nil)
	c := f.ts.Client()
	return &http.Client{Transport: c.Transport, Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

type page struct {
	status int
	body   string
	loc    string
}

func (f *fixture) do(c *http.Client, method, path string, form url.Values, hdr map[string]string) page {
	f.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, _ := http.NewRequest(method, f.ts.URL+path, body)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		f.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return page{status: resp.StatusCode, body: string(b), loc: resp.Header.Get("Location")}
}

func (f *fixture) signIn(user string) *http.Client {
	f.t.Helper()
	c := f.browser()
	p := f.do(c, "POST", "/signin", url.Values{"token": {f.tokens[user]}}, nil)
	if p.status != http.StatusSeeOther || p.loc != "/namespaces" {
		f.t.Fatalf("sign-in of %s: %d %s\n%s", user, p.status, p.loc, p.body)
	}
	return c
}

func (f *fixture) seedEnvironment(ns, env string, n int) {
	f.t.Helper()
	ctx := context.Background()
	ss := &deploy.StateStore{Clientset: f.kc, Namespace: ns}
	if err := ss.Save(ctx, &deploy.State{Name: env, Status: deploy.StatusDeployed, ManifestFile: "devtool.yml", Output: "deployed " + env}); err != nil {
		f.t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-web-%d", env, i), Namespace: ns,
			Labels: map[string]string{kube.LabelDeployedBy: env, "app.kubernetes.io/name": "web"}},
			Spec:   corev1.PodSpec{Containers: []corev1.Container{{Name: "web"}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{Name: "web", Ready: true}}}}
		if _, err := f.kc.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			f.t.Fatal(err)
		}
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: env + "-web", Namespace: ns, Labels: map[string]string{kube.LabelDeployedBy: env}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, Ports: []corev1.ServicePort{{Port: 8080, Protocol: corev1.ProtocolTCP}}}}
	if _, err := f.kc.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		f.t.Fatal(err)
	}
	pt := networkingv1.PathTypePrefix
	ing := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Name: env + "-web", Namespace: ns, Labels: map[string]string{kube.LabelDeployedBy: env}},
		Spec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{Host: "web-" + env + "-" + ns + ".devtool.localhost",
			IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{
				Path: "/", PathType: &pt, Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: env + "-web",
					Port: networkingv1.ServiceBackendPort{Number: 8080}}}}}}}}}}}
	if _, err := f.kc.NetworkingV1().Ingresses(ns).Create(ctx, ing, metav1.CreateOptions{}); err != nil {
		f.t.Fatal(err)
	}
}

func TestPagesOnFakes(t *testing.T) {
	f := newFixture(t)
	f.seedEnvironment("alice", "hello", 2)
	now := metav1.NewMicroTime(time.Now())
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: dev.LeaseName("web"), Namespace: "alice", Labels: map[string]string{dev.LabelDev: "web"},
		Annotations: map[string]string{"dev.devtool/holder-host": "alice@laptop", "dev.devtool/holder-folder": "/src/hello", "dev.devtool/holder-pid": "42"}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: kptr.To("SHA256:x"), LeaseDurationSeconds: kptr.To(int32(30)), AcquireTime: &now, RenewTime: &now}}
	if _, err := f.kc.CoordinationV1().Leases("alice").Create(context.Background(), lease, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	devPod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-devtool-x", Namespace: "alice",
		Labels: map[string]string{kube.LabelDeployedBy: "hello", dev.LabelDev: "web"}},
		Spec:   corev1.PodSpec{Containers: []corev1.Container{{Name: "dev"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{Name: "dev", Ready: true}}}}
	if _, err := f.kc.CoreV1().Pods("alice").Create(context.Background(), devPod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	anon := f.browser()
	for _, path := range []string{"/namespaces", "/namespaces/alice", "/tokens", "/secrets", "/admin", "/namespaces/alice/environments/hello"} {
		p := f.do(anon, "GET", path, nil, nil)
		if p.status != http.StatusSeeOther || !strings.HasPrefix(p.loc, "/signin?return=") {
			t.Errorf("anonymous GET %s: %d %q, want a redirect to the sign-in page", path, p.status, p.loc)
		}
	}
	if p := f.do(anon, "GET", "/signin", nil, nil); p.status != 200 || !strings.Contains(p.body, `name="token"`) {
		t.Errorf("sign-in page: %d\n%s", p.status, p.body)
	}
	if p := f.do(anon, "POST", "/signin", url.Values{"token": {"dvt_0000000000000000_" + strings.Repeat("A", 43)}}, nil); p.status != http.StatusUnauthorized {
		t.Errorf("a wrong token signed in: %d", p.status)
	}

	alice := f.signIn("alice")
	for path, want := range map[string][]string{
		"/namespaces":                               {"<h1>Namespaces</h1>", `href="/namespaces/alice"`},
		"/namespaces/alice":                         {"Namespace alice", `href="/namespaces/alice/environments/hello"`, "3/3", "alice@laptop in /src/hello (pid 42)", "live", "limits.cpu"},
		"/namespaces/alice/environments/hello":      {"Environment hello", "deployed", "https://web-hello-alice.devtool.localhost/", "hello-web", "8080/TCP", "web-devtool-x"},
		"/namespaces/alice/environments/hello/logs": {"Logs of hello", `data-stream="/namespaces/alice/environments/hello/logs/stream?`},
		"/namespaces/alice/secrets":                 {"Stored secrets of alice"},
		"/secrets":                                  {"Stored secrets"},
		"/tokens":                                   {"API tokens", "initial"},
	} {
		p := f.do(alice, "GET", path, nil, nil)
		if p.status != 200 {
			t.Errorf("alice GET %s: %d\n%s", path, p.status, p.body)
			continue
		}
		for _, w := range want {
			if !strings.Contains(p.body, w) {
				t.Errorf("alice GET %s: no %q in\n%s", path, w, p.body)
			}
		}
	}
	if p := f.do(alice, "GET", "/namespaces/alice/environments/hello?fragment=env", nil, nil); p.status != 200 || strings.Contains(p.body, "<html") || !strings.Contains(p.body, "hello-web") {
		t.Errorf("fragment: %d\n%s", p.status, p.body)
	}
	// Not an admin: the admin page does not exist for alice; bob's namespace neither.
	for _, path := range []string{"/admin", "/namespaces/bob", "/namespaces/bob/environments/hello", "/namespaces/bob/logs", "/namespaces/bob/secrets", "/namespaces/nosuch"} {
		if p := f.do(alice, "GET", path, nil, nil); p.status != http.StatusNotFound {
			t.Errorf("alice GET %s: %d, want 404", path, p.status)
		}
	}
	// A cross-origin POST is refused before anything happens.
	p := f.do(alice, "POST", "/namespaces", url.Values{"name": {"csrf-made"}}, map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"})
	if p.status != http.StatusForbidden {
		t.Errorf("cross-site POST: %d, want 403", p.status)
	}
	if f.st.ManagedNamespace("csrf-made") != nil {
		t.Error("the cross-site POST created a namespace")
	}
	// Same-origin form posts work.
	p = f.do(alice, "POST", "/namespaces", url.Values{"name": {"alice-two"}}, map[string]string{"Sec-Fetch-Site": "same-origin"})
	if p.status != http.StatusSeeOther || p.loc != "/namespaces/alice-two" {
		t.Errorf("create namespace: %d %s\n%s", p.status, p.loc, p.body)
	}
	if p := f.do(alice, "POST", "/namespaces", url.Values{"name": {"Bad_Name"}}, nil); p.status != http.StatusBadRequest || !strings.Contains(p.body, "lower-case letters") {
		t.Errorf("bad namespace name: %d\n%s", p.status, p.body)
	}
	// A token: shown once, in the answer to its creation.
	p = f.do(alice, "POST", "/tokens", url.Values{"name": {"laptop"}, "days": {"30"}}, nil)
	if p.status != http.StatusCreated || !strings.Contains(p.body, "dvt_") {
		t.Errorf("create token: %d\n%s", p.status, p.body)
	}
	if p := f.do(alice, "GET", "/tokens", nil, nil); strings.Contains(p.body, "dvt_") || !strings.Contains(p.body, "laptop") {
		t.Errorf("the tokens page shows a secret or misses the new token:\n%s", p.body)
	}
	// A secret: stored, listed by name, its value never shown.
	p = f.do(alice, "POST", "/secrets", url.Values{"name": {"API_KEY"}, "value": {"s3cr3t-value"}}, nil)
	if p.status != http.StatusSeeOther {
		t.Errorf("set secret: %d\n%s", p.status, p.body)
	}
	if p := f.do(alice, "GET", "/secrets", nil, nil); !strings.Contains(p.body, "API_KEY") || strings.Contains(p.body, "s3cr3t-value") {
		t.Errorf("secrets page:\n%s", p.body)
	}
	// Sign-out ends the session on the platform's side: the old cookie no longer works.
	u, _ := url.Parse(f.ts.URL)
	old := alice.Jar.Cookies(u)
	if p := f.do(alice, "POST", "/signout", url.Values{}, nil); p.status != http.StatusSeeOther {
		t.Errorf("sign-out: %d", p.status)
	}
	replay := f.browser()
	replay.Jar.SetCookies(u, old)
	if p := f.do(replay, "GET", "/namespaces", nil, nil); p.status != http.StatusSeeOther {
		t.Errorf("the cookie of a signed-out session still works: %d", p.status)
	}

	admin := f.signIn("admin")
	if p := f.do(admin, "GET", "/admin", nil, nil); p.status != 200 || !strings.Contains(p.body, "alice") || !strings.Contains(p.body, "50Gi") {
		t.Errorf("admin page: %d\n%s", p.status, p.body)
	}
	// Quota defaults: a bad quantity refused naming the field; good ones saved and given to the next namespace.
	limits := url.Values{}
	for _, k := range store.LimitKeys() {
		limits.Set(k, store.LimitValue(store.DefaultLimits, k))
	}
	limits.Set("quota.pods", "lots")
	if p := f.do(admin, "POST", "/admin/limits", limits, nil); p.status != http.StatusBadRequest || !strings.Contains(p.body, "quota.pods") {
		t.Errorf("a bad quota: %d\n%s", p.status, p.body)
	}
	limits.Set("quota.pods", "7")
	if p := f.do(admin, "POST", "/admin/limits", limits, nil); p.status != http.StatusSeeOther {
		t.Errorf("saving the quota: %d\n%s", p.status, p.body)
	}
	if p := f.do(f.signIn("alice"), "POST", "/admin/limits", limits, nil); p.status != http.StatusNotFound {
		t.Errorf("alice saving the quota: %d, want 404 (not an admin)", p.status)
	}
	if p := f.do(admin, "GET", "/admin", nil, nil); !strings.Contains(p.body, `name="quota.pods" value="7"`) {
		t.Errorf("the admin page does not show the saved quota")
	}
	p = f.do(admin, "POST", "/admin/users", url.Values{"name": {"carol"}}, nil)
	if p.status != http.StatusCreated || !strings.Contains(p.body, "dvt_") {
		t.Errorf("create user: %d\n%s", p.status, p.body)
	}
	q, err := f.kc.CoreV1().ResourceQuotas("carol").Get(context.Background(), store.QuotaName, metav1.GetOptions{})
	if err != nil || q.Spec.Hard.Pods().String() != "7" {
		t.Errorf("carol's quota: %v %v, want 7 pods (the saved default)", q, err)
	}
}

func TestLocalRefusesWithoutToken(t *testing.T) {
	kc := kfake.NewClientset()
	tok := "0123456789abcdef0123456789abcdef"
	l, err := NewLocal(LocalOptions{Kube: kc, Namespace: "ns", Environment: "hello", Token: tok})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(l.Handler())
	defer ts.Close()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(path string, host string) (int, string, string) {
		req, _ := http.NewRequest("GET", ts.URL+path, nil)
		if host != "" {
			req.Host = host
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Location"), string(b)
	}
	if st, _, _ := get("/", ""); st != http.StatusUnauthorized {
		t.Errorf("no token: %d, want 401", st)
	}
	if st, _, _ := get("/?token=wrong", ""); st != http.StatusUnauthorized {
		t.Errorf("a wrong token: %d, want 401", st)
	}
	if st, _, _ := get("/static/style.css", ""); st != http.StatusUnauthorized {
		t.Errorf("an asset without the token: %d, want 401", st)
	}
	if st, _, _ := get("/?token="+tok, "devtool.attacker.example:80"); st != http.StatusMisdirectedRequest {
		t.Errorf("a foreign Host (DNS rebinding): %d, want 421", st)
	}
	st, loc, _ := get("/logs?token="+tok+"&service=web", "")
	if st != http.StatusSeeOther || loc != "/logs?service=web" {
		t.Errorf("token in the URL: %d %q, want a redirect without it", st, loc)
	}
	if st, _, body := get("/", ""); st != http.StatusOK || !strings.Contains(body, "Environment hello") {
		t.Errorf("with the cookie: %d\n%s", st, body)
	}
	for _, h := range []string{"localhost:1234", "[::1]:1234", "127.0.0.1"} {
		if st, _, _ := get("/?token="+tok, h); st != http.StatusSeeOther {
			t.Errorf("%s as the host: %d, want 303", h, st)
		}
	}
	if _, err := NewLocal(LocalOptions{Kube: kc, Token: "short"}); err == nil {
		t.Error("a short token was accepted")
	}
}

// BenchmarkRenderNamespace50 is the namespace page's template alone with 50 environments (each
// with an endpoint, pods and an error-free status) and 5 dev containers: the part of a page's
// server time that is not the cluster's reads.
func BenchmarkRenderNamespace50(b *testing.B) {
	t, err := parseTemplates()
	if err != nil {
		b.Fatal(err)
	}
	v := &NamespaceView{Problems: map[string]string{}}
	for i := 0; i < 50; i++ {
		v.Envs = append(v.Envs, EnvSummary{Name: fmt.Sprintf("env-%02d", i), Status: "deployed", Updated: time.Now(), Pods: 3, Ready: 3,
			Endpoints: []deploy.PublicEndpoint{{URL: fmt.Sprintf("https://web-env-%02d-alice.devtool.localhost/", i)}}})
	}
	for i := 0; i < 5; i++ {
		v.Devs = append(v.Devs, DevView{Name: fmt.Sprintf("dev-%d", i), HasLease: true, Live: true, Holder: "alice@laptop in /src (pid 42)",
			Pods: []PodView{{Name: "web-devtool-x", Phase: "Running", Ready: "1/1"}}})
	}
	d := namespaceData{Name: "alice", Role: "owner", Owner: true, View: v, Roles: []string{"viewer", "editor", "owner"}, Owners: 1,
		Members: []store.Membership{{Namespace: "alice", User: "alice", Role: "owner"}}}
	req := httptest.NewRequest("GET", "/namespaces/alice", nil)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		w := httptest.NewRecorder()
		writePage(w, req, t, 200, "namespace", view{Title: "Namespace alice", User: "alice", Data: d}, func(string, ...any) {})
		if w.Code != 200 || w.Body.Len() < 10000 {
			b.Fatalf("status %d, %d bytes", w.Code, w.Body.Len())
		}
	}
}

type fakeAnalytics struct {
	on  bool
	rep api.AnalyticsReport
}

func (f *fakeAnalytics) Enabled() bool                               { return f.on }
func (f *fakeAnalytics) SetEnabled(_ context.Context, on bool) error { f.on = on; return nil }
func (f *fakeAnalytics) Report(int) (api.AnalyticsReport, error)     { return f.rep, nil }

// TestAdminAnalytics: the admin page sums the daily counts by command and version (every OS and
// architecture), shows the installations estimate, and switches analytics on and off.
func TestAdminAnalytics(t *testing.T) {
	f := newFixture(t)
	fa := &fakeAnalytics{rep: api.AnalyticsReport{Days: []api.AnalyticsDay{{Date: "2026-11-27", Installs: 3, Counts: []api.AnalyticsCount{
		{Command: "deploy", Version: "1.2.0", OS: "linux", Arch: "amd64", Success: true, Count: 5},
		{Command: "deploy", Version: "1.2.0", OS: "darwin", Arch: "arm64", Success: true, Count: 2},
		{Command: "deploy", Version: "1.2.0", OS: "linux", Arch: "amd64", Success: false, Count: 1},
	}}}}}
	ui, err := New(Options{Store: f.st, Info: api.Info{Domain: "devtool.localhost"}, Analytics: fa})
	if err != nil {
		t.Fatal(err)
	}
	f.ts.Close()
	f.ts = httptest.NewTLSServer(ui.Handler())
	defer f.ts.Close()
	admin := f.signIn("admin")
	p := f.do(admin, "GET", "/admin", nil, nil)
	if !regexp.MustCompile(`<td>2026-11-27</td><td>3</td><th scope="row">deploy</th><td>1.2.0</td><td>7</td><td class="bad">1</td>`).MatchString(p.body) ||
		!strings.Contains(p.body, "Analytics are <strong>off</strong>") {
		t.Errorf("admin page analytics:\n%s", p.body)
	}
	if p := f.do(admin, "POST", "/admin/analytics", url.Values{"enabled": {"true"}}, nil); p.status != http.StatusSeeOther || !fa.on {
		t.Errorf("turning analytics on: %d, on=%v", p.status, fa.on)
	}
	if p := f.do(f.signIn("alice"), "POST", "/admin/analytics", url.Values{"enabled": {"false"}}, nil); p.status != http.StatusNotFound || !fa.on {
		t.Errorf("alice turning analytics off: %d, on=%v", p.status, fa.on)
	}
}

//go:build integration

package web

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/devtool/devtool/internal/deploy"
	"github.com/devtool/devtool/internal/kube"
	"github.com/devtool/devtool/internal/platform/api"
	"github.com/devtool/devtool/internal/platform/install"
	"github.com/devtool/devtool/internal/platform/server"
	"github.com/devtool/devtool/internal/platform/store"
	"github.com/devtool/devtool/internal/testcluster"
)

// livePlatform is the platform's code (API and web UI) in this process against the real cluster:
// its own platform namespace, users with their own ServiceAccounts, and every page's reads made by
// impersonating them, so the API server's RBAC decides what a page may show.
type livePlatform struct {
	t      *testing.T
	c      *testcluster.Cluster
	st     *store.Store
	ui     *UI
	ts     *httptest.Server
	suffix string
	tokens map[string]string // by user
	admin  string

	mu     sync.Mutex
	served time.Duration // the last request's server time (handler start to return)
}

func (p *livePlatform) lastServed() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.served
}

func startLive(t *testing.T) *livePlatform { return startLiveWith(t, nil) }

// startLiveWith is startLive with the server's options changed by tune (a benchmark lifts the rate
// limits it would otherwise measure).
func startLiveWith(t *testing.T, tune func(*server.Options)) *livePlatform {
	t.Helper()
	c := testcluster.Connect(t)
	var b [3]byte
	_, _ = rand.Read(b[:])
	suffix := hex.EncodeToString(b[:])
	ns := "devtool-sys-t" + suffix
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if _, err := c.Clientset.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns,
		Labels: map[string]string{"dev.devtool/test": "true"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p := &livePlatform{t: t, c: c, suffix: suffix, tokens: map[string]string{}}
	t.Cleanup(func() { p.deleteNamespace(ns) })
	cfg := rest.CopyConfig(c.Config)
	cfg.QPS, cfg.Burst = 100, 200
	st, err := store.New(cfg, ns)
	if err != nil {
		t.Fatal(err)
	}
	if err := install.ApplyDefinitions(ctx, st); err != nil {
		t.Fatal(err)
	}
	if err := st.Start(ctx); err != nil {
		t.Fatal(err)
	}
	p.st = st
	log := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	info := api.Info{Version: "test", Domain: "devtool.localhost"}
	var srv *server.Server
	p.ui, err = New(Options{Store: st, Info: info, Log: log, AllowAccount: func(u string) bool { return srv.AllowAccount(u) }, NoteUser: server.NoteUser})
	if err != nil {
		t.Fatal(err)
	}
	so := server.Options{Store: st, Info: info, Log: log, Web: p.ui.Handler()}
	if tune != nil {
		tune(&so)
	}
	srv = server.New(so)
	h := srv.Handler()
	p.ts = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		h.ServeHTTP(w, r)
		p.mu.Lock()
		p.served = time.Since(start)
		p.mu.Unlock()
	}))
	p.ts.StartTLS()
	t.Cleanup(p.ts.Close)
	p.admin = p.user("admin", true)
	return p
}

// user makes a platform user named base-<suffix> (admin or not) and returns its name.
func (p *livePlatform) user(base string, admin bool) string {
	p.t.Helper()
	name := base + "-" + p.suffix
	_, tok, err := p.st.CreateUser(context.Background(), name, admin, "")
	if err != nil {
		p.t.Fatalf("creating user %s: %v", name, err)
	}
	p.tokens[name] = tok
	p.t.Cleanup(func() {
		_ = p.st.DeleteUser(context.Background(), name)
		p.deleteNamespace(name)
	})
	p.eventually(10*time.Second, "the caches show "+name+"'s namespace", func() error {
		if p.st.RoleIn(name, name) == "" || p.st.ManagedNamespace(name) == nil {
			return fmt.Errorf("not yet")
		}
		return nil
	})
	return name
}

func (p *livePlatform) deleteNamespace(name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	bg := metav1.DeletePropagationBackground
	if err := p.c.Clientset.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil && !apierrors.IsNotFound(err) {
		p.t.Errorf("deleting namespace %s: %v", name, err)
	}
}

// as is a Kubernetes client acting as user's ServiceAccount (what the user's kubeconfig does).
func (p *livePlatform) as(user string) kubernetes.Interface {
	p.t.Helper()
	kc, err := p.ui.clients.make(p.st.SAUsername(user))
	if err != nil {
		p.t.Fatal(err)
	}
	return kc
}

func (p *livePlatform) eventually(timeout time.Duration, what string, f func() error) {
	p.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// browser signs user in through the sign-in form (an API token) and returns the client with its
// session cookie.
func (p *livePlatform) browser(user string) *http.Client {
	p.t.Helper()
	f := &fixture{t: p.t, ts: p.ts, tokens: p.tokens}
	if user == "" {
		return f.browser()
	}
	return f.signIn(user)
}

func (p *livePlatform) get(c *http.Client, path string) page {
	p.t.Helper()
	f := &fixture{t: p.t, ts: p.ts}
	return f.do(c, "GET", path, nil, nil)
}

func (p *livePlatform) post(c *http.Client, path string, form url.Values, hdr map[string]string) page {
	p.t.Helper()
	f := &fixture{t: p.t, ts: p.ts}
	return f.do(c, "POST", path, form, hdr)
}

// deployTicker makes environment env in ns as user would (the user's own client): a state
// ConfigMap, a Service, an Ingress and a pod printing a numbered line every 300 ms.
func deployTicker(t *testing.T, kc kubernetes.Interface, ns, env string) {
	t.Helper()
	ctx := context.Background()
	if err := (&deploy.StateStore{Clientset: kc, Namespace: ns}).Save(ctx, &deploy.State{Name: env, Status: deploy.StatusDeployed,
		ManifestFile: "devtool.yml", Output: "deployed by the test"}); err != nil {
		t.Fatal(err)
	}
	lbl := map[string]string{kube.LabelDeployedBy: env, "app.kubernetes.io/name": "ticker"}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "ticker", Namespace: ns, Labels: lbl},
		Spec: corev1.PodSpec{TerminationGracePeriodSeconds: new(int64), Containers: []corev1.Container{{
			Name: "ticker", Image: testcluster.Image, ImagePullPolicy: corev1.PullIfNotPresent,
			Command: []string{"sh", "-c", `i=0; while :; do echo "tick $i"; i=$((i+1)); sleep 0.3; done`}}}}}
	if _, err := kc.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "ticker", Namespace: ns, Labels: lbl},
		Spec: corev1.ServiceSpec{Selector: lbl, Ports: []corev1.ServicePort{{Port: 8080, Protocol: corev1.ProtocolTCP}}}}
	if _, err := kc.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pt := networkingv1.PathTypePrefix
	ing := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Name: "ticker", Namespace: ns, Labels: lbl},
		Spec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{Host: "ticker-" + ns + ".devtool.localhost",
			IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{
				Path: "/", PathType: &pt, Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "ticker",
					Port: networkingv1.ServiceBackendPort{Number: 8080}}}}}}}}}}}
	if _, err := kc.NetworkingV1().Ingresses(ns).Create(ctx, ing, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

var tickRE = regexp.MustCompile(`tick (\d+)`)

// TestUIOnCluster: pages read as the signed-in user, on the real cluster. alice sees her
// environment, its pods, endpoints, logs (tail, and a follow that delivers lines written after it
// started); bob sees none of it, by page or by direct URL (404); shared as viewer, bob sees the
// environment but neither its stored secrets nor (the API server refuses his ServiceAccount) its
// dev containers' leases; unshared, 404 again. A cross-origin POST is refused.
func TestUIOnCluster(t *testing.T) {
	p := startLive(t)
	alice, bob := p.user("alice", false), p.user("bob", false)
	deployTicker(t, p.as(alice), alice, "hello")
	ac := p.browser(alice)
	envURL := "/namespaces/" + alice + "/environments/hello"

	p.eventually(2*time.Minute, "the ticker pod runs and the environment page shows it", func() error {
		pg := p.get(ac, envURL)
		if pg.status != 200 || !strings.Contains(pg.body, "ticker") || !strings.Contains(pg.body, `<span class="good">Running</span>`) {
			return fmt.Errorf("status %d", pg.status)
		}
		return nil
	})
	pg := p.get(ac, envURL)
	for _, want := range []string{"deployed", "https://ticker-" + alice + ".devtool.localhost/", "8080/TCP"} {
		if !strings.Contains(pg.body, want) {
			t.Errorf("environment page: no %q", want)
		}
	}
	if pg := p.get(ac, "/namespaces/"+alice); pg.status != 200 || !strings.Contains(pg.body, `href="/namespaces/`+alice+`/environments/hello"`) || !strings.Contains(pg.body, "limits.cpu") {
		t.Errorf("namespace page: %d\n%s", pg.status, pg.body)
	}
	p.eventually(time.Minute, "the logs page shows the ticker's lines", func() error {
		pg := p.get(ac, envURL+"/logs?tail=5")
		if pg.status != 200 || !tickRE.MatchString(pg.body) {
			return fmt.Errorf("status %d, no tick line", pg.status)
		}
		return nil
	})
	followsNewLines(t, p, ac, envURL+"/logs/stream?tail=1")

	// A namespace secret of alice's: its name is on her page, its value nowhere.
	secret := "ALICE_ONLY_" + strings.ToUpper(p.suffix)
	if pg := p.post(ac, "/namespaces/"+alice+"/secrets", url.Values{"name": {secret}, "value": {"value-" + p.suffix}}, nil); pg.status != http.StatusSeeOther {
		t.Fatalf("setting a namespace secret: %d\n%s", pg.status, pg.body)
	}
	if pg := p.get(ac, "/namespaces/"+alice+"/secrets"); !strings.Contains(pg.body, secret) || strings.Contains(pg.body, "value-"+p.suffix) {
		t.Errorf("alice's secrets page:\n%s", pg.body)
	}

	// bob: none of alice's, by page or by URL.
	bc := p.browser(bob)
	hidden := []string{"/namespaces/" + alice, envURL, envURL + "/logs", envURL + "/logs.txt", envURL + "/logs/stream",
		"/namespaces/" + alice + "/logs", "/namespaces/" + alice + "/secrets", "/namespaces/" + alice + "/delete"}
	bobSeesNothing := func() {
		t.Helper()
		for _, path := range hidden {
			if pg := p.get(bc, path); pg.status != http.StatusNotFound || strings.Contains(pg.body, "tick") || strings.Contains(pg.body, secret) {
				t.Errorf("bob GET %s: %d, want 404 without alice's data", path, pg.status)
			}
		}
		for _, path := range []string{"/namespaces", "/secrets", "/tokens"} {
			if pg := p.get(bc, path); pg.status != 200 || strings.Contains(pg.body, alice) || strings.Contains(pg.body, secret) {
				t.Errorf("bob GET %s: %d, or it names alice's namespace or secret", path, pg.status)
			}
		}
	}
	bobSeesNothing()
	if pg := p.post(bc, "/namespaces/"+alice+"/delete", url.Values{"confirm": {alice}}, nil); pg.status != http.StatusNotFound {
		t.Errorf("bob deleting alice's namespace: %d, want 404", pg.status)
	}
	if pg := p.post(bc, "/namespaces/"+alice+"/members", url.Values{"user": {bob}, "role": {"owner"}}, nil); pg.status != http.StatusNotFound {
		t.Errorf("bob sharing alice's namespace with himself: %d, want 404", pg.status)
	}

	// Shared as viewer: the environment and its logs, not the secrets, and the leases' section
	// refused by the API server for bob's ServiceAccount (the platform's own rights would read them).
	if pg := p.post(ac, "/namespaces/"+alice+"/members", url.Values{"user": {bob}, "role": {"viewer"}}, nil); pg.status != http.StatusSeeOther {
		t.Fatalf("share: %d\n%s", pg.status, pg.body)
	}
	p.eventually(10*time.Second, "bob sees the shared namespace", func() error {
		if pg := p.get(bc, "/namespaces/"+alice); pg.status != 200 {
			return fmt.Errorf("status %d", pg.status)
		}
		return nil
	})
	if pg := p.get(bc, "/namespaces/"+alice); !strings.Contains(pg.body, "Dev containers: your role in this namespace may not read this") {
		t.Errorf("bob as viewer: the dev containers' leases were read with more than his rights:\n%s", pg.body)
	}
	if pg := p.get(bc, envURL+"/logs?tail=3"); pg.status != 200 || !tickRE.MatchString(pg.body) {
		t.Errorf("bob as viewer reading the logs: %d", pg.status)
	}
	if pg := p.get(bc, "/namespaces/"+alice+"/secrets"); pg.status != 200 || strings.Contains(pg.body, secret) || !strings.Contains(pg.body, "As a viewer") {
		t.Errorf("bob as viewer on the secrets page: %d\n%s", pg.status, pg.body)
	}
	if pg := p.post(ac, "/namespaces/"+alice+"/members/"+bob+"/remove", url.Values{}, nil); pg.status != http.StatusSeeOther {
		t.Fatalf("unshare: %d\n%s", pg.status, pg.body)
	}
	p.eventually(10*time.Second, "bob no longer sees the namespace", func() error {
		if pg := p.get(bc, "/namespaces/"+alice); pg.status != http.StatusNotFound {
			return fmt.Errorf("status %d", pg.status)
		}
		return nil
	})
	bobSeesNothing()
	// Both changes are audit records in alice's namespace (the API server takes a Namespace's Event
	// there only when it names that namespace as the object's).
	evs, err := p.c.Clientset.CoreV1().Events(alice).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	recorded := map[string]bool{}
	for _, e := range evs.Items {
		if e.InvolvedObject.Kind == "Namespace" && e.InvolvedObject.Name == alice && strings.Contains(e.Message, bob) {
			recorded[e.Reason] = true
		}
	}
	if !recorded["PlatformShare"] || !recorded["PlatformUnshare"] {
		t.Errorf("audit records of the share and unshare in %s: %v", alice, recorded)
	}

	// Cross-origin form posts are refused (Sec-Fetch-Site, or an Origin of another host).
	for _, hdr := range []map[string]string{{"Sec-Fetch-Site": "cross-site"}, {"Sec-Fetch-Site": "same-site"}, {"Origin": "https://evil.example"}} {
		if pg := p.post(ac, "/namespaces", url.Values{"name": {"csrf-" + p.suffix}}, hdr); pg.status != http.StatusForbidden {
			t.Errorf("cross-origin POST with %v: %d, want 403", hdr, pg.status)
		}
	}
	if _, err := p.c.Clientset.CoreV1().Namespaces().Get(context.Background(), "csrf-"+p.suffix, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("a cross-origin POST created a namespace: %v", err)
	}
	// The admin page: for the admin, not for alice.
	if pg := p.get(p.browser(p.admin), "/admin"); pg.status != 200 || !strings.Contains(pg.body, alice) {
		t.Errorf("admin page: %d", pg.status)
	}
	if pg := p.get(ac, "/admin"); pg.status != http.StatusNotFound {
		t.Errorf("alice on the admin page: %d, want 404", pg.status)
	}
}

// followsNewLines reads the server-sent event stream and checks that lines written after it
// started arrive (a number above the first one seen).
func followsNewLines(t *testing.T, p *livePlatform, c *http.Client, path string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", p.ts.URL+path, nil)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("stream: %d %s\n%s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	sc := bufio.NewScanner(resp.Body)
	first := -1
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var l logLine
		if json.Unmarshal([]byte(data), &l) != nil {
			continue
		}
		m := tickRE.FindStringSubmatch(l.Text)
		if m == nil {
			continue
		}
		n, _ := strconv.Atoi(m[1])
		if first < 0 {
			first = n
			continue
		}
		if n >= first+3 {
			return
		}
	}
	t.Fatalf("the stream did not deliver new lines (first tick %d): %v", first, sc.Err())
}

// TestPageRenderTimes (DEVTOOL_BENCH=1) measures the namespace and environment pages with 50
// environments in a namespace against the reads they make, in the same run: the server time of a
// page (from the request log's clock: handler start to last byte) and the list calls alone with the
// same impersonated client. Reported, not asserted.
func TestPageRenderTimes(t *testing.T) {
	if os.Getenv("DEVTOOL_BENCH") == "" {
		t.Skip("set DEVTOOL_BENCH=1 to measure page render times")
	}
	p := startLiveWith(t, func(o *server.Options) { o.AccountRate, o.AccountBurst = rate.Inf, 0 })
	alice := p.user("alice", false)
	kc := p.as(alice)
	ctx := context.Background()
	for i := 0; i < 50; i++ {
		env := fmt.Sprintf("env-%02d", i)
		out := strings.Repeat("Step "+env+": applied deployment, waited for ready\n", 40) // a deploy's output, ~2 KiB
		if err := (&deploy.StateStore{Clientset: kc, Namespace: alice}).Save(ctx, &deploy.State{Name: env, Status: deploy.StatusDeployed, ManifestFile: "devtool.yml", Output: out}); err != nil {
			t.Fatal(err)
		}
		lbl := map[string]string{kube.LabelDeployedBy: env, "app.kubernetes.io/name": "web"}
		// Pods that stay Pending (no node matches): the objects a page lists, without 50 running containers.
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: env + "-web", Namespace: alice, Labels: lbl},
			Spec: corev1.PodSpec{NodeSelector: map[string]string{"devtool.dev/no-such-node": "x"},
				Containers: []corev1.Container{{Name: "web", Image: testcluster.Image, Resources: corev1.ResourceRequirements{
					Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")}}}}}}
		if i < 45 { // the quota allows 50 pods; keep room
			if _, err := kc.CoreV1().Pods(alice).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: env + "-web", Namespace: alice, Labels: lbl},
			Spec: corev1.ServiceSpec{Selector: lbl, Ports: []corev1.ServicePort{{Port: 8080}}}}
		if _, err := kc.CoreV1().Services(alice).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	ac := p.browser(alice)
	// Interleaved, so the machine's load (shared, noisy) weighs on all three alike: each round
	// takes the namespace page (server time: handler start to return), the environment page, and
	// the namespace page's list calls alone with the same kind of client.
	page := func(path string) time.Duration {
		if pg := p.get(ac, path); pg.status != 200 {
			t.Fatalf("%s: %d", path, pg.status)
		}
		return p.lastServed()
	}
	reads := func() time.Duration {
		start := time.Now()
		if _, err := ReadNamespace(ctx, kc, alice, 0, time.Now()); err != nil {
			t.Fatal(err)
		}
		return time.Since(start)
	}
	page("/namespaces/" + alice) // warm: clients, connections
	reads()
	if pg := p.get(ac, "/namespaces/"+alice); strings.Count(pg.body, "/environments/env-") < 50 {
		t.Fatalf("the namespace page lists %d environments", strings.Count(pg.body, "/environments/env-"))
	}
	const rounds = 40
	var nsT, envT, readT []time.Duration
	var ratios []float64
	for i := 0; i < rounds; i++ {
		a, b, c := page("/namespaces/"+alice), page("/namespaces/"+alice+"/environments/env-07"), reads()
		nsT, envT, readT = append(nsT, a), append(envT, b), append(readT, c)
		ratios = append(ratios, float64(a)/float64(c))
	}
	report := func(what string, d []time.Duration) {
		sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
		t.Logf("%-50s p50 %6.1f ms  p90 %6.1f ms  max %6.1f ms", what, ms(d[len(d)/2]), ms(d[len(d)*9/10]), ms(d[len(d)-1]))
	}
	report("namespace page, 50 environments (server time)", nsT)
	report("environment page (server time)", envT)
	report("the namespace page's list calls alone", readT)
	sort.Float64s(ratios)
	t.Logf("namespace page / its list calls, per round: median %.2f×, p90 %.2f× (%d rounds)", ratios[len(ratios)/2], ratios[len(ratios)*9/10], rounds)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

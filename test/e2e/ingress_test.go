//go:build integration

package e2e

import (
	"bufio"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/gorilla/websocket"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devtool/devtool/internal/platform/api"
	"github.com/devtool/devtool/internal/platform/client"
	"github.com/devtool/devtool/internal/platform/ingress"
	"github.com/devtool/devtool/internal/platform/ingress/ingresstest"
	"github.com/devtool/devtool/internal/platform/install"
	"github.com/devtool/devtool/internal/testcluster"
)

// ingressPlatform is a platform with its ingress, as a test uses it.
type ingressPlatform struct {
	platformFiles
	ca    []byte
	info  *api.Info
	admin *client.Client
}

func findIngressPlatform(t *testing.T) *ingressPlatform {
	t.Helper()
	p := findPlatform(t)
	ca, err := os.ReadFile(p.caFile)
	if err != nil {
		t.Fatal(err)
	}
	admin, err := client.New(client.Options{URL: p.url, Token: p.adminToken, CA: ca})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(admin.Close)
	info, err := admin.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info.EndpointPort == 0 || info.IngressClass == "" {
		msg := fmt.Sprintf("the platform at %s has no ingress (endpointPort %d, ingressClass %q): install this branch's platform", p.url, info.EndpointPort, info.IngressClass)
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return &ingressPlatform{platformFiles: p, ca: ca, info: info, admin: admin}
}

// newUserWithToken makes a platform user (removed after the test) and returns its token.
func (p *ingressPlatform) newUserWithToken(t *testing.T, name string) string {
	t.Helper()
	r, err := p.admin.CreateUser(context.Background(), api.CreateUserRequest{Name: name})
	if err != nil {
		t.Fatalf("creating %s: %v", name, err)
	}
	removePlatformUserAfter(t, p.admin, name)
	return r.Token
}

// httpClient trusts the platform's CA and dials *.localhost on loopback (curl and browsers do).
func (p *ingressPlatform) httpClient(t testing.TB, jar http.CookieJar) *http.Client {
	t.Helper()
	c, err := install.Client(p.ca)
	if err != nil {
		t.Fatal(err)
	}
	c.Jar = jar
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	t.Cleanup(c.CloseIdleConnections)
	return c
}

// pushEchoServer builds ingresstest/echoserver and pushes it to the local registry as an image
// (the binary alone on an empty base, as the platform's own image is made).
func pushEchoServer(t testing.TB, repo string) string {
	t.Helper()
	_, here, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(here), "..", "..")
	bin := filepath.Join(t.TempDir(), "echoserver")
	build := exec.Command("go", "build", "-trimpath", "-o", bin, "./internal/platform/ingress/ingresstest/echoserver")
	build.Dir = root
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the echo server: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ref, err := install.PushImage(ctx, bin, repo)
	if err != nil {
		t.Fatalf("pushing the echo server: %v", err)
	}
	return ref
}

// TestIngressOnPlatform: examples/hello and an echo server deployed through a platform context
// answer over HTTPS through the platform's ingress, in curl, a Go client and headless Chromium
// (page, WebSocket, streamed response); a private endpoint asks for the platform's login and lets in
// a member only; the endpoints keep answering while an ingress replica is deleted under load.
//
//	DEVTOOL_TEST_PLATFORM_DIR=/tmp/devtool-platform-ingress go test -tags integration -run TestIngressOnPlatform ./test/e2e/
func TestIngressOnPlatform(t *testing.T) {
	p := findIngressPlatform(t)
	s := randomSuffix()
	aliceName, bobName := "alice-"+s, "bob-"+s
	aliceTok, bobTok := p.newUserWithToken(t, aliceName), p.newUserWithToken(t, bobName)
	// Removing a user keeps its personal namespace: remove them (and their pods) too.
	kc := testcluster.Connect(t)
	t.Cleanup(func() {
		for _, n := range []string{aliceName, bobName} {
			_ = kc.Clientset.CoreV1().Namespaces().Delete(context.Background(), n, metav1.DeleteOptions{})
		}
	})
	alice := newPlatformUser(t)
	alice.mustRun("context", "use", p.url, "--token", aliceTok, "--ca-cert", p.caFile)
	ns := aliceName // her personal namespace
	port := p.info.EndpointPort
	host := func(name string) string { return name + "-" + ns + "." + p.info.Domain }
	endpoint := func(name, path string) string { return fmt.Sprintf("https://%s:%d%s", host(name), port, path) }

	// examples/hello, as is.
	_, here, _, _ := runtime.Caller(0)
	copyTree(t, filepath.Join(filepath.Dir(here), "..", "..", "examples", "hello"), alice.dir)
	out, _ := alice.mustRun("deploy", "--wait")
	if !strings.Contains(out, endpoint("web", "/")) {
		t.Fatalf("deploy printed %q, want the URL %s", out, endpoint("web", "/"))
	}
	out, _ = alice.mustRun("endpoints", "-o", "json")
	var urls []string
	if err := json.Unmarshal([]byte(out), &urls); err != nil || len(urls) != 1 || urls[0] != endpoint("web", "/") {
		t.Fatalf("endpoints -o json: %q %v", out, err)
	}

	// The echo server: public, and private by its label.
	image := pushEchoServer(t, "127.0.0.1:25000/"+ns+"/echoserver")
	probe := t.TempDir()
	alice.dir = probe
	if err := os.WriteFile(filepath.Join(probe, "compose.yml"), []byte(fmt.Sprintf(`name: probe
services:
  echo:
    image: %[1]s
    ports: ["8080:8080"]
    healthcheck: {http: {path: /small, port: 8080}, interval: 2s}
  secret:
    image: %[1]s
    ports: ["8081:8080"]
    labels: {dev.devtool/private: "true"}
    healthcheck: {http: {path: /small, port: 8080}, interval: 2s}
`, image)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _ = alice.mustRun("deploy", "--wait")
	for _, want := range []string{endpoint("echo", "/"), endpoint("secret", "/")} {
		if !strings.Contains(out, want) {
			t.Errorf("deploy printed %q, want %s", out, want)
		}
	}
	hc := p.httpClient(t, nil)
	// right after a deploy the endpoints answer (the ingress dials ready pods, not the Service's IP)
	for _, u := range []string{endpoint("web", "/"), endpoint("echo", "/small")} {
		code, body := mustGet(t, hc, u)
		if code != 200 {
			t.Fatalf("GET %s: %d %s", u, code, body)
		}
	}

	t.Run("curl", func(t *testing.T) {
		curl := func(args ...string) string {
			t.Helper()
			cmd := exec.Command("curl", append([]string{"-sS", "--fail", "--max-time", "60", "--cacert", p.caFile}, args...)...)
			b, err := cmd.Output()
			if err != nil {
				t.Fatalf("curl %s: %v", strings.Join(args, " "), err)
			}
			return string(b)
		}
		if body := curl(endpoint("web", "/")); !strings.Contains(body, "hello from devtool") {
			t.Errorf("hello: %q", body)
		}
		if body := curl("-N", endpoint("echo", "/stream?n=3&interval=200ms")); strings.Count(body, "\n") != 3 || !strings.HasPrefix(body, "line 1 of 3") {
			t.Errorf("stream: %q", body)
		}
		// curl resolves *.localhost itself; HTTP/2 over TLS
		if v := curl("-o", "/dev/null", "-w", "%{http_version}", endpoint("echo", "/small")); v != "2" {
			t.Errorf("HTTP version %q, want 2", v)
		}
	})

	t.Run("websocket and stream", func(t *testing.T) {
		code, body := mustGet(t, hc, endpoint("echo", "/echo"))
		var seen ingresstest.Request
		if err := json.Unmarshal([]byte(body), &seen); err != nil || code != 200 {
			t.Fatalf("/echo: %d %s", code, body)
		}
		if seen.Host != fmt.Sprintf("%s:%d", host("echo"), port) || seen.Headers["X-Forwarded-Proto"][0] != "https" {
			t.Errorf("the backend saw %+v", seen)
		}
		ws := p.dialWebSocket(t, strings.Replace(endpoint("echo", "/ws"), "https://", "wss://", 1), nil)
		for i := range 5 {
			msg := fmt.Sprintf("message %d", i)
			if err := ws.WriteMessage(websocket.TextMessage, []byte(msg)); err != nil {
				t.Fatal(err)
			}
			if _, got, err := ws.ReadMessage(); err != nil || string(got) != msg {
				t.Fatalf("echo: %q %v", got, err)
			}
		}
		ws.Close()
		// Lines 1 s apart arrive 1 s apart: each is passed on when the backend flushes it.
		resp, err := hc.Get(endpoint("echo", "/stream?n=3&interval=1s"))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		br := bufio.NewReader(resp.Body)
		var at []time.Time
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				break
			}
			at = append(at, time.Now())
			t.Logf("%s: %q", at[len(at)-1].Format("15:04:05.000"), line)
		}
		if len(at) != 3 || at[2].Sub(at[0]) < 1500*time.Millisecond {
			t.Errorf("lines arrived together (%d lines, %v from the first to the last): the response was buffered", len(at), at[len(at)-1].Sub(at[0]))
		}
	})

	t.Run("chromium", func(t *testing.T) {
		ctx, nw := p.browser(t)
		body := nw.retry(t, func() (string, error) {
			if err := chromedp.Do(ctx, chromedp.Navigate(endpoint("web", "/"))); err != nil {
				return "", err
			}
			return chromedp.Run(ctx, chromedp.Text(chromedp.CSS("body")))
		})
		if !strings.Contains(body, "hello from devtool") {
			t.Errorf("hello page in Chromium: %q", body)
		}
		res := nw.retry(t, func() (string, error) {
			if err := chromedp.Do(ctx, chromedp.Navigate(endpoint("echo", "/"))); err != nil {
				return "", err
			}
			return chromedp.Run(ctx, chromedp.Poll[string](`(function () {
				var ws = document.getElementById("ws").textContent, st = document.getElementById("stream").textContent;
				return ws !== "waiting" && st !== "waiting" ? ws + " | " + st : null; })()`, chromedp.WithPollingTimeout(60*time.Second)))
		})
		t.Logf("page: %s", res)
		if !strings.Contains(res, "echo: ping from the page") || !strings.Contains(res, "line 3 of 3") || strings.Contains(res, "done after 1 chunks") {
			t.Errorf("WebSocket and stream in Chromium: %s", res)
		}
	})

	t.Run("private endpoint", func(t *testing.T) {
		secret := endpoint("secret", "/echo?q=1")
		anon := p.httpClient(t, nil)
		resp := do(t, anon, http.MethodGet, secret, nil)
		loc, _ := url.Parse(resp.Header.Get("Location"))
		if resp.StatusCode != http.StatusFound || loc == nil || !strings.HasPrefix(loc.String(), p.url+ingress.LoginPath+"?") || loc.Query().Get("rd") != secret {
			t.Fatalf("anonymous: %d, Location %s", resp.StatusCode, resp.Header.Get("Location"))
		}
		// signIn: the endpoint → the platform's sign-in (token form) → the ticket → the cookie → the endpoint.
		signIn := func(token string) *http.Client {
			jar, _ := cookiejar.New(nil)
			c := p.httpClient(t, jar)
			resp := do(t, c, http.MethodGet, secret, nil)
			login := resp.Header.Get("Location")
			resp = do(t, c, http.MethodGet, login, nil)
			// With the web UI on, the platform sends the visitor to its sign-in page, which comes back
			// to the endpoint's login afterwards (the token form answers here when the UI is off).
			if resp.StatusCode == http.StatusFound {
				next := resp.Header.Get("Location")
				if !strings.HasPrefix(next, "/signin?return="+url.QueryEscape(ingress.LoginPath)) {
					t.Fatalf("the endpoint's login sent the visitor to %q, want the web UI's sign-in coming back to it", next)
				}
				resp = do(t, c, http.MethodGet, p.url+next, nil)
			}
			if resp.StatusCode != 200 {
				t.Fatalf("the sign-in page: %d", resp.StatusCode)
			}
			form := url.Values{"token": {token}, "rd": {secret}}
			req, _ := http.NewRequest(http.MethodPost, p.url+ingress.LoginPath, strings.NewReader(form.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("Origin", p.url)
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), endpoint("secret", ingress.AuthPath+"?")) {
				t.Fatalf("sign-in: %d %s", resp.StatusCode, resp.Header.Get("Location"))
			}
			resp = do(t, c, http.MethodGet, resp.Header.Get("Location"), nil)
			if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/echo?q=1" {
				t.Fatalf("the ticket: %d %s", resp.StatusCode, resp.Header.Get("Location"))
			}
			return c
		}
		code, body := mustGet(t, signIn(aliceTok), secret)
		if code != 200 || strings.Contains(body, ingress.CookieName) || !strings.Contains(body, `"query":"q=1"`) {
			t.Errorf("alice (owner): %d %s", code, body)
		}
		if code, body := mustGet(t, signIn(bobTok), secret); code != http.StatusForbidden || !strings.Contains(body, bobName) {
			t.Errorf("bob (not a member): %d %s", code, body)
		}
		// once alice shares the namespace with bob (viewer), he is let in (within the review cache's 5 s)
		alice.mustRun("namespace", "share", ns, bobName, "--role", "viewer")
		bc := signIn(bobTok)
		deadline := time.Now().Add(30 * time.Second)
		for {
			code, _ := mustGet(t, bc, secret)
			if code == 200 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("bob as a viewer: %d", code)
			}
			time.Sleep(time.Second)
		}

		// alice in Chromium: the endpoint → the platform's form → her page.
		ctx, nw := p.browser(t)
		got := nw.retry(t, func() (string, error) {
			if err := chromedp.Do(ctx, chromedp.Navigate(secret)); err != nil {
				return "", err
			}
			if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.ID("token")), chromedp.SendKeys(chromedp.ID("token"), aliceTok), chromedp.Submit(chromedp.ID("token"))); err != nil {
				return "", err
			}
			// the form posts to the platform, which redirects to the endpoint's ticket, then to the page
			deadline := time.Now().Add(time.Minute)
			for {
				loc, err := chromedp.Run(ctx, chromedp.Location())
				if err == nil && loc == secret {
					break
				}
				if time.Now().After(deadline) || nw.changed() {
					return "", fmt.Errorf("at %s (%v), want %s", loc, err, secret)
				}
				time.Sleep(200 * time.Millisecond)
			}
			return chromedp.Run(ctx, chromedp.Text(chromedp.CSS("body")))
		})
		if !strings.Contains(got, `"query":"q=1"`) {
			t.Fatalf("alice in Chromium: %q", got)
		}
		if strings.Contains(got, ingress.CookieName) {
			t.Errorf("the backend saw the login cookie: %s", got)
		}
	})

	t.Run("ingress replica deleted under load", func(t *testing.T) {
		p.loadWhileDeletingAnIngressPod(t, endpoint("echo", "/small"))
	})
}

// loadWhileDeletingAnIngressPod sends requests from 4 clients while one of the ingress's pods is
// deleted, until the Deployment is back to its replicas, and checks none failed.
func (p *ingressPlatform) loadWhileDeletingAnIngressPod(t *testing.T, u string) {
	c := testcluster.Connect(t)
	ctx := context.Background()
	svcs, err := c.Clientset.CoreV1().Services("").List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + install.IngressName})
	if err != nil {
		t.Fatal(err)
	}
	pns := ""
	for _, s := range svcs.Items {
		if len(s.Spec.Ports) > 0 && int(s.Spec.Ports[0].NodePort) == p.info.EndpointPort {
			pns = s.Namespace
		}
	}
	if pns == "" {
		t.Fatalf("no %s Service with node port %d", install.IngressName, p.info.EndpointPort)
	}
	sel := "app.kubernetes.io/name=" + install.IngressName
	pods, err := c.Clientset.CoreV1().Pods(pns).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		t.Fatal(err)
	}
	var running []corev1.Pod
	for _, pod := range pods.Items {
		if pod.DeletionTimestamp == nil && pod.Status.Phase == corev1.PodRunning {
			running = append(running, pod)
		}
	}
	if len(running) < 2 {
		t.Fatalf("%d running ingress pods in %s, want 2", len(running), pns)
	}
	var ok, failed atomic.Int64
	var errMu sync.Mutex
	var errs []string
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		hc := p.httpClient(t, nil)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				resp, err := hc.Get(u)
				if err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode == 200 {
						ok.Add(1)
						continue
					}
					err = fmt.Errorf("status %d", resp.StatusCode)
				}
				failed.Add(1)
				errMu.Lock()
				errs = append(errs, time.Now().Format("15:04:05.000")+" "+err.Error())
				errMu.Unlock()
			}
		}()
	}
	waitCount := func(n int64) {
		deadline := time.Now().Add(time.Minute)
		for ok.Load() < n && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitCount(50)
	before := ok.Load()
	victim := running[0].Name
	t.Logf("deleting ingress pod %s/%s after %d requests", pns, victim, before)
	if err := c.Clientset.CoreV1().Pods(pns).Delete(ctx, victim, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// until the pod is gone and its replacement is ready
	deadline := time.Now().Add(3 * time.Minute)
	for {
		_, gerr := c.Clientset.CoreV1().Pods(pns).Get(ctx, victim, metav1.GetOptions{})
		dep, derr := c.Clientset.AppsV1().Deployments(pns).Get(ctx, install.IngressName, metav1.GetOptions{})
		if gerr != nil && derr == nil && dep.Status.ReadyReplicas == *dep.Spec.Replicas && dep.Status.UpdatedReplicas == *dep.Spec.Replicas {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the ingress pod was not replaced within 3 minutes")
		}
		time.Sleep(500 * time.Millisecond)
	}
	during := ok.Load() - before
	waitCount(ok.Load() + 50)
	close(stop)
	wg.Wait()
	t.Logf("requests: %d before the deletion, %d while the pod terminated and was replaced, %d in all; %d failed", before, during, ok.Load(), failed.Load())
	if failed.Load() != 0 {
		t.Errorf("%d requests failed: %s", failed.Load(), strings.Join(errs[:min(len(errs), 10)], "; "))
	}
	if during == 0 {
		t.Error("no request was served while the pod was replaced")
	}
}

func (p *ingressPlatform) dialWebSocket(t *testing.T, u string, jar http.CookieJar) *websocket.Conn {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(p.ca)
	d := websocket.Dialer{TLSClientConfig: &tls.Config{RootCAs: pool}, Jar: jar, HandshakeTimeout: 30 * time.Second,
		NetDialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			_, port, _ := net.SplitHostPort(addr)
			return (&net.Dialer{}).DialContext(ctx, network, net.JoinHostPort("127.0.0.1", port))
		}}
	ws, resp, err := d.Dial(u, nil)
	if err != nil {
		t.Fatalf("websocket %s: %v (%v)", u, err, resp)
	}
	return ws
}

// browser starts headless Chromium (Debian's; no sandbox as root) that trusts the platform's and
// the ingress's certificates by their public keys.
func (p *ingressPlatform) browser(t *testing.T) (context.Context, *netWatch) {
	t.Helper()
	exe, err := exec.LookPath("chromium")
	if err != nil {
		msg := "no chromium (apt-get install chromium): " + err.Error()
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	pu, _ := url.Parse(p.url)
	pins := []string{spkiPin(t, pu.Host, pu.Hostname()), spkiPin(t, fmt.Sprintf("127.0.0.1:%d", p.info.EndpointPort), "x."+p.info.Domain)}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(exe), chromedp.NoSandbox,
		chromedp.Flag("ignore-certificate-errors-spki-list", strings.Join(pins, ",")),
		chromedp.UserDataDir(t.TempDir()))
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancel)
	ctx, cancel2 := chromedp.NewContext(actx)
	t.Cleanup(cancel2)
	ctx, cancel3 := context.WithTimeout(ctx, 5*time.Minute)
	t.Cleanup(cancel3)
	nw := &netWatch{urls: map[network.RequestID]string{}}
	if err := chromedp.Listen(ctx, func(ev any) {
		nw.mu.Lock()
		defer nw.mu.Unlock()
		switch e := ev.(type) {
		case *network.EventRequestWillBeSent:
			if len(nw.urls) < 10000 {
				nw.urls[e.RequestID] = e.Request.URL
			}
		case *network.EventLoadingFailed:
			nw.failed = append(nw.failed, e.ErrorText)
			nw.log = append(nw.log, fmt.Sprintf("failed %s: %s", nw.urls[e.RequestID], e.ErrorText))
		case *page.EventFrameNavigated:
			nw.log = append(nw.log, "navigated "+e.Frame.URL)
		case *network.EventWebSocketClosed:
			nw.log = append(nw.log, "websocket closed "+nw.urls[e.RequestID])
		}
	}); err != nil {
		t.Fatal(err)
	}
	return ctx, nw
}

// netWatch records the page's failed requests. Chromium aborts every request in flight with
// ERR_NETWORK_CHANGED when the machine's network interfaces change — here, whenever a pod starts
// or stops on the node (its veth; chromium issue 41465264) — which says nothing of the ingress.
type netWatch struct {
	mu     sync.Mutex
	failed []string
	urls   map[network.RequestID]string
	log    []string // what the page did, shown when an attempt fails
}

const errNetworkChanged = "net::ERR_NETWORK_CHANGED"

func (w *netWatch) changed() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Contains(w.failed, errNetworkChanged)
}

// retry runs attempt until it ends without a request failing with ERR_NETWORK_CHANGED (at most 10
// times); a failure of any other kind, or an attempt's error without that failure, ends the test.
func (w *netWatch) retry(t *testing.T, attempt func() (string, error)) string {
	t.Helper()
	for i := 1; ; i++ {
		w.mu.Lock()
		w.failed, w.log = nil, nil
		w.mu.Unlock()
		res, err := attempt()
		w.mu.Lock()
		failed, log := slices.Clone(w.failed), slices.Clone(w.log)
		w.mu.Unlock()
		var other []string
		for _, f := range failed {
			if f != errNetworkChanged && f != "net::ERR_ABORTED" {
				other = append(other, f)
			}
		}
		switch {
		case len(other) > 0:
			t.Fatalf("requests failed in Chromium: %v (result %q, %v); the page:\n%s", failed, res, err, strings.Join(log, "\n"))
		case slices.Contains(failed, errNetworkChanged) || err != nil && strings.Contains(err.Error(), errNetworkChanged),
			// the page was replaced under the DevTools call (its reload after a network change):
			// nothing failed, the attempt tells nothing
			err != nil && strings.Contains(err.Error(), "Cannot find context with specified id"):
			t.Logf("attempt %d: cut by a network change (a pod's veth) or a reload (%v); the page:\n%s", i, err, strings.Join(log, "\n"))
			if i == 10 {
				t.Fatalf("10 attempts cut by network changes: %v", failed)
			}
			continue
		case err != nil:
			t.Fatalf("%v; the page:\n%s", err, strings.Join(log, "\n"))
		}
		return res
	}
}

// spkiPin is the base64 SHA-256 of the public key the server at addr presents for name.
func spkiPin(t *testing.T, addr, name string) string {
	t.Helper()
	host, port, _ := net.SplitHostPort(addr)
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		addr = net.JoinHostPort("127.0.0.1", port)
	}
	conn, err := tls.Dial("tcp", addr, &tls.Config{ServerName: name, InsecureSkipVerify: true})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	sum := sha256.Sum256(conn.ConnectionState().PeerCertificates[0].RawSubjectPublicKeyInfo)
	return base64.StdEncoding.EncodeToString(sum[:])
}

func do(t *testing.T, c *http.Client, method, u string, body io.Reader) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, u, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/html")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

func mustGet(t testing.TB, c *http.Client, u string) (int, string) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// copyTree copies the regular files of src into dst.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

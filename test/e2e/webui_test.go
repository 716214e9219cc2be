//go:build integration

package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devtool/devtool/internal/platform/api"
	"github.com/devtool/devtool/internal/platform/client"
	"github.com/devtool/devtool/internal/platform/install"
	"github.com/devtool/devtool/internal/platform/store"
	"github.com/devtool/devtool/internal/testcluster"
)

// tickerCompose is an environment whose one service writes a numbered line twice a second.
const tickerCompose = `services:
  ticker:
    image: busybox:local
    command: ["sh", "-c", "i=0; while :; do echo tick $$i; i=$$((i+1)); sleep 0.5; done"]
`

var tickLine = regexp.MustCompile(`tick (\d+)`)

// TestWebUIInChromium drives the platform's web UI in headless Chromium as an anonymous visitor,
// alice, bob and an admin, against the platform installed on the local cluster
// (DEVTOOL_TEST_PLATFORM_DIR; it must be a build with the web UI): every page renders and is
// saved as a screenshot (test/screenshots/, or DEVTOOL_SCREENSHOTS); sign-in with a password and with
// a token; a
// namespace made in the UI is in `devtool namespace list` and one made with the CLI is in the UI;
// alice's environment, its endpoints and logs, which follow the pod's new lines; bob sees none of
// alice's namespaces, environments, logs or secret names, by page or by URL (404); a form posted
// from another site is refused by the cross-origin protection.
func TestWebUIInChromium(t *testing.T) {
	p := findPlatform(t)
	c := testcluster.Connect(t)
	ca, err := os.ReadFile(p.caFile)
	if err != nil {
		t.Fatal(err)
	}
	base, err := url.Parse(p.url)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	admin, err := client.New(client.Options{URL: p.url, Token: p.adminToken, CA: ca})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	var sb [3]byte
	_, _ = rand.Read(sb[:])
	s := hex.EncodeToString(sb[:])
	tokens := map[string]string{}
	aliceName, bobName := "alice-"+s, "bob-"+s
	const alicePassword, bobPassword = "alice's long password", "bob's long password"
	for _, n := range []string{aliceName, bobName} {
		req := api.CreateUserRequest{Name: n, Password: alicePassword}
		if n == bobName {
			req.Password = bobPassword
		}
		r, err := admin.CreateUser(ctx, req)
		if err != nil {
			t.Fatalf("creating %s: %v", n, err)
		}
		tokens[n] = r.Token
		t.Cleanup(func() {
			_ = admin.DeleteUser(context.Background(), n)
			_ = c.Clientset.CoreV1().Namespaces().Delete(context.Background(), n, metav1.DeleteOptions{})
		})
	}
	uiNS, cliNS := aliceName+"-ui", aliceName+"-cli"
	t.Cleanup(func() {
		for _, n := range []string{uiNS, cliNS} {
			_ = c.Clientset.CoreV1().Namespaces().Delete(context.Background(), n, metav1.DeleteOptions{})
		}
	})

	// alice's machine: the CLI with her token (no saved context), and her environment deployed.
	alice := newPlatformUser(t)
	alice.env = []string{api.EnvURL + "=" + p.url, api.EnvToken + "=" + tokens[aliceName], api.EnvCACert + "=" + p.caFile, api.EnvNamespace + "=" + aliceName}
	if err := os.WriteFile(filepath.Join(alice.dir, "compose.yml"), []byte(tickerCompose), 0o644); err != nil {
		t.Fatal(err)
	}
	alice.mustRun("deploy", "--name", "ticker", "--wait", "--timeout", "3m")

	b := newBrowser(t, "platform", spkiOf(t, base.Host, ca))
	page := func(path string) string { return p.url + path }

	// Anonymous: every page leads to the sign-in page, none shows data.
	anon := b.tab()
	for _, path := range []string{"/", "/namespaces", "/namespaces/" + aliceName, "/namespaces/" + aliceName + "/environments/ticker", "/tokens", "/admin"} {
		st, text := b.open(anon, page(path))
		if st != 200 || !strings.Contains(text, "Sign in to devtool") || strings.Contains(text, "ticker") {
			t.Errorf("anonymous %s: status %d\n%s", path, st, text)
		}
		if loc := b.location(anon); loc.Path != "/signin" {
			t.Errorf("anonymous %s ended at %s, want /signin", path, loc)
		}
	}
	b.shot(anon, "anonymous-signin")
	if st, text := b.submit(anon, map[string]string{"#token": "dvt_0123456789abcdef_" + strings.Repeat("x", 43)}, "#signin-token"); st != http.StatusUnauthorized || !strings.Contains(text, "not valid") {
		t.Errorf("a wrong token: %d\n%s", st, text)
	}
	b.shot(anon, "anonymous-signin-refused")
	if st, text := b.open(anon, page("/no/such/page")); st != http.StatusNotFound || !strings.Contains(text, "no page") {
		t.Errorf("an unknown page: %d %s", st, text)
	}
	b.shot(anon, "anonymous-not-found")

	// alice signs in with her password (the store's check: one answer for every refusal), lands on
	// her namespaces, and signs out.
	pt := b.tab()
	b.open(pt, page("/signin"))
	if st, text := b.submit(pt, map[string]string{"#name": aliceName, "#password": "not her password"}, "#signin-password"); st != http.StatusUnauthorized ||
		!strings.Contains(text, "the name or password is wrong") {
		t.Errorf("a wrong password: %d\n%s", st, text)
	}
	b.shot(pt, "anonymous-signin-password-refused")
	if st, text := b.submit(pt, map[string]string{"#name": aliceName, "#password": alicePassword}, "#signin-password"); st != 200 ||
		b.location(pt).Path != "/namespaces" || !strings.Contains(text, aliceName) {
		t.Errorf("alice's password sign-in: %d %s\n%s", st, b.location(pt), text)
	}
	if st, text := b.submit(pt, nil, "#signout"); st != 200 || !strings.Contains(text, "You are signed out") {
		t.Errorf("sign-out: %d\n%s", st, text)
	}

	// alice signs in with her token, through the form, and lands where she was going.
	at := b.tab()
	b.open(at, page("/namespaces/"+aliceName))
	st, text := b.submit(at, map[string]string{"#token": tokens[aliceName]}, "#signin-token")
	if st != 200 || !strings.Contains(text, "Namespace "+aliceName) {
		t.Fatalf("alice's sign-in: %d\n%s", st, text)
	}
	if loc := b.location(at); loc.Path != "/namespaces/"+aliceName {
		t.Errorf("after sign-in alice is at %s, want her namespace (the return address)", loc)
	}
	for _, want := range []string{"ticker", "deployed", "limits.cpu", "Members"} {
		if !strings.Contains(text, want) {
			t.Errorf("alice's namespace page: no %q\n%s", want, text)
		}
	}
	b.shot(at, "alice-namespace")
	// Readable without the stylesheet: the same page with it removed.
	if _, err := chromedp.Run(at, chromedp.Evaluate[bool](`document.querySelectorAll('link[rel=stylesheet]').forEach(l => l.remove()); true`)); err != nil {
		t.Fatal(err)
	}
	b.save(at, "alice-namespace-without-css")
	_, text = b.open(at, page("/namespaces"))
	b.shot(at, "alice-namespaces")

	// A namespace made in the UI is in the CLI's list; one made with the CLI is in the UI.
	// uiNS is new to this run, so "exists already and is yours" can only answer our own
	// form sent twice: Chromium sends a POST again by itself when the kept-alive connection
	// it went on closes before an answer (and submit does after a network change). That the
	// namespace is there is what the CLI's list checks next.
	st, text = b.submit(at, map[string]string{"#ns-name": uiNS}, "#create-namespace")
	if st != 200 || !strings.Contains(text, "Namespace "+uiNS) ||
		!(strings.Contains(text, "created") || strings.Contains(text, "exists already and is yours")) {
		t.Errorf("creating %s in the UI: %d\n%s", uiNS, st, text)
	}
	if out, _ := alice.mustRun("namespace", "list"); !strings.Contains(out, uiNS) {
		t.Errorf("devtool namespace list does not show %s made in the UI:\n%s", uiNS, out)
	}
	alice.mustRun("namespace", "create", cliNS)
	eventuallyText(t, b, at, page("/namespaces"), cliNS)
	b.shot(at, "alice-namespaces-after-create")

	// The environment page: status, pods, endpoints; the logs page follows new lines.
	envPath := "/namespaces/" + aliceName + "/environments/ticker"
	st, text = b.open(at, page(envPath))
	if st != 200 || !strings.Contains(text, "Environment ticker") || !strings.Contains(text, "deployed") || !strings.Contains(text, "Running") {
		t.Errorf("environment page: %d\n%s", st, text)
	}
	b.shot(at, "alice-environment")
	if st, _ = b.open(at, page(envPath+"/logs?tail=5")); st != 200 {
		t.Fatalf("logs page: %d", st)
	}
	first := waitTick(t, b, at, -1)
	last := waitTick(t, b, at, first+3)
	t.Logf("the logs page followed the pod from tick %d to tick %d", first, last)
	// The page says it follows (after a reconnect too: Chromium drops streams when a pod's
	// network interface comes or goes, and the page's script opens a new one).
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(300 * time.Millisecond) {
		status := b.text(at, "#log-status")
		if strings.Contains(status, "Following") {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("log status: %q", status)
			break
		}
	}
	b.shot(at, "alice-logs")
	if st, _ := b.open(at, page("/namespaces/"+aliceName+"/logs")); st != 200 {
		t.Errorf("namespace logs: %d", st)
	}

	// Stored secrets: set, listed by name, value never shown.
	secret := "ALICE_SECRET_" + strings.ToUpper(s)
	b.open(at, page("/namespaces/"+aliceName+"/secrets"))
	st, text = b.submit(at, map[string]string{"#secret-name": secret, "#secret-value": "value-" + s}, "#secret-submit")
	if st != 200 || !strings.Contains(text, secret) || strings.Contains(text, "value-"+s) {
		t.Errorf("namespace secret: %d\n%s", st, text)
	}
	b.shot(at, "alice-namespace-secrets")
	b.open(at, page("/secrets"))
	b.submit(at, map[string]string{"#secret-name": "MY_" + strings.ToUpper(s), "#secret-value": "mine"}, "#secret-submit")
	b.shot(at, "alice-secrets")

	// Tokens: created, shown once; listed without the secret afterwards.
	b.open(at, page("/tokens"))
	b.shot(at, "alice-tokens")
	st, text = b.submit(at, map[string]string{"#token-name": "from-the-ui"}, "#token-submit")
	if st != http.StatusCreated || !strings.Contains(text, "only time") {
		t.Errorf("token creation: %d\n%s", st, text)
	}
	shown, err := chromedp.Run(at, chromedp.Value(chromedp.CSS("#new-token")))
	if err != nil || !strings.HasPrefix(shown, api.TokenPrefix) {
		t.Errorf("the new token is not shown: %q %v", shown, err)
	}
	b.shot(at, "alice-token-created")
	if _, text := b.open(at, page("/tokens")); strings.Contains(text, shown) || !strings.Contains(text, "from-the-ui") {
		t.Errorf("the tokens page shows the secret again or misses the token:\n%s", text)
	}
	b.open(at, page("/namespaces/"+cliNS+"/delete"))
	b.shot(at, "alice-confirm-delete")
	if st, text := b.submit(at, map[string]string{"#confirm": cliNS}, "#delete-submit"); st != 200 || !strings.Contains(text, "being deleted") {
		t.Errorf("deleting %s: %d\n%s", cliNS, st, text)
	}
	if st, text := b.open(at, page("/admin")); st != http.StatusNotFound || strings.Contains(text, bobName) {
		t.Errorf("alice on the admin page: %d", st)
	}

	// A form on another site posting to the platform with alice's session: refused by the
	// cross-origin protection (not merely unauthenticated: that would lead to the sign-in page).
	b.open(at, evilSite(t, p.url+"/namespaces", "csrf-"+s))
	if st, text := b.submit(at, nil, "#prize"); st != http.StatusForbidden || !strings.Contains(text, "cross-origin request protection") {
		t.Errorf("cross-site form post: %d\n%s", st, text)
	}
	b.shot(at, "alice-csrf-refused")
	if _, err := c.Clientset.CoreV1().Namespaces().Get(ctx, "csrf-"+s, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the cross-site post made a namespace: %v", err)
	}

	// bob: none of alice's namespaces, environments, logs or secret names, by page or by URL.
	// bob signs in with the keyboard alone: the name field has the focus, Tab goes to the password,
	// Enter submits.
	bt := b.tab()
	b.open(bt, page("/signin"))
	if id, err := chromedp.Run(bt, chromedp.Evaluate[string](`document.activeElement.id`)); err != nil || id != "name" {
		t.Errorf("the sign-in page's focus is on %q (%v), want the name field", id, err)
	}
	kctx, kcancel := context.WithTimeout(bt, time.Minute)
	resp, err := chromedp.RunResponse(kctx, chromedp.KeyEvent(bobName+kb.Tab+bobPassword+kb.Enter))
	kcancel()
	if err != nil || resp.Status != 200 {
		t.Fatalf("bob's keyboard sign-in: %v", err)
	}
	if text := b.text(bt, "main"); strings.Contains(text, aliceName) || !strings.Contains(text, bobName) {
		t.Errorf("bob's namespaces page:\n%s", text)
	}
	b.shot(bt, "bob-namespaces")
	for _, path := range []string{"/namespaces/" + aliceName, envPath, envPath + "/logs", envPath + "/logs.txt", "/namespaces/" + aliceName + "/logs",
		"/namespaces/" + aliceName + "/secrets", "/namespaces/" + uiNS, "/namespaces/" + aliceName + "/delete"} {
		st, text := b.open(bt, page(path))
		if st != http.StatusNotFound || strings.Contains(text, "tick") || strings.Contains(text, secret) {
			t.Errorf("bob at %s: status %d\n%s", path, st, text)
		}
	}
	b.shot(bt, "bob-alice-namespace-not-found")
	for _, path := range []string{"/secrets", "/tokens", "/namespaces"} {
		if _, text := b.open(bt, page(path)); strings.Contains(text, aliceName) || strings.Contains(text, secret) {
			t.Errorf("bob's %s names alice's namespace or secret", path)
		}
	}

	// The admin: the administration page, and making a user there.
	ad := b.tab()
	b.open(ad, page("/signin"))
	b.submit(ad, map[string]string{"#token": p.adminToken}, "#signin-token")
	st, text = b.open(ad, page("/admin"))
	if st != 200 || !strings.Contains(text, aliceName) || !strings.Contains(text, "Quota and limits") || !strings.Contains(text, "Analytics") {
		t.Errorf("admin page: %d\n%s", st, text)
	}
	b.shot(ad, "admin")
	// Quota defaults: saved in the UI, given to the next user's namespace; put back afterwards
	// (other tests share this platform).
	settings := c.Clientset.CoreV1().ConfigMaps(platformNamespace(t, c, p))
	orig, origErr := settings.Get(ctx, store.SettingsName, metav1.GetOptions{})
	t.Cleanup(func() {
		ctx := context.Background()
		if apierrors.IsNotFound(origErr) {
			_ = settings.Delete(ctx, store.SettingsName, metav1.DeleteOptions{})
		} else if origErr == nil {
			if cur, err := settings.Get(ctx, store.SettingsName, metav1.GetOptions{}); err == nil {
				cur.Data = orig.Data
				_, _ = settings.Update(ctx, cur, metav1.UpdateOptions{})
			}
		}
	})
	if st, text := b.submit(ad, map[string]string{"#limit-quota\\.pods": "30"}, "#limits-submit"); st != 200 || !strings.Contains(text, "Saved") {
		t.Errorf("saving the quota defaults: %d\n%s", st, text)
	}
	b.shot(ad, "admin-limits-saved")
	carol := "carol-" + s
	t.Cleanup(func() {
		_ = admin.DeleteUser(context.Background(), carol)
		_ = c.Clientset.CoreV1().Namespaces().Delete(context.Background(), carol, metav1.DeleteOptions{})
	})
	st, text = b.submit(ad, map[string]string{"#user-name": carol}, "#user-submit")
	switch {
	case st == http.StatusConflict && b.retried && strings.Contains(text, "user \""+carol+"\" exists"):
		t.Logf("the first submission was cut by the browser and still reached the platform: the retry found %s made", carol)
	case st != http.StatusCreated || !strings.Contains(text, "User "+carol+" created"):
		t.Errorf("creating a user: %d\n%s", st, text)
	}
	b.shot(ad, "admin-user-created")
	if q, err := c.Clientset.CoreV1().ResourceQuotas(carol).Get(ctx, store.QuotaName, metav1.GetOptions{}); err != nil || q.Spec.Hard.Pods().String() != "30" {
		t.Errorf("the new user's namespace quota: %v, want 30 pods (the saved default)", err)
	}
	paths := []string{"/namespaces", "/secrets", "/tokens"}
	if nss, err := admin.Namespaces(ctx); err == nil && len(nss) > 0 {
		paths = append(paths, "/namespaces/"+nss[0].Name)
	}
	for _, path := range paths {
		if st, _ := b.open(ad, page(path)); st != 200 {
			t.Errorf("admin %s: %d", path, st)
		}
		b.shot(ad, "admin"+strings.ReplaceAll(path, "/", "-"))
	}

	// Sign-out: the session ends on the platform, so going back shows the sign-in page.
	b.open(at, page("/namespaces"))
	if _, text := b.submit(at, nil, "#signout"); !strings.Contains(text, "signed out") {
		t.Errorf("after sign-out: %s", text)
	}
	if _, text := b.open(at, page("/namespaces")); !strings.Contains(text, "Sign in to devtool") {
		t.Errorf("after sign-out the namespaces page shows: %s", text)
	}
}

// waitTick waits until the logs page's list holds a tick line above after and returns the highest.
func waitTick(t *testing.T, b *browser, ctx context.Context, after int) int {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		items, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('#log li')).map(li => li.textContent)`))
		if err != nil {
			t.Fatal(err)
		}
		best := -1
		for _, it := range items {
			if m := tickLine.FindStringSubmatch(it); m != nil {
				if n, _ := strconv.Atoi(m[1]); n > best {
					best = n
				}
			}
		}
		if best > after {
			return best
		}
		if time.Now().After(deadline) {
			t.Fatalf("the logs page shows no tick above %d (items: %d)", after, len(items))
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// eventuallyText reloads url until its main text contains want (the platform's caches follow the
// API server within moments).
func eventuallyText(t *testing.T, b *browser, ctx context.Context, url, want string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, text := b.open(ctx, url); strings.Contains(text, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never showed %q", url, want)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// evilSite serves, on another origin (127.0.0.1), a page whose button posts a form to target.
func evilSite(t *testing.T, target, name string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	page := fmt.Sprintf(`<!doctype html><html><body><main><h1>You won</h1><form method="post" action="%s">
<input type="hidden" name="name" value="%s"><button id="prize">Collect the prize</button></form></main></body></html>`, target, name)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, page)
	}), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String() + "/"
}

// TestWebSessionAcrossReplicas: a session started through one platform pod is accepted by the other
// (sessions live in the cluster, not in a replica), and a sign-out through one is refused by the
// other at once (each request reads its session from the API server).
func TestWebSessionAcrossReplicas(t *testing.T) {
	p := findPlatform(t)
	c := testcluster.Connect(t)
	ca, err := os.ReadFile(p.caFile)
	if err != nil {
		t.Fatal(err)
	}
	base, _ := url.Parse(p.url)
	ctx := context.Background()
	admin, err := client.New(client.Options{URL: p.url, Token: p.adminToken, CA: ca})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	var sb [3]byte
	_, _ = rand.Read(sb[:])
	name := "dave-" + hex.EncodeToString(sb[:])
	u, err := admin.CreateUser(ctx, api.CreateUserRequest{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = admin.DeleteUser(context.Background(), name)
		_ = c.Clientset.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	pods := platformPodClients(t, c, p, ca)
	if len(pods) < 2 {
		t.Fatalf("%d ready platform pods, want 2", len(pods))
	}
	do := func(hc *http.Client, method, path, cookie string, form url.Values) *http.Response {
		t.Helper()
		var body *strings.Reader
		if form != nil {
			body = strings.NewReader(form.Encode())
		} else {
			body = strings.NewReader("")
		}
		req, _ := http.NewRequestWithContext(ctx, method, "https://"+base.Hostname()+path, body)
		if form != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		if cookie != "" {
			req.Header.Set("Cookie", cookie)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		resp.Body.Close()
		return resp
	}
	resp := do(pods[0], "POST", "/signin", "", url.Values{"token": {u.Token}})
	var cookie string
	for _, ck := range resp.Cookies() {
		if ck.Name == "__Host-devtool-session" && ck.Value != "" {
			cookie = ck.Name + "=" + ck.Value
			if !ck.Secure || !ck.HttpOnly || ck.SameSite != http.SameSiteLaxMode || ck.Path != "/" || ck.Domain != "" {
				t.Errorf("session cookie attributes: %+v", ck)
			}
		}
	}
	if resp.StatusCode != http.StatusSeeOther || cookie == "" {
		t.Fatalf("sign-in through pod 0: %d, cookie %q", resp.StatusCode, cookie)
	}
	if r := do(pods[1], "GET", "/namespaces", cookie, nil); r.StatusCode != 200 {
		t.Errorf("the session through pod 1: %d, want 200", r.StatusCode)
	}
	if r := do(pods[1], "POST", "/signout", cookie, url.Values{}); r.StatusCode != http.StatusSeeOther {
		t.Errorf("sign-out through pod 1: %d", r.StatusCode)
	}
	for i, hc := range pods[:2] {
		if r := do(hc, "GET", "/namespaces", cookie, nil); r.StatusCode != http.StatusSeeOther || !strings.HasPrefix(r.Header.Get("Location"), "/signin") {
			t.Errorf("the signed-out session through pod %d: %d %s, want a redirect to the sign-in page", i, r.StatusCode, r.Header.Get("Location"))
		}
	}
}

// platformPodClients returns one HTTP client per ready pod of the platform p, each dialling that
// pod's IP (on the pod bridge) directly, not following redirects.
func platformPodClients(t *testing.T, c *testcluster.Cluster, p platformFiles, ca []byte) []*http.Client {
	t.Helper()
	pods := c.PodClients(t, platformNamespace(t, c, p), "app.kubernetes.io/name="+install.Name, install.Port, func() (*http.Client, error) {
		return install.Client(ca)
	})
	for _, hc := range pods {
		hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	}
	return pods
}

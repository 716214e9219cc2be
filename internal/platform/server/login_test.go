package server

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/time/rate"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes"
	kfake "k8s.io/client-go/kubernetes/fake"

	"github.com/devtool/devtool/internal/errs"
	"github.com/devtool/devtool/internal/platform/api"
	"github.com/devtool/devtool/internal/platform/client"
	"github.com/devtool/devtool/internal/platform/store"
)

// newTLSTestServer runs the API over TLS on fake clients (the session cookie is Secure) and returns
// it with its store, an admin token and the PEM of its certificate.
func newTLSTestServer(t *testing.T) (*httptest.Server, *store.Store, string, []byte) {
	t.Helper()
	kc := kfake.NewClientset()
	dc := dynfake.NewSimpleDynamicClientWithCustomListKinds(kruntime.NewScheme(), map[schema.GroupVersionResource]string{
		store.UserResource: "UserList", store.TokenResource: "AccessTokenList",
	})
	st := &store.Store{Namespace: store.DefaultNamespace, Limits: store.DefaultLimits, Kube: kc, Dyn: dc,
		Impersonate: func(string) (kubernetes.Interface, error) { return kc, nil }}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := st.Start(ctx); err != nil {
		t.Fatal(err)
	}
	_, tok, err := st.CreateUser(ctx, "admin", true, "")
	if err != nil {
		t.Fatal(err)
	}
	srv := New(Options{Store: st, Info: api.Info{Version: "test", APIServer: "https://k8s"}, AddrRate: rate.Inf, AccountRate: rate.Inf,
		LoginAddrRate: rate.Inf, LoginAccountRate: rate.Inf})
	ts := httptest.NewTLSServer(srv.Handler())
	t.Cleanup(ts.Close)
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ts.Certificate().Raw})
	return ts, st, tok, ca
}

func postJSON(t *testing.T, ts *httptest.Server, path, token string, body any) answer {
	t.Helper()
	return call(t, ts, "POST", path, token, body)
}

func TestPasswordLoginAndLockout(t *testing.T) {
	ts, st, admin, _ := newTLSTestServer(t)
	p := api.Prefix
	if a := postJSON(t, ts, p+"/users", admin, api.CreateUserRequest{Name: "alice", Password: "short"}); a.status != 400 || a.err.Field != "password" {
		t.Fatalf("short password: %d %s", a.status, a.body)
	}
	until(t, 201, func() answer {
		return postJSON(t, ts, p+"/users", admin, api.CreateUserRequest{Name: "alice", Password: "correct horse"})
	})
	postJSON(t, ts, p+"/users", admin, api.CreateUserRequest{Name: "bob"}) // no password

	ok := postJSON(t, ts, p+"/login", "", api.LoginRequest{User: "alice", Password: "correct horse"})
	if ok.status != 200 {
		t.Fatalf("right password: %d %s", ok.status, ok.body)
	}
	var tok api.Token
	_ = json.Unmarshal(ok.body, &tok)
	if tok.Owner != "alice" || !strings.HasPrefix(tok.Token, api.TokenPrefix) {
		t.Fatalf("login answer: %+v", tok)
	}
	until(t, 200, func() answer { return call(t, ts, "GET", p+"/me", tok.Token, nil) })

	// Every refusal has the same body.
	refusals := map[string]api.LoginRequest{
		"wrong password": {User: "alice", Password: "wrong horse"},
		"unknown user":   {User: "nobody", Password: "correct horse"},
		"no password":    {User: "bob", Password: "correct horse"},
		"bad name":       {User: "Not A Name", Password: "x"},
	}
	var first []byte
	for what, req := range refusals {
		a := postJSON(t, ts, p+"/login", "", req)
		if a.status != 401 {
			t.Fatalf("%s: %d %s", what, a.status, a.body)
		}
		if first == nil {
			first = a.body
		} else if string(a.body) != string(first) {
			t.Errorf("%s: body %s differs from %s", what, a.body, first)
		}
	}
	// The wrong password above was failure 1; four more lock alice (on the User resource).
	for range 4 {
		postJSON(t, ts, p+"/login", "", api.LoginRequest{User: "alice", Password: "wrong horse"})
	}
	u, err := st.Dyn.Resource(store.UserResource).Namespace(st.Namespace).Get(context.Background(), "alice", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n, _, _ := unstructuredInt(u.Object, "status", "failedLogins"); n != 5 {
		t.Fatalf("failedLogins on the User = %d, want 5: %v", n, u.Object["status"])
	}
	if a := postJSON(t, ts, p+"/login", "", api.LoginRequest{User: "alice", Password: "correct horse"}); a.status != 401 || string(a.body) != string(first) {
		t.Fatalf("right password while locked: %d %s", a.status, a.body)
	}
	// The lock (not each failure) is an audit record.
	evs, _ := st.Kube.CoreV1().Events(st.Namespace).List(context.Background(), metav1.ListOptions{})
	locks := 0
	for _, e := range evs.Items {
		if e.Reason == "PlatformLock" && e.InvolvedObject.Name == "alice" && strings.Contains(e.Message, "locked until") {
			locks++
		}
	}
	if locks != 1 {
		t.Errorf("%d lock events, want 1", locks)
	}
	// An admin sees the lock and unlocks; the right password works again and resets the count.
	var users api.UserList
	_ = json.Unmarshal(call(t, ts, "GET", p+"/users", admin, nil).body, &users)
	locked := false
	for _, u := range users.Items {
		locked = locked || u.Name == "alice" && u.LockedUntil != nil && u.FailedLogins == 5 && u.Password
	}
	if !locked {
		t.Fatalf("users: %+v", users.Items)
	}
	if a := postJSON(t, ts, p+"/users/alice/unlock", tok.Token, nil); a.status != 403 {
		t.Fatalf("alice unlocks herself: %d", a.status)
	}
	if a := postJSON(t, ts, p+"/users/alice/unlock", admin, nil); a.status != 204 {
		t.Fatalf("unlock: %d %s", a.status, a.body)
	}
	if a := postJSON(t, ts, p+"/login", "", api.LoginRequest{User: "alice", Password: "correct horse"}); a.status != 200 {
		t.Fatalf("after unlock: %d %s", a.status, a.body)
	}

	// Changing the password needs the current one; the old one stops working.
	if a := call(t, ts, "PUT", p+"/me/password", tok.Token, api.PasswordChange{Current: "wrong horse", New: "battery staple"}); a.status != 403 || a.err.Field != "current" {
		t.Fatalf("change with a wrong current: %d %s", a.status, a.body)
	}
	if a := call(t, ts, "PUT", p+"/me/password", tok.Token, api.PasswordChange{Current: "correct horse", New: "x"}); a.status != 400 || a.err.Field != "new" {
		t.Fatalf("change to a short one: %d %s", a.status, a.body)
	}
	if a := call(t, ts, "PUT", p+"/me/password", tok.Token, api.PasswordChange{Current: "correct horse", New: "battery staple"}); a.status != 204 {
		t.Fatalf("change: %d %s", a.status, a.body)
	}
	if a := postJSON(t, ts, p+"/login", "", api.LoginRequest{User: "alice", Password: "correct horse"}); a.status != 401 {
		t.Fatalf("old password: %d", a.status)
	}
	// An admin resets bob's (none before) and turns it off again.
	if a := call(t, ts, "PUT", p+"/users/bob/password", admin, api.PasswordReset{Password: "bobs password"}); a.status != 204 {
		t.Fatalf("reset: %d %s", a.status, a.body)
	}
	if a := postJSON(t, ts, p+"/login", "", api.LoginRequest{User: "bob", Password: "bobs password"}); a.status != 200 {
		t.Fatalf("bob after reset: %d %s", a.status, a.body)
	}
	if a := call(t, ts, "PUT", p+"/users/nobody/password", admin, api.PasswordReset{Password: "whatever long"}); a.status != 404 {
		t.Fatalf("reset of nobody: %d", a.status)
	}
}

func unstructuredInt(obj map[string]any, path ...string) (int64, bool, error) {
	cur := any(obj)
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return 0, false, nil
		}
		cur = m[p]
	}
	switch n := cur.(type) {
	case int64:
		return n, true, nil
	case float64:
		return int64(n), true, nil
	}
	return 0, false, nil
}

// browser is a cookie-keeping HTTP client that stops at redirects to other hosts (the CLI's
// loopback address), as a person's browser would hand them over.
type browser struct {
	t  *testing.T
	hc *http.Client
	ts *httptest.Server
}

func newBrowser(t *testing.T, ts *httptest.Server) *browser {
	jar, _ := cookiejar.New(nil)
	shared := *ts.Client() // a browser of its own: the server's client is shared
	hc := &shared
	hc.Jar = jar
	base, _ := url.Parse(ts.URL)
	hc.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if req.URL.Host != base.Host {
			return http.ErrUseLastResponse
		}
		return nil
	}
	return &browser{t: t, hc: hc, ts: ts}
}

func (b *browser) do(method, u string, form url.Values) (*http.Response, string) {
	b.t.Helper()
	if !strings.HasPrefix(u, "http") {
		u = b.ts.URL + u
	}
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, _ := http.NewRequest(method, u, body)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", b.ts.URL)
	}
	resp, err := b.hc.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp, string(data)
}

var hiddenField = regexp.MustCompile(`<input type="hidden" name="([^"]+)" value="([^"]*)">`)

func formOf(page string) url.Values {
	v := url.Values{}
	for _, m := range hiddenField.FindAllStringSubmatch(page, -1) {
		v.Set(m[1], htmlUnescape(m[2]))
	}
	return v
}

func htmlUnescape(s string) string {
	r := strings.NewReplacer("&amp;", "&", "&lt;", "<", "&gt;", ">", "&#34;", `"`, "&#39;", "'", "&#43;", "+")
	return r.Replace(s)
}

// signIn fills the sign-in form the authorize or device page sent the browser to.
func (b *browser) signIn(page, user, password string) (*http.Response, string) {
	b.t.Helper()
	f := formOf(page)
	f.Set("user", user)
	f.Set("password", password)
	return b.do("POST", api.SignInPath, f)
}

func TestBrowserLoginThroughTheCLIClient(t *testing.T) {
	ts, _, admin, ca := newTLSTestServer(t)
	until(t, 201, func() answer {
		return postJSON(t, ts, api.Prefix+"/users", admin, api.CreateUserRequest{Name: "alice", Password: "correct horse"})
	})
	pc, err := client.New(client.Options{URL: ts.URL, CA: ca})
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	b := newBrowser(t, ts)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tok, err := pc.BrowserLogin(ctx, func(authURL string) {
		go func() {
			// Not signed in: the authorize page sends the browser to the sign-in page.
			resp, page := b.do("GET", authURL, nil)
			if resp.StatusCode != 200 || !strings.Contains(page, `id="signin"`) {
				t.Errorf("authorize without a session: %d %s", resp.StatusCode, page)
				return
			}
			if resp, page := b.signIn(page, "alice", "wrong horse"); resp.StatusCode != 401 || !strings.Contains(page, badLogin) {
				t.Errorf("wrong password in the browser: %d %s", resp.StatusCode, page)
			}
			resp, page = b.signIn(page, "alice", "correct horse")
			if resp.StatusCode != 200 || !strings.Contains(page, `id="allow"`) || !strings.Contains(page, "alice") {
				t.Errorf("consent page: %d %s", resp.StatusCode, page)
				return
			}
			// A cross-site POST of the consent form is refused.
			f := formOf(page)
			f.Set("action", "allow")
			req, _ := http.NewRequest("POST", ts.URL+api.AuthorizePath, strings.NewReader(f.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("Origin", "https://evil.example")
			req.Header.Set("Sec-Fetch-Site", "cross-site")
			if r, err := b.hc.Do(req); err != nil || r.StatusCode != 403 {
				t.Errorf("cross-site consent: %v %v", r, err)
			} else {
				r.Body.Close()
			}
			resp, _ = b.do("POST", api.AuthorizePath, f)
			if resp.StatusCode != http.StatusSeeOther {
				t.Errorf("allow: %d", resp.StatusCode)
				return
			}
			// The browser follows the redirect to the CLI's loopback listener.
			if r, _ := b.do("GET", resp.Header.Get("Location"), nil); r.StatusCode != 200 {
				t.Errorf("callback: %d", r.StatusCode)
			}
		}()
	})
	if err != nil {
		t.Fatal(err)
	}
	if a := call(t, ts, "GET", api.Prefix+"/me", tok, nil); a.status != 200 || !strings.Contains(string(a.body), `"alice"`) {
		t.Fatalf("token of the browser login: %d %s", a.status, a.body)
	}
}

func TestAuthorizationCodeChecks(t *testing.T) {
	ts, st, _, _ := newTLSTestServer(t)
	ctx := context.Background()
	// redirect_uri must be a loopback IP literal; client_id the CLI's; PKCE S256 required.
	b := newBrowser(t, ts)
	good := url.Values{"response_type": {"code"}, "client_id": {api.CLIClientID}, "redirect_uri": {"http://127.0.0.1:5555/callback"},
		"state": {"s1"}, "code_challenge": {strings.Repeat("a", 43)}, "code_challenge_method": {"S256"}}
	for what, change := range map[string]func(url.Values){
		"localhost redirect": func(v url.Values) { v.Set("redirect_uri", "http://localhost:5555/callback") },
		"remote redirect":    func(v url.Values) { v.Set("redirect_uri", "http://evil.example:5555/callback") },
		"https redirect":     func(v url.Values) { v.Set("redirect_uri", "https://127.0.0.1:5555/callback") },
		"other client":       func(v url.Values) { v.Set("client_id", "other") },
	} {
		v := url.Values{}
		for k, vs := range good {
			v[k] = vs
		}
		change(v)
		if resp, _ := b.do("GET", api.AuthorizePath+"?"+v.Encode(), nil); resp.StatusCode != 400 {
			t.Errorf("%s: %d, want a 400 page (never a redirect)", what, resp.StatusCode)
		}
	}
	v := url.Values{}
	for k, vs := range good {
		v[k] = vs
	}
	v.Set("code_challenge_method", "plain")
	resp, _ := b.do("GET", api.AuthorizePath+"?"+v.Encode(), nil)
	if loc := resp.Header.Get("Location"); resp.StatusCode != 303 || !strings.Contains(loc, "error=invalid_request") || !strings.Contains(loc, "state=s1") {
		t.Errorf("plain PKCE: %d %s", resp.StatusCode, loc)
	}

	// A code works once, with its verifier and redirect address only.
	verifier := strings.Repeat("v", 50)
	code, err := st.CreateAuthCode(ctx, store.AuthCode{User: "admin", Challenge: s256(verifier), RedirectURI: "http://127.0.0.1:5555/cb", Expires: time.Now().Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	tokenReq := func(f url.Values) (int, map[string]any) {
		f.Set("client_id", api.CLIClientID)
		f.Set("grant_type", "authorization_code")
		resp, body := b.do("POST", api.TokenPath, f)
		var m map[string]any
		_ = json.Unmarshal([]byte(body), &m)
		return resp.StatusCode, m
	}
	if s, m := tokenReq(url.Values{"code": {code}, "code_verifier": {strings.Repeat("w", 50)}, "redirect_uri": {"http://127.0.0.1:5555/cb"}}); s != 400 || m["error"] != "invalid_grant" {
		t.Errorf("wrong verifier: %d %v", s, m)
	}
	// the failed attempt used the code up (it is deleted on redemption): a fresh one for the rest
	code, _ = st.CreateAuthCode(ctx, store.AuthCode{User: "admin", Challenge: s256(verifier), RedirectURI: "http://127.0.0.1:5555/cb", Expires: time.Now().Add(time.Minute)})
	if s, m := tokenReq(url.Values{"code": {code}, "code_verifier": {verifier}, "redirect_uri": {"http://127.0.0.1:5555/cb"}}); s != 200 || m["token_type"] != "Bearer" {
		t.Errorf("right verifier: %d %v", s, m)
	}
	if s, m := tokenReq(url.Values{"code": {code}, "code_verifier": {verifier}, "redirect_uri": {"http://127.0.0.1:5555/cb"}}); s != 400 || m["error"] != "invalid_grant" {
		t.Errorf("code used twice: %d %v", s, m)
	}
	expired, _ := st.CreateAuthCode(ctx, store.AuthCode{User: "admin", Challenge: s256(verifier), RedirectURI: "http://127.0.0.1:5555/cb", Expires: time.Now().Add(-time.Second)})
	if s, m := tokenReq(url.Values{"code": {expired}, "code_verifier": {verifier}, "redirect_uri": {"http://127.0.0.1:5555/cb"}}); s != 400 || m["error"] != "invalid_grant" {
		t.Errorf("expired code: %d %v", s, m)
	}
}

func TestDeviceLoginThroughTheCLIClient(t *testing.T) {
	ts, _, admin, ca := newTLSTestServer(t)
	until(t, 201, func() answer {
		return postJSON(t, ts, api.Prefix+"/users", admin, api.CreateUserRequest{Name: "alice", Password: "correct horse"})
	})
	pc, err := client.New(client.Options{URL: ts.URL, CA: ca})
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, approve := range []bool{false, true} {
		b := newBrowser(t, ts)
		tok, err := pc.DeviceLogin(ctx, "test host", func(code, uri, complete string) {
			if !strings.HasSuffix(uri, api.DevicePagePath) || !strings.Contains(complete, "user_code=") || len(code) != 9 {
				t.Errorf("device answer: %q %q %q", code, uri, complete)
			}
			go func() {
				_, page := b.do("GET", complete, nil)
				_, page = b.signIn(page, "alice", "correct horse")
				if !strings.Contains(page, `value="`+code+`"`) || !strings.Contains(page, "test host") {
					t.Errorf("device page: %s", page)
				}
				// a wrong code first
				if r, _ := b.do("POST", api.DevicePagePath, url.Values{"user_code": {"BBBB-BBBB"}, "action": {"approve"}}); r.StatusCode != 404 {
					t.Errorf("wrong code: %d", r.StatusCode)
				}
				action := "deny"
				if approve {
					action = "approve"
				}
				if r, _ := b.do("POST", api.DevicePagePath, url.Values{"user_code": {strings.ToLower(code)}, "action": {action}}); r.StatusCode != 200 {
					t.Errorf("%s: %d", action, r.StatusCode)
				}
			}()
		})
		if !approve {
			var ae *errs.AuthError
			if !errorsAs(err, &ae) || !strings.Contains(err.Error(), "access_denied") {
				t.Fatalf("denied device login: %v", err)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if a := call(t, ts, "GET", api.Prefix+"/me", tok, nil); a.status != 200 || !strings.Contains(string(a.body), `"alice"`) {
			t.Fatalf("token of the device login: %d %s", a.status, a.body)
		}
	}
}

func TestPasswordLoginThroughTheCLIClient(t *testing.T) {
	ts, _, admin, ca := newTLSTestServer(t)
	until(t, 201, func() answer {
		return postJSON(t, ts, api.Prefix+"/users", admin, api.CreateUserRequest{Name: "alice", Password: "correct horse"})
	})
	pc, err := client.New(client.Options{URL: ts.URL, CA: ca})
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	_, err = pc.PasswordLogin(context.Background(), "alice", "wrong horse", "t")
	if errs.ExitCode(err) != 4 {
		t.Fatalf("wrong password: exit %d, %v", errs.ExitCode(err), err)
	}
	tok, err := pc.PasswordLogin(context.Background(), "alice", "correct horse", "t")
	if err != nil || tok.Owner != "alice" {
		t.Fatalf("right password: %+v %v", tok, err)
	}
}

func s256(verifier string) string {
	sum := sha256.Sum256([]byte(verifier))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

func errorsAs(err error, target any) bool { return errors.As(err, target) }

// TestBrowserLoginStopsItsListener: Ctrl-C (ctx) while waiting for the browser, a refused login and a
// forged answer (wrong state) all leave no listener and no goroutine behind.
func TestBrowserLoginStopsItsListener(t *testing.T) {
	ts, _, _, ca := newTLSTestServer(t)
	pc, err := client.New(client.Options{URL: ts.URL, CA: ca})
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	before := runtime.NumGoroutine()
	var redirect string
	open := func(cancel func(), answer func(u *url.URL)) func(string) {
		return func(authURL string) {
			u, _ := url.Parse(authURL)
			redirect = u.Query().Get("redirect_uri")
			go func() {
				if answer != nil {
					answer(u)
				}
				if cancel != nil {
					cancel()
				}
			}()
		}
	}
	get := func(u string) int {
		resp, err := http.Get(u)
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	// 1. interrupted
	ctx, cancel := context.WithCancel(context.Background())
	if _, err := pc.BrowserLogin(ctx, open(cancel, nil)); !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted: %v", err)
	}
	if _, err := net.Dial("tcp", strings.TrimPrefix(strings.TrimSuffix(redirect, "/callback"), "http://")); err == nil {
		t.Fatal("the loopback listener is still open after Ctrl-C")
	}
	// 2. a forged answer is ignored (400), then the refusal ends the login with exit 4
	_, err = pc.BrowserLogin(context.Background(), open(nil, func(u *url.URL) {
		if s := get(redirect + "?state=forged&code=x"); s != 400 {
			t.Errorf("forged state: %d", s)
		}
		if s := get(redirect + "?state=" + url.QueryEscape(u.Query().Get("state")) + "&error=access_denied"); s != 200 {
			t.Errorf("refusal: %d", s)
		}
	}))
	if errs.ExitCode(err) != errs.ExitAuth || !strings.Contains(err.Error(), "access_denied") {
		t.Fatalf("refused login: %v", err)
	}
	http.DefaultClient.CloseIdleConnections()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Fatalf("%d goroutines after, %d before", n, before)
	}
}

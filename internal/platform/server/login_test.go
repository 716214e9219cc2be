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
	"net/http/httptest"
	"net/url"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/time/rate"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devtool/devtool/internal/errs"
	"github.com/devtool/devtool/internal/platform/api"
	"github.com/devtool/devtool/internal/platform/client"
	"github.com/devtool/devtool/internal/platform/store"
	"github.com/devtool/devtool/internal/platform/store/storetest"
)

// newTLSTestServer runs the API over TLS on fake clients (the session cookie is Secure) and returns
// it with its store, an admin token and the PEM of its certificate.
func newTLSTestServer(t *testing.T) (*httptest.Server, *store.Store, string, []byte) {
	t.Helper()
	st, _ := storetest.New(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
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

// TestTokenEndpoint: a code works once, with its PKCE verifier and redirect address only, and not
// after it expired. (The consent page that makes codes is the web UI's: web/clilogin_test.go.)
func TestTokenEndpoint(t *testing.T) {
	ts, st, _, _ := newTLSTestServer(t)
	ctx := context.Background()
	hc := ts.Client()
	post := func(path string, f url.Values) (*http.Response, string) {
		resp, err := hc.PostForm(ts.URL+path, f)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		return resp, string(data)
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
		resp, body := post(api.TokenPath, f)
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

// TestLoginMethods: without the web UI (whose pages sign people in) the platform offers password
// and token logins only, and refuses to start a device login.
func TestLoginMethods(t *testing.T) {
	ts, _, _, _ := newTLSTestServer(t)
	var info api.Info
	if a := call(t, ts, "GET", api.Prefix+"/info", "", nil); a.status != 200 || json.Unmarshal(a.body, &info) != nil {
		t.Fatalf("info: %d %s", a.status, a.body)
	}
	if info.Login == nil || !info.Login.Password || info.Login.Browser || info.Login.Device || len(info.Login.Providers) != 0 {
		t.Fatalf("login methods without the web UI: %+v", info.Login)
	}
	resp, err := ts.Client().PostForm(ts.URL+api.DeviceAuthPath, url.Values{"client_id": {api.CLIClientID}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 400 {
		t.Fatalf("device authorization without the web UI: %d", resp.StatusCode)
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

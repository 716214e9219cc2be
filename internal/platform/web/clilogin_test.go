package web

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"html"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/time/rate"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devtool/devtool/internal/errs"
	"github.com/devtool/devtool/internal/platform/api"
	"github.com/devtool/devtool/internal/platform/client"
	"github.com/devtool/devtool/internal/platform/server"
	"github.com/devtool/devtool/internal/platform/sso"
	"github.com/devtool/devtool/internal/platform/store"
)

const alicePassword = "correct horse battery"

// newPlatform is the API with the UI mounted, wired as devtool-platform serve wires them (one
// password check, one set of rate limits), on fake clients; alice has a password. limits changes
// the server's limits (default: none).
func newPlatform(t *testing.T, limits func(*server.Options)) *fixture {
	t.Helper()
	f := newUsers(t)
	if err := f.st.SetPassword(context.Background(), "alice", alicePassword); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(testWriter{t}, nil))
	info := api.Info{Version: "test", Domain: "devtool.localhost"}
	so := server.Options{Store: f.st, Info: info, Log: log, AddrRate: rate.Inf, AccountRate: rate.Inf,
		LoginAddrRate: rate.Inf, LoginAccountRate: rate.Inf, SSO: sso.New(f.st, log)}
	if limits != nil {
		limits(&so)
	}
	var srv *server.Server
	ui, err := New(Options{Store: f.st, Info: info, Log: log, SSO: so.SSO,
		CheckPassword: func(ctx context.Context, name, password, addr string) (*store.User, error) {
			return srv.CheckPassword(ctx, name, password, addr)
		},
		AllowAccount: func(user string) bool { return srv.AllowAccount(user) },
		AllowLogin:   func(addr, account string) bool { return srv.AllowLogin(addr, account) },
		NoteUser:     server.NoteUser})
	if err != nil {
		t.Fatal(err)
	}
	so.Web = ui.Handler()
	srv = server.New(so)
	f.ts = httptest.NewTLSServer(srv.Handler())
	t.Cleanup(f.ts.Close)
	return f
}

func (f *fixture) signInWithPassword(c *http.Client, name, password, ret string) page {
	f.t.Helper()
	return f.do(c, "POST", "/signin", url.Values{"name": {name}, "password": {password}, "return": {ret}}, nil)
}

// TestPasswordSignIn: the sign-in page's password form checks with the store (lockout on the User,
// one answer for every refusal), starts a web session, and goes on only where ValidReturn allows.
func TestPasswordSignIn(t *testing.T) {
	f := newPlatform(t, nil)
	anon := f.browser()
	if p := f.do(anon, "GET", "/signin", nil, nil); p.status != 200 || !strings.Contains(p.body, `id="signin-password"`) || !strings.Contains(p.body, `id="signin-token"`) {
		t.Fatalf("sign-in page: %d\n%s", p.status, p.body)
	}
	for what, form := range map[string][2]string{
		"wrong password": {"alice", "wrong horse battery"},
		"unknown user":   {"nobody", alicePassword},
		"no password":    {"bob", alicePassword},
		"bad name":       {"Not A Name", "x"},
	} {
		p := f.signInWithPassword(anon, form[0], form[1], "")
		if p.status != http.StatusUnauthorized || !strings.Contains(p.body, badPassword) {
			t.Errorf("%s: %d\n%s", what, p.status, p.body)
		}
	}
	// Four more wrong passwords (five with the one above) lock alice: the right one is refused alike.
	for range 4 {
		f.signInWithPassword(anon, "alice", "wrong horse battery", "")
	}
	if p := f.signInWithPassword(anon, "alice", alicePassword, ""); p.status != http.StatusUnauthorized || !strings.Contains(p.body, badPassword) {
		t.Fatalf("right password while locked: %d\n%s", p.status, p.body)
	}
	if err := f.st.Unlock(context.Background(), "alice"); err != nil {
		t.Fatal(err)
	}
	// Signed in: a web session (a Session resource), no API token; on to a page of this site only.
	c := f.browser()
	if p := f.signInWithPassword(c, "alice", alicePassword, "https://evil.example/"); p.status != http.StatusSeeOther || p.loc != "/namespaces" {
		t.Fatalf("sign-in returning elsewhere: %d %q\n%s", p.status, p.loc, p.body)
	}
	if p := f.signInWithPassword(c, "alice", alicePassword, "/tokens"); p.status != http.StatusSeeOther || p.loc != "/tokens" {
		t.Fatalf("sign-in returning to /tokens: %d %q", p.status, p.loc)
	}
	if p := f.do(c, "GET", "/tokens", nil, nil); p.status != 200 || !strings.Contains(p.body, "Signed in as <strong>alice</strong>") {
		t.Fatalf("tokens page after the password sign-in: %d\n%s", p.status, p.body)
	}
	ss, err := f.st.Dyn.Resource(store.SessionResource).Namespace(f.st.Namespace).List(context.Background(), metav1.ListOptions{})
	if err != nil || len(ss.Items) != 1 {
		t.Fatalf("sessions after two sign-ins of one browser: %v %v (the second ends the first)", len(ss.Items), err)
	}
	toks, _ := f.st.Tokens("alice")
	for _, tk := range toks {
		if tk.Name != "initial" {
			t.Errorf("a browser sign-in made an API token: %+v", tk)
		}
	}

	// The hashes' limit answers 429, said so.
	busy, err := New(Options{Store: f.st, Info: api.Info{Version: "test"}, CheckPassword: func(context.Context, string, string, string) (*store.User, error) {
		return nil, store.ErrBusy
	}})
	if err != nil {
		t.Fatal(err)
	}
	bts := httptest.NewTLSServer(busy.Handler())
	defer bts.Close()
	resp, err := bts.Client().PostForm(bts.URL+"/signin", url.Values{"name": {"alice"}, "password": {alicePassword}})
	if err != nil {
		t.Fatal(err)
	}
	body := readBody(resp)
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" || !strings.Contains(body, busyPassword) {
		t.Fatalf("busy hashes: %d %q\n%s", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
}

// TestSignInRateLimit: the sign-in page spends the API's login budgets (per address, per account).
func TestSignInRateLimit(t *testing.T) {
	f := newPlatform(t, func(o *server.Options) { o.LoginAddrRate, o.LoginAddrBurst = rate.Every(time.Hour), 3 })
	anon := f.browser()
	for i := range 3 {
		if p := f.signInWithPassword(anon, "alice", "wrong horse battery", ""); p.status != http.StatusUnauthorized {
			t.Fatalf("attempt %d: %d", i+1, p.status)
		}
	}
	p := f.do(anon, "POST", "/signin", url.Values{"token": {f.tokens["alice"]}}, nil)
	if p.status != http.StatusTooManyRequests || !strings.Contains(p.body, "Too many sign-in attempts") {
		t.Fatalf("fourth attempt from the address: %d\n%s", p.status, p.body)
	}
	// The API's password login shares the budget.
	resp, err := f.ts.Client().Post(f.ts.URL+api.Prefix+"/login", "application/json", strings.NewReader(`{"user":"alice","password":"`+alicePassword+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	readBody(resp)
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("API login after the page spent the budget: %d", resp.StatusCode)
	}
}

var authorizeQuery = regexp.MustCompile(`name="([a-z_]+)" value="([^"]*)"`)

// TestCLIBrowserLogin: the CLI's browser login (PKCE, loopback) signs in on the UI's sign-in page,
// asks on the UI's consent page (in the UI's layout, its policy letting the form's answer go to the
// CLI's loopback address), and the browser is signed in to the UI with the same session.
func TestCLIBrowserLogin(t *testing.T) {
	f := newPlatform(t, nil)
	pc, err := client.New(client.Options{URL: f.ts.URL, CA: certPEM(f.ts)})
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	b := f.browser()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	failed := make(chan string, 10)
	tok, err := pc.BrowserLogin(ctx, func(authURL string) {
		go func() {
			fail := func(format string, a ...any) { failed <- fmt.Sprintf(format, a...); cancel() }
			au, _ := url.Parse(authURL)
			redirect := au.Query().Get("redirect_uri")
			// Not signed in: the consent page sends the browser to the UI's sign-in page and back.
			p := f.do(b, "GET", au.RequestURI(), nil, nil)
			if p.status != http.StatusSeeOther || !strings.HasPrefix(p.loc, "/signin?return=") {
				fail("authorize without a session: %d %q", p.status, p.loc)
				return
			}
			signin := p.loc
			p = f.do(b, "GET", signin, nil, nil)
			if p.status != 200 || !strings.Contains(p.body, "The devtool CLI on this computer is logging in") {
				fail("sign-in page for the CLI: %d\n%s", p.status, p.body)
				return
			}
			ret, _ := url.Parse(signin)
			back := ret.Query().Get("return")
			if p := f.signInWithPassword(b, "alice", "wrong horse battery", back); p.status != http.StatusUnauthorized || !strings.Contains(p.body, badPassword) {
				fail("wrong password: %d", p.status)
				return
			}
			p = f.signInWithPassword(b, "alice", alicePassword, back)
			if p.status != http.StatusSeeOther || !strings.HasPrefix(p.loc, api.AuthorizePath+"?") {
				fail("sign-in: %d %q", p.status, p.loc)
				return
			}
			resp, body := f.get(b, p.loc)
			if resp.StatusCode != 200 || !strings.Contains(body, `id="allow"`) || !strings.Contains(body, `id="consent-user">alice<`) ||
				!strings.Contains(body, `<nav aria-label="Main">`) || !strings.Contains(body, `id="signout"`) {
				fail("consent page (in the UI's layout): %d\n%s", resp.StatusCode, body)
				return
			}
			ru, _ := url.Parse(redirect)
			if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "form-action 'self' https://*.devtool.localhost:* http://"+ru.Host+";") {
				fail("consent page's policy: %s", csp)
				return
			}
			form := url.Values{}
			for _, m := range authorizeQuery.FindAllStringSubmatch(body, -1) {
				if m[1] != "return" {
					form.Set(m[1], html.UnescapeString(m[2]))
				}
			}
			form.Set("action", "allow")
			// Another site's form is refused.
			if p := f.do(b, "POST", api.AuthorizePath, form, map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"}); p.status != http.StatusForbidden {
				fail("cross-site consent: %d", p.status)
				return
			}
			p = f.do(b, "POST", api.AuthorizePath, form, map[string]string{"Sec-Fetch-Site": "same-origin"})
			if p.status != http.StatusSeeOther || !strings.HasPrefix(p.loc, redirect+"?") {
				fail("allow: %d %q", p.status, p.loc)
				return
			}
			// The browser goes on to the CLI's loopback listener.
			if resp, err := http.Get(p.loc); err != nil || resp.StatusCode != 200 {
				fail("loopback: %v %v", resp, err)
			} else {
				resp.Body.Close()
			}
		}()
	})
	select {
	case msg := <-failed:
		t.Fatal(msg)
	default:
	}
	if err != nil {
		t.Fatal(err)
	}
	var me api.User
	if err := getJSON(f, tok, api.Prefix+"/me", &me); err != nil || me.Name != "alice" {
		t.Fatalf("the CLI's token: %+v %v", me, err)
	}
	// Signing in for the CLI signed the browser in to the UI: one session.
	if p := f.do(b, "GET", "/namespaces", nil, nil); p.status != 200 || !strings.Contains(p.body, "Signed in as <strong>alice</strong>") {
		t.Fatalf("the UI after the CLI's login: %d\n%s", p.status, p.body)
	}
	// "Not alice?" signs out and comes back to the consent page after the next sign-in.
	ret := api.AuthorizePath + "?client_id=" + api.CLIClientID
	if p := f.do(b, "POST", "/signout", url.Values{"return": {ret}}, nil); p.status != http.StatusSeeOther || p.loc != SignInURL("", ret) {
		t.Fatalf("sign-out with a return: %d %q", p.status, p.loc)
	}
	if p := f.do(b, "POST", "/signout", url.Values{"return": {"https://evil.example/"}}, nil); p.loc != "/signin" {
		t.Fatalf("sign-out returning elsewhere: %q", p.loc)
	}
}

// TestAuthorizeRequestChecks: a request for another client or a redirect address that is not a
// loopback IP literal gets a page (never a redirect there); other faults go back to the CLI.
func TestAuthorizeRequestChecks(t *testing.T) {
	f := newPlatform(t, nil)
	good := url.Values{"response_type": {"code"}, "client_id": {api.CLIClientID}, "redirect_uri": {"http://127.0.0.1:5555/callback"},
		"state": {"s1"}, "code_challenge": {strings.Repeat("a", 43)}, "code_challenge_method": {"S256"}}
	with := func(k, v string) url.Values {
		out := url.Values{}
		for kk, vs := range good {
			out[kk] = vs
		}
		out.Set(k, v)
		return out
	}
	alice := f.browser()
	if p := f.signInWithPassword(alice, "alice", alicePassword, ""); p.status != http.StatusSeeOther {
		t.Fatal(p.status)
	}
	for _, c := range []*http.Client{f.browser(), alice} {
		for what, v := range map[string]url.Values{
			"localhost redirect": with("redirect_uri", "http://localhost:5555/callback"),
			"remote redirect":    with("redirect_uri", "http://evil.example:5555/callback"),
			"https redirect":     with("redirect_uri", "https://127.0.0.1:5555/callback"),
			"other client":       with("client_id", "other"),
		} {
			if p := f.do(c, "GET", api.AuthorizePath+"?"+v.Encode(), nil, nil); p.status != 400 || p.loc != "" {
				t.Errorf("%s: %d %q, want a 400 page (never a redirect)", what, p.status, p.loc)
			}
		}
	}
	p := f.do(alice, "GET", api.AuthorizePath+"?"+with("code_challenge_method", "plain").Encode(), nil, nil)
	if !strings.HasPrefix(p.loc, "http://127.0.0.1:5555/callback?") || !strings.Contains(p.loc, "error=invalid_request") || !strings.Contains(p.loc, "state=s1") {
		t.Errorf("plain PKCE: %d %s", p.status, p.loc)
	}
	deny := with("action", "deny")
	if p := f.do(alice, "POST", api.AuthorizePath, deny, nil); !strings.Contains(p.loc, "error=access_denied") || !strings.Contains(p.loc, "state=s1") {
		t.Errorf("deny: %d %s", p.status, p.loc)
	}
	// Allowing without a session goes through the sign-in page back to the consent page.
	if p := f.do(f.browser(), "POST", api.AuthorizePath, with("action", "allow"), nil); p.status != http.StatusSeeOther ||
		!strings.HasPrefix(p.loc, "/signin?return="+url.QueryEscape(api.AuthorizePath+"?")) {
		t.Errorf("allow without a session: %d %q", p.status, p.loc)
	}
}

// TestCLIDeviceLogin: the device login's page is the UI's, behind its sign-in; a wrong code is
// said so; denied and approved logins end the CLI's polling accordingly.
func TestCLIDeviceLogin(t *testing.T) {
	f := newPlatform(t, nil)
	pc, err := client.New(client.Options{URL: f.ts.URL, CA: certPEM(f.ts)})
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	b := f.browser()
	for _, approve := range []bool{false, true} {
		failed := make(chan string, 10)
		tok, err := pc.DeviceLogin(ctx, "test host", func(code, uri, complete string) {
			go func() {
				fail := func(format string, a ...any) { failed <- fmt.Sprintf(format, a...); cancel() }
				if !strings.HasSuffix(uri, api.DevicePagePath) || !strings.Contains(complete, "user_code=") || len(code) != 9 {
					fail("device answer: %q %q %q", code, uri, complete)
					return
				}
				cu, _ := url.Parse(complete)
				p := f.do(b, "GET", cu.RequestURI(), nil, nil)
				if !approve { // first round: not signed in yet
					if p.status != http.StatusSeeOther || p.loc != SignInURL("", cu.RequestURI()) {
						fail("device page without a session: %d %q", p.status, p.loc)
						return
					}
					if p := f.signInWithPassword(b, "alice", alicePassword, cu.RequestURI()); p.status != http.StatusSeeOther || p.loc != cu.RequestURI() {
						fail("sign-in for the device page: %d %q", p.status, p.loc)
						return
					}
					p = f.do(b, "GET", cu.RequestURI(), nil, nil)
				}
				if p.status != 200 || !strings.Contains(p.body, `value="`+code+`"`) || !strings.Contains(p.body, "test host") || !strings.Contains(p.body, `<nav aria-label="Main">`) {
					fail("device page: %d\n%s", p.status, p.body)
					return
				}
				if p := f.do(b, "POST", api.DevicePagePath, url.Values{"user_code": {"BBBB-BBBB"}, "action": {"approve"}}, nil); p.status != 404 || !strings.Contains(p.body, "No pending login has this code") {
					fail("wrong code: %d", p.status)
					return
				}
				action := "deny"
				if approve {
					action = "approve"
				}
				if p := f.do(b, "POST", api.DevicePagePath, url.Values{"user_code": {strings.ToLower(code)}, "action": {action}}, nil); p.status != 200 || !strings.Contains(p.body, `id="message"`) {
					fail("%s: %d\n%s", action, p.status, p.body)
				}
			}()
		})
		select {
		case msg := <-failed:
			t.Fatal(msg)
		default:
		}
		if !approve {
			var ae *errs.AuthError
			if !errors.As(err, &ae) || !strings.Contains(err.Error(), "access_denied") {
				t.Fatalf("denied device login: %v", err)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		var me api.User
		if err := getJSON(f, tok, api.Prefix+"/me", &me); err != nil || me.Name != "alice" {
			t.Fatalf("the device login's token: %+v %v", me, err)
		}
	}
}

// TestLoginMethodsWithTheUI: with the UI mounted the platform offers every login.
func TestLoginMethodsWithTheUI(t *testing.T) {
	f := newPlatform(t, nil)
	var info api.Info
	if err := getJSON(f, "", api.Prefix+"/info", &info); err != nil {
		t.Fatal(err)
	}
	if info.Login == nil || !info.Login.Password || !info.Login.Browser || !info.Login.Device {
		t.Fatalf("login methods: %+v", info.Login)
	}
}

func readBody(resp *http.Response) string {
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// get is do's GET that keeps the answer's headers.
func (f *fixture) get(c *http.Client, path string) (*http.Response, string) {
	f.t.Helper()
	resp, err := c.Get(f.ts.URL + path)
	if err != nil {
		f.t.Fatalf("GET %s: %v", path, err)
	}
	return resp, readBody(resp)
}

func certPEM(ts *httptest.Server) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ts.Certificate().Raw})
}

// getJSON reads an API route (with token, when given) into v.
func getJSON(f *fixture, token, path string, v any) error {
	req, _ := http.NewRequest("GET", f.ts.URL+path, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := f.ts.Client().Do(req)
	if err != nil {
		return err
	}
	body := readBody(resp)
	if resp.StatusCode != 200 {
		return fmt.Errorf("GET %s: %d %s", path, resp.StatusCode, body)
	}
	return json.Unmarshal([]byte(body), v)
}

package server

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"html/template"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/devtool/devtool/internal/platform/api"
	"github.com/devtool/devtool/internal/platform/store"
)

// The sign-in, consent and device pages: plain HTML forms (html/template, no script), served by
// every replica. CSRF: http.CrossOriginProtection refuses cross-site POSTs; the session cookie is
// SameSite=Lax. Everything a login needs between two requests is in the cluster (codes, device
// logins) or signed (an OpenID Connect login's state), so any replica finishes what another began.

const (
	authCodeLifetime    = 5 * time.Minute
	deviceLoginLifetime = 10 * time.Minute
	devicePollInterval  = 2 // seconds
)

var pages = template.Must(template.New("pages").Parse(`
{{define "head"}}<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>{{.Title}} · devtool</title>
<style>
body{font-family:system-ui,sans-serif;max-width:28rem;margin:4rem auto;padding:0 1rem;color:#222}
h1{font-size:1.4rem} form{margin:1rem 0} label{display:block;margin:.6rem 0 .2rem}
input[type=text],input[type=password]{width:100%;padding:.5rem;box-sizing:border-box;font-size:1rem}
button{padding:.5rem 1rem;font-size:1rem;margin:.6rem .4rem 0 0;cursor:pointer}
.error{color:#b00020;border:1px solid #b00020;padding:.5rem} .muted{color:#666;font-size:.9rem} code{font-size:1.1rem}
</style></head><body>
<h1>{{.Title}}</h1>
{{if .Error}}<p class="error" id="error">{{.Error}}</p>{{end}}
{{end}}
{{define "foot"}}</body></html>{{end}}

{{define "signin"}}{{template "head" .}}
<p>Sign in to the devtool platform{{if .For}} to {{.For}}{{end}}.</p>
{{if .PasswordOn}}
<form method="post" action="{{.SignInPath}}">
<input type="hidden" name="return" value="{{.Return}}">
<label for="user">User name</label><input type="text" id="user" name="user" autocomplete="username" autofocus required>
<label for="password">Password</label><input type="password" id="password" name="password" autocomplete="current-password" required>
<button type="submit" id="signin">Sign in</button>
</form>{{end}}
{{range .Providers}}<form method="get" action="/login/oidc/{{.ID}}"><input type="hidden" name="return" value="{{$.Return}}">
<button type="submit" id="oidc-{{.ID}}">Sign in with {{.Name}}</button></form>{{end}}
{{template "foot" .}}{{end}}

{{define "consent"}}{{template "head" .}}
<p>Signed in as <b id="user">{{.User}}</b>.</p>
<p>The devtool CLI on this computer (answering on <code>{{.Client}}</code>) asks to act as you on this platform:
it gets an API token of yours.</p>
<form method="post" action="{{.AuthorizePath}}">
{{range $k, $v := .Params}}<input type="hidden" name="{{$k}}" value="{{$v}}">{{end}}
<button type="submit" name="action" value="allow" id="allow">Allow</button>
<button type="submit" name="action" value="deny" id="deny">Deny</button>
</form>
<form method="post" action="/login/signout"><input type="hidden" name="return" value="{{.Return}}">
<button type="submit" id="signout">Not {{.User}}? Sign out</button></form>
{{template "foot" .}}{{end}}

{{define "device"}}{{template "head" .}}
<p>Signed in as <b id="user">{{.User}}</b>.</p>
<p>Enter the code your terminal shows. Allow it only if you started <code>devtool context use --device</code> yourself{{if .Client}} (on {{.Client}}){{end}}.</p>
<form method="post" action="{{.DevicePath}}">
<label for="user_code">Code</label><input type="text" id="user_code" name="user_code" value="{{.UserCode}}" autocomplete="off" required>
<button type="submit" name="action" value="approve" id="approve">Allow</button>
<button type="submit" name="action" value="deny" id="deny">Deny</button>
</form>
{{template "foot" .}}{{end}}

{{define "message"}}{{template "head" .}}
<p id="message">{{.Message}}</p>
{{template "foot" .}}{{end}}
`))

type page struct {
	Title, Error, Message string
	For, Return           string
	PasswordOn            bool
	Providers             []api.LoginProvider
	User, Client          string
	Params                map[string]string
	UserCode              string
	SignInPath            string
	AuthorizePath         string
	DevicePath            string
}

func (s *Server) render(w http.ResponseWriter, status int, name string, p page) {
	p.SignInPath, p.AuthorizePath, p.DevicePath = api.SignInPath, api.AuthorizePath, api.DevicePagePath
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Frame-Options", "DENY")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'")
	w.WriteHeader(status)
	if err := pages.ExecuteTemplate(w, name, p); err != nil {
		s.o.Log.Error("rendering a page", "page", name, "err", err)
	}
}

func (s *Server) message(w http.ResponseWriter, status int, title, msg string) {
	s.render(w, status, "message", page{Title: title, Message: msg})
}

// safeReturn accepts only a path of this site under /login/ or the web UI's root, so a sign-in
// never sends the browser elsewhere.
func safeReturn(ret string) string {
	if ret == "" || !strings.HasPrefix(ret, "/") || strings.HasPrefix(ret, "//") || strings.ContainsAny(ret, "\\\r\n") {
		return "/"
	}
	u, err := url.Parse(ret)
	if err != nil || u.Scheme != "" || u.Host != "" {
		return "/"
	}
	return ret
}

func (s *Server) signInRedirect(w http.ResponseWriter, r *http.Request) {
	http.Redirect(w, r, api.SignInPath+"?return="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
}

// --- sign in and out

func (s *Server) signInPage(w http.ResponseWriter, r *http.Request) {
	ret := safeReturn(r.URL.Query().Get("return"))
	s.renderSignIn(w, r, http.StatusOK, ret, "")
}

func (s *Server) renderSignIn(w http.ResponseWriter, r *http.Request, status int, ret, errMsg string) {
	p := page{Title: "Sign in", Return: ret, Error: errMsg, PasswordOn: true, Providers: s.providers(r.Context())}
	switch {
	case strings.HasPrefix(ret, api.AuthorizePath):
		p.For = "log in the devtool CLI"
	case strings.HasPrefix(ret, api.DevicePagePath):
		p.For = "log in the devtool CLI on another device"
	}
	s.render(w, status, "signin", p)
}

func (s *Server) signIn(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		s.message(w, http.StatusBadRequest, "Sign in", "The form could not be read.")
		return
	}
	ret := safeReturn(r.PostForm.Get("return"))
	user := strings.TrimSpace(r.PostForm.Get("user"))
	if !s.loginAllowed(w, r, user) {
		return
	}
	u, err := s.checkPassword(r.Context(), r, user, r.PostForm.Get("password"))
	switch {
	case errors.Is(err, store.ErrBadLogin):
		s.renderSignIn(w, r, http.StatusUnauthorized, ret, badLogin+".")
		return
	case errors.Is(err, store.ErrBusy):
		w.Header().Set("Retry-After", "5")
		s.renderSignIn(w, r, http.StatusTooManyRequests, ret, store.ErrBusy.Error()+".")
		return
	case err != nil:
		s.o.Log.Error("sign-in failed", "err", err)
		s.message(w, http.StatusInternalServerError, "Sign in", "The platform could not check the sign-in: see its log.")
		return
	}
	if err := StartSession(r.Context(), s.o.Store, w, u.Name); err != nil {
		s.o.Log.Error("starting a session", "user", u.Name, "err", err)
		s.message(w, http.StatusInternalServerError, "Sign in", "The platform could not start a session: see its log.")
		return
	}
	s.audit(r, caller{user: u}, store.Audit{Action: "login", Kind: "User", Name: u.Name, Detail: "password, browser session"})
	http.Redirect(w, r, ret, http.StatusSeeOther)
}

func (s *Server) signOut(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	_ = r.ParseForm()
	if u, t := SessionUser(r.Context(), s.o.Store, r); u != nil {
		_ = s.o.Store.DeleteToken(r.Context(), u.Name, t.ID)
	}
	ClearSession(w)
	ret := safeReturn(r.PostForm.Get("return"))
	http.Redirect(w, r, api.SignInPath+"?return="+url.QueryEscape(ret), http.StatusSeeOther)
}

// --- authorization code with PKCE (RFC 6749 §4.1, RFC 7636, RFC 8252 loopback redirect)

type authRequest struct {
	redirect                        *url.URL
	state, challenge, redirectURI   string
	clientErr                       string // not to be sent to the redirect address: shown on a page
	redirectErr, redirectErrMessage string // sent back to the redirect address
}

// loopbackRedirect accepts http://127.0.0.1:<port>/<path> and http://[::1]:<port>/<path> only
// (RFC 8252 §7.3: loopback IP literals; "localhost" may resolve elsewhere).
func loopbackRedirect(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "http" || u.User != nil || u.Fragment != "" || u.Port() == "" {
		return nil, errors.New("redirect_uri must be http://127.0.0.1:<port>/... or http://[::1]:<port>/...")
	}
	ip := net.ParseIP(u.Hostname())
	if ip == nil || !ip.IsLoopback() || u.Hostname() != "127.0.0.1" && u.Hostname() != "::1" {
		return nil, errors.New("redirect_uri must be http://127.0.0.1:<port>/... or http://[::1]:<port>/...")
	}
	return u, nil
}

func validChallenge(c string) bool {
	if len(c) < 43 || len(c) > 128 {
		return false
	}
	for _, r := range c {
		if !(r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || strings.ContainsRune("-._~", r)) {
			return false
		}
	}
	return true
}

func parseAuthRequest(v url.Values) authRequest {
	var a authRequest
	if v.Get("client_id") != api.CLIClientID {
		a.clientErr = fmt.Sprintf("unknown client_id %q: the platform knows only the devtool CLI (%s)", v.Get("client_id"), api.CLIClientID)
		return a
	}
	u, err := loopbackRedirect(v.Get("redirect_uri"))
	if err != nil {
		a.clientErr = err.Error()
		return a
	}
	a.redirect, a.redirectURI = u, v.Get("redirect_uri")
	a.state, a.challenge = v.Get("state"), v.Get("code_challenge")
	switch {
	case v.Get("response_type") != "code":
		a.redirectErr, a.redirectErrMessage = "unsupported_response_type", "response_type must be code"
	case a.state == "" || len(a.state) > 512:
		a.redirectErr, a.redirectErrMessage = "invalid_request", "state is required (at most 512 characters)"
	case v.Get("code_challenge_method") != "S256" || !validChallenge(a.challenge):
		a.redirectErr, a.redirectErrMessage = "invalid_request", "PKCE is required: code_challenge (43-128 characters) with code_challenge_method S256"
	}
	return a
}

func (a authRequest) params() map[string]string {
	return map[string]string{"response_type": "code", "client_id": api.CLIClientID, "redirect_uri": a.redirectURI,
		"state": a.state, "code_challenge": a.challenge, "code_challenge_method": "S256"}
}

func (a authRequest) back(w http.ResponseWriter, r *http.Request, q url.Values) {
	u := *a.redirect
	vals := u.Query()
	for k, vs := range q {
		vals[k] = vs
	}
	vals.Set("state", a.state)
	u.RawQuery = vals.Encode()
	http.Redirect(w, r, u.String(), http.StatusSeeOther)
}

func (s *Server) authorizePage(w http.ResponseWriter, r *http.Request) {
	a := parseAuthRequest(r.URL.Query())
	if a.clientErr != "" {
		s.message(w, http.StatusBadRequest, "Login request refused", a.clientErr)
		return
	}
	if a.redirectErr != "" {
		a.back(w, r, url.Values{"error": {a.redirectErr}, "error_description": {a.redirectErrMessage}})
		return
	}
	u, _ := SessionUser(r.Context(), s.o.Store, r)
	if u == nil {
		s.signInRedirect(w, r)
		return
	}
	s.render(w, http.StatusOK, "consent", page{Title: "Log in the devtool CLI", User: u.Name, Client: a.redirect.Host,
		Params: a.params(), Return: r.URL.RequestURI()})
}

func (s *Server) authorize(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		s.message(w, http.StatusBadRequest, "Login request refused", "The form could not be read.")
		return
	}
	a := parseAuthRequest(r.PostForm)
	if a.clientErr != "" {
		s.message(w, http.StatusBadRequest, "Login request refused", a.clientErr)
		return
	}
	if a.redirectErr != "" {
		a.back(w, r, url.Values{"error": {a.redirectErr}, "error_description": {a.redirectErrMessage}})
		return
	}
	u, _ := SessionUser(r.Context(), s.o.Store, r)
	if u == nil {
		s.message(w, http.StatusUnauthorized, "Login request refused", "Your session ended: run the login in your terminal again.")
		return
	}
	if r.PostForm.Get("action") != "allow" {
		a.back(w, r, url.Values{"error": {"access_denied"}, "error_description": {"the user denied the login"}})
		return
	}
	code, err := s.o.Store.CreateAuthCode(r.Context(), store.AuthCode{User: u.Name, Challenge: a.challenge, RedirectURI: a.redirectURI,
		Expires: s.o.Now().Add(authCodeLifetime)})
	if err != nil {
		s.o.Log.Error("authorization code", "err", err)
		a.back(w, r, url.Values{"error": {"server_error"}})
		return
	}
	a.back(w, r, url.Values{"code": {code}})
}

// --- device authorization (RFC 8628)

func (s *Server) devicePage(w http.ResponseWriter, r *http.Request) {
	u, _ := SessionUser(r.Context(), s.o.Store, r)
	if u == nil {
		s.signInRedirect(w, r)
		return
	}
	code := r.URL.Query().Get("user_code")
	p := page{Title: "Log in the devtool CLI on another device", User: u.Name, UserCode: code}
	if code != "" {
		if d, err := s.o.Store.FindDeviceLogin(r.Context(), code); err == nil {
			p.Client = d.Client
		}
	}
	s.render(w, http.StatusOK, "device", p)
}

func (s *Server) deviceDecide(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		s.message(w, http.StatusBadRequest, "Device login", "The form could not be read.")
		return
	}
	u, _ := SessionUser(r.Context(), s.o.Store, r)
	if u == nil {
		s.message(w, http.StatusUnauthorized, "Device login", "Your session ended: sign in again.")
		return
	}
	if !s.loginAllowed(w, r, u.Name) {
		return
	}
	code := r.PostForm.Get("user_code")
	approve := r.PostForm.Get("action") == "approve"
	err := s.o.Store.DecideDeviceLogin(r.Context(), code, u.Name, approve)
	switch {
	case errors.Is(err, store.ErrNotFound):
		s.render(w, http.StatusNotFound, "device", page{Title: "Log in the devtool CLI on another device", User: u.Name, UserCode: code,
			Error: "No pending login has this code (or it expired): check the code in your terminal."})
		return
	case errors.Is(err, store.ErrConflict):
		s.message(w, http.StatusConflict, "Device login", "This code was used already.")
		return
	case err != nil:
		s.o.Log.Error("device login", "err", err)
		s.message(w, http.StatusInternalServerError, "Device login", "The platform could not record it: see its log.")
		return
	}
	if approve {
		s.audit(r, caller{user: u}, store.Audit{Action: "login", Kind: "User", Name: u.Name, Detail: "device login approved"})
		s.message(w, http.StatusOK, "Device login", "Done: the devtool CLI on your other device is logging in as "+u.Name+". You can close this window.")
		return
	}
	s.message(w, http.StatusOK, "Device login", "Denied: the other device gets no access.")
}

// --- the token endpoint and device authorization endpoint (OAuth 2.0 JSON answers)

type oauthToken struct {
	AccessToken string `json:"access_token"`
	TokenType   string `json:"token_type"`
	ExpiresIn   int64  `json:"expires_in"`
}

func oauthError(w http.ResponseWriter, status int, code, desc string) {
	writeJSON(w, status, map[string]string{"error": code, "error_description": desc})
}

func (s *Server) oauthForm(w http.ResponseWriter, r *http.Request) bool {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		oauthError(w, http.StatusBadRequest, "invalid_request", "the body must be a form (application/x-www-form-urlencoded) of at most 64 KiB")
		return false
	}
	if r.PostForm.Get("client_id") != api.CLIClientID {
		oauthError(w, http.StatusUnauthorized, "invalid_client", "unknown client_id")
		return false
	}
	return true
}

func (s *Server) token(w http.ResponseWriter, r *http.Request) {
	if !s.loginAllowed(w, r, "") || !s.oauthForm(w, r) {
		return
	}
	f := r.PostForm
	var user, how string
	switch f.Get("grant_type") {
	case "authorization_code":
		c, err := s.o.Store.RedeemAuthCode(r.Context(), f.Get("code"))
		if errors.Is(err, store.ErrNotFound) {
			oauthError(w, http.StatusBadRequest, "invalid_grant", "unknown, used or expired code")
			return
		} else if err != nil {
			s.internal(w, r, err)
			return
		}
		sum := sha256.Sum256([]byte(f.Get("code_verifier")))
		want := base64.RawURLEncoding.EncodeToString(sum[:])
		if f.Get("redirect_uri") != c.RedirectURI || !validChallenge(f.Get("code_verifier")) ||
			subtle.ConstantTimeCompare([]byte(want), []byte(c.Challenge)) != 1 {
			oauthError(w, http.StatusBadRequest, "invalid_grant", "the code_verifier or redirect_uri does not match the authorization request")
			return
		}
		user, how = c.User, "browser login"
	case "urn:ietf:params:oauth:grant-type:device_code":
		d, err := s.o.Store.PollDeviceLogin(r.Context(), f.Get("device_code"))
		switch {
		case errors.Is(err, store.ErrNotFound):
			oauthError(w, http.StatusBadRequest, "invalid_grant", "unknown or used device code")
			return
		case err != nil:
			s.internal(w, r, err)
			return
		case !s.o.Now().Before(d.Expires):
			oauthError(w, http.StatusBadRequest, "expired_token", "the device code expired: start again")
			return
		case d.Status == store.DevicePending:
			oauthError(w, http.StatusBadRequest, "authorization_pending", "waiting for the user")
			return
		case d.Status == store.DeviceDenied:
			oauthError(w, http.StatusBadRequest, "access_denied", "the user denied the login")
			return
		}
		user, how = d.User, "device login"
	default:
		oauthError(w, http.StatusBadRequest, "unsupported_grant_type", "grant_type must be authorization_code or urn:ietf:params:oauth:grant-type:device_code")
		return
	}
	u, err := s.o.Store.GetUser(user)
	if err != nil {
		oauthError(w, http.StatusBadRequest, "invalid_grant", "the account is gone")
		return
	}
	t, tok, err := s.o.Store.CreateToken(r.Context(), u.Name, "devtool CLI ("+how+")", 0)
	if err != nil {
		s.internal(w, r, err)
		return
	}
	if rec, ok := w.(*recorder); ok {
		rec.user = u.Name
	}
	s.audit(r, caller{user: u}, store.Audit{Action: "login", Kind: "User", Name: u.Name, Detail: how + "; token " + t.ID})
	writeJSON(w, http.StatusOK, oauthToken{AccessToken: tok, TokenType: "Bearer", ExpiresIn: int64(time.Until(t.Expires).Seconds())})
}

type deviceAuth struct {
	DeviceCode              string `json:"device_code"`
	UserCode                string `json:"user_code"`
	VerificationURI         string `json:"verification_uri"`
	VerificationURIComplete string `json:"verification_uri_complete"`
	ExpiresIn               int64  `json:"expires_in"`
	Interval                int64  `json:"interval"`
}

func (s *Server) deviceAuthorize(w http.ResponseWriter, r *http.Request) {
	if !s.loginAllowed(w, r, "") || !s.oauthForm(w, r) {
		return
	}
	client := printableName(r.PostForm.Get("client_name"), 100)
	dc, uc, err := s.o.Store.CreateDeviceLogin(r.Context(), client, deviceLoginLifetime)
	if err != nil {
		s.internal(w, r, err)
		return
	}
	base := s.baseURL(r)
	writeJSON(w, http.StatusOK, deviceAuth{DeviceCode: dc, UserCode: uc, VerificationURI: base + api.DevicePagePath,
		VerificationURIComplete: base + api.DevicePagePath + "?user_code=" + url.QueryEscape(uc),
		ExpiresIn:               int64(deviceLoginLifetime / time.Second), Interval: devicePollInterval})
}

// baseURL is the platform's address as users reach it: --external-url, else the request's host.
func (s *Server) baseURL(r *http.Request) string {
	if s.o.ExternalURL != "" {
		return strings.TrimSuffix(s.o.ExternalURL, "/")
	}
	return "https://" + r.Host
}

func printableName(s string, n int) string {
	var b strings.Builder
	for _, r := range s {
		if b.Len() >= n {
			break
		}
		if r >= 0x20 && r != 0x7f && r < 0x250 {
			b.WriteRune(r)
		}
	}
	return b.String()
}

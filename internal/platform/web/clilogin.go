package web

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/devtool/devtool/internal/platform/api"
	"github.com/devtool/devtool/internal/platform/store"
)

// The CLI's logins ask the person on pages of this UI, signed in with its session (signing in for
// the CLI signs the browser in to the UI too):
//   - the browser login (OAuth 2.0 authorization code with PKCE, RFC 7636, and a loopback redirect,
//     RFC 8252): the consent page at api.AuthorizePath, whose Allow sends the browser back to the
//     CLI's loopback address with a code; the CLI redeems it at the API's token endpoint
//     (internal/platform/server/oauth.go);
//   - the device login (RFC 8628): the page at api.DevicePagePath where the person enters the code
//     the terminal shows.
// Codes and device logins live in the cluster (store/logins.go), so any replica finishes them.

const authCodeLifetime = 5 * time.Minute

// authRequest is an authorization request of the CLI.
type authRequest struct {
	redirect                        *url.URL
	state, challenge, redirectURI   string
	clientErr                       string // not to be sent to the redirect address: shown on a page
	redirectErr, redirectErrMessage string // sent back to the redirect address
}

// loopbackRedirect accepts http://127.0.0.1:<port>/<path> and http://[::1]:<port>/<path> only
// (RFC 8252 §7.3: loopback IP literals; "localhost" may resolve elsewhere).
func loopbackRedirect(raw string) (*url.URL, error) {
	bad := errors.New("redirect_uri must be http://127.0.0.1:<port>/... or http://[::1]:<port>/...")
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "http" || u.User != nil || u.Fragment != "" || u.Port() == "" {
		return nil, bad
	}
	ip := net.ParseIP(u.Hostname())
	if ip == nil || !ip.IsLoopback() || u.Hostname() != "127.0.0.1" && u.Hostname() != "::1" {
		return nil, bad
	}
	return u, nil
}

func parseAuthRequest(v url.Values) authRequest {
	var a authRequest
	if v.Get("client_id") != api.CLIClientID {
		a.clientErr = fmt.Sprintf("Unknown client_id %q: the platform knows only the devtool CLI (%s).", v.Get("client_id"), api.CLIClientID)
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
	case v.Get("code_challenge_method") != "S256" || !store.ValidPKCE(a.challenge):
		a.redirectErr, a.redirectErrMessage = "invalid_request", "PKCE is required: code_challenge (43-128 characters) with code_challenge_method S256"
	}
	return a
}

func (a authRequest) params() url.Values {
	return url.Values{"response_type": {"code"}, "client_id": {api.CLIClientID}, "redirect_uri": {a.redirectURI},
		"state": {a.state}, "code_challenge": {a.challenge}, "code_challenge_method": {"S256"}}
}

// pageURL is the consent page of this request (where a sign-in returns to).
func (a authRequest) pageURL() string { return api.AuthorizePath + "?" + a.params().Encode() }

// back sends the browser to the CLI's loopback address with q and the request's state.
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

// checked reads an authorization request and answers the bad ones itself: a page when the client or
// its redirect address is wrong (never a redirect there), the redirect address with an error when
// the rest is.
func (u *UI) checked(w http.ResponseWriter, r *http.Request, v url.Values) (authRequest, bool) {
	a := parseAuthRequest(v)
	if a.clientErr != "" {
		c, _ := u.caller(r)
		u.errorPage(w, r, c, http.StatusBadRequest, "Login request refused. "+a.clientErr)
		return a, false
	}
	if a.redirectErr != "" {
		a.back(w, r, url.Values{"error": {a.redirectErr}, "error_description": {a.redirectErrMessage}})
		return a, false
	}
	return a, true
}

type consentData struct {
	Client string // the CLI's loopback address
	Params url.Values
	Return string // this page, for "not you? sign out"
}

func (u *UI) authorizePage(w http.ResponseWriter, r *http.Request) {
	a, ok := u.checked(w, r, r.URL.Query())
	if !ok {
		return
	}
	c, ok := u.signedIn(w, r, a.pageURL())
	if !ok {
		return
	}
	// Allow posts here, and the answer sends the browser on to the CLI's loopback address: the
	// content security policy of this page lets a form's redirect go there.
	w.Header().Set("Content-Security-Policy", csp(u.o.Info.Domain, "http://"+a.redirect.Host))
	u.render(w, r, http.StatusOK, "consent", c, "Log in the devtool CLI", consentData{Client: a.redirect.Host, Params: a.params(), Return: a.pageURL()})
}

func (u *UI) authorize(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	if err := r.ParseForm(); err != nil {
		u.errorPage(w, r, nil, http.StatusBadRequest, "The form could not be read.")
		return
	}
	a, ok := u.checked(w, r, r.PostForm)
	if !ok {
		return
	}
	c, ok := u.signedIn(w, r, a.pageURL())
	if !ok {
		return
	}
	if r.PostForm.Get("action") != "allow" {
		a.back(w, r, url.Values{"error": {"access_denied"}, "error_description": {"the user denied the login"}})
		return
	}
	code, err := u.o.Store.CreateAuthCode(r.Context(), store.AuthCode{User: c.user.Name, Challenge: a.challenge, RedirectURI: a.redirectURI,
		Expires: u.o.Now().Add(authCodeLifetime)})
	if err != nil {
		u.o.Log.Error("authorization code", "err", err)
		a.back(w, r, url.Values{"error": {"server_error"}})
		return
	}
	a.back(w, r, url.Values{"code": {code}})
}

type deviceData struct {
	UserCode string
	Client   string // what the CLI said about itself
	Error    string
}

const deviceTitle = "Log in the devtool CLI on another device"

func (u *UI) devicePage(w http.ResponseWriter, r *http.Request, c *caller) {
	d := deviceData{UserCode: r.URL.Query().Get("user_code")}
	if d.UserCode != "" {
		if dl, err := u.o.Store.FindDeviceLogin(r.Context(), d.UserCode); err == nil {
			d.Client = dl.Client
		}
	}
	u.render(w, r, http.StatusOK, "device", c, deviceTitle, d)
}

func (u *UI) deviceDecide(w http.ResponseWriter, r *http.Request, c *caller) {
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	if err := r.ParseForm(); err != nil {
		u.errorPage(w, r, c, http.StatusBadRequest, "The form could not be read.")
		return
	}
	d := deviceData{UserCode: r.PostForm.Get("user_code")}
	again := func(status int, msg string) {
		d.Error = msg
		u.render(w, r, status, "device", c, deviceTitle, d)
	}
	// Codes are short: guessing them is a sign-in attempt like any other.
	if !u.allowLogin(w, r, c.user.Name, again) {
		return
	}
	approve := r.PostForm.Get("action") == "approve"
	err := u.o.Store.DecideDeviceLogin(r.Context(), d.UserCode, c.user.Name, approve)
	switch {
	case errors.Is(err, store.ErrNotFound):
		again(http.StatusNotFound, "No pending login has this code (or it expired): check the code in your terminal.")
		return
	case errors.Is(err, store.ErrConflict):
		again(http.StatusConflict, "This code was used already.")
		return
	case err != nil:
		u.internal(w, r, c, err)
		return
	}
	msg := "Denied: the other device gets no access."
	if approve {
		u.audit(r, c.user.Name, store.Audit{Action: "login", Kind: "User", Name: c.user.Name, Detail: "device login approved"})
		msg = "Done: the devtool CLI on your other device is logging in as " + c.user.Name + ". You can close this window."
	}
	u.render(w, r, http.StatusOK, "notice", c, deviceTitle, noticeData{Message: msg})
}

type noticeData struct{ Message string }

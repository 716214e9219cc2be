package web

import (
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/devtool/devtool/internal/platform/api"
	"github.com/devtool/devtool/internal/platform/store"
)

// SignInPath is the sign-in page. Another part of the platform (the ingress, for a private
// endpoint) sends a browser to SignInURL(platform, where it was going); after signing in, the
// browser is sent back there when ValidReturn accepts it.
const SignInPath = "/signin"

// SignInURL is the sign-in page of the platform at base (https://devtool.localhost:30244) that
// returns to ret afterwards.
func SignInURL(base, ret string) string {
	u := strings.TrimSuffix(base, "/") + SignInPath
	if ret != "" {
		u += "?return=" + url.QueryEscape(ret)
	}
	return u
}

// ValidReturn says whether the browser may be sent to ret after signing in, and where: a path of
// this site ("/namespaces/x", never "//host" or "/\host"), or an https URL whose host is the
// platform's domain or a name under it (an endpoint), without user info. Anything else is
// refused, so the sign-in page can never be used to send a user to another site.
func ValidReturn(ret, domain string) (string, bool) {
	if ret == "" || len(ret) > 2048 {
		return "", false
	}
	for _, c := range ret {
		if c < 0x20 || c == 0x7f || c == '\\' {
			return "", false
		}
	}
	u, err := url.Parse(ret)
	if err != nil {
		return "", false
	}
	if u.Scheme == "" && u.Host == "" && u.User == nil {
		if !strings.HasPrefix(ret, "/") || strings.HasPrefix(ret, "//") {
			return "", false
		}
		return u.RequestURI(), true
	}
	if u.Scheme != "https" || u.User != nil || u.Host == "" || domain == "" {
		return "", false
	}
	host := strings.ToLower(u.Hostname())
	d := strings.ToLower(strings.TrimSuffix(domain, "."))
	if host != d && !strings.HasSuffix(host, "."+d) {
		return "", false
	}
	return u.String(), true
}

type signInData struct {
	Return    string
	Password  bool
	Providers []api.LoginProvider
	For       string // what the sign-in is for (a sentence), when not the UI itself
	Name      string
	Error     string
}

// signInFor says what a sign-in that returns to ret is for, when it is one of the CLI's logins.
func signInFor(ret string) string {
	switch {
	case strings.HasPrefix(ret, api.AuthorizePath):
		return "The devtool CLI on this computer is logging in: sign in, then allow it to act as you."
	case strings.HasPrefix(ret, api.DevicePagePath):
		return "The devtool CLI on another device is logging in: sign in, then enter the code it shows."
	}
	return ""
}

func (u *UI) signInData(r *http.Request, ret string) signInData {
	return signInData{Return: ret, Password: u.o.CheckPassword != nil, Providers: u.o.SSO.List(r.Context()), For: signInFor(ret)}
}

func (u *UI) signInPage(w http.ResponseWriter, r *http.Request) {
	c, err := u.caller(r)
	if err != nil {
		u.internal(w, r, nil, err)
		return
	}
	ret, _ := ValidReturn(r.URL.Query().Get("return"), u.o.Info.Domain)
	if c != nil { // signed in already: on to where the browser was going
		if ret == "" {
			ret = "/namespaces"
		}
		http.Redirect(w, r, ret, http.StatusSeeOther)
		return
	}
	u.render(w, r, http.StatusOK, "signin", nil, "Sign in", u.signInData(r, ret))
}

// The sign-in page's answers to a refused password: one for every refusal (unknown user, no
// password, wrong password, locked account), and one when the platform hashes too many at once.
const (
	badPassword  = "Sign-in failed: the name or password is wrong, or the account is locked for a while after repeated failures."
	busyPassword = "The platform is checking too many sign-ins at once: try again in a few seconds."
)

// signIn takes a name and password (when password login is enabled) or an API token, and starts a
// session. Every refused password reads the same.
func (u *UI) signIn(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	if err := r.ParseForm(); err != nil {
		u.errorPage(w, r, nil, http.StatusBadRequest, "The sign-in form could not be read.")
		return
	}
	ret, _ := ValidReturn(r.PostForm.Get("return"), u.o.Info.Domain)
	d := u.signInData(r, ret)
	d.Name = strings.TrimSpace(r.PostForm.Get("name"))
	token := strings.TrimSpace(r.PostForm.Get("token"))
	refuse := func(status int, msg string) {
		d.Error = msg
		u.render(w, r, status, "signin", nil, "Sign in", d)
	}
	account := d.Name
	if token != "" {
		account = ""
	}
	if !u.allowLogin(w, r, account, refuse) {
		return
	}
	var (
		usr *store.User
		err error
		how string
	)
	switch {
	case token != "":
		how = "API token"
		usr, _, err = u.o.Store.Authenticate(r.Context(), token)
		if errors.Is(err, store.ErrBadToken) {
			refuse(http.StatusUnauthorized, "That token is not valid: it may be mistyped, revoked or expired.")
			return
		}
	case d.Password && d.Name != "":
		how = "password"
		usr, err = u.o.CheckPassword(r.Context(), d.Name, r.PostForm.Get("password"), clientAddr(r))
		switch {
		case errors.Is(err, store.ErrBadLogin):
			refuse(http.StatusUnauthorized, badPassword)
			return
		case errors.Is(err, store.ErrBusy):
			w.Header().Set("Retry-After", "5")
			refuse(http.StatusTooManyRequests, busyPassword)
			return
		}
	default:
		msg := "Paste an API token (devtool creates one per user; see the Tokens page once signed in)."
		if d.Password {
			msg = "Enter your name and password, or paste an API token."
		}
		refuse(http.StatusUnauthorized, msg)
		return
	}
	if err != nil {
		u.internal(w, r, nil, err)
		return
	}
	if err := u.startSession(w, r, usr, how); err != nil {
		u.internal(w, r, nil, err)
		return
	}
	if ret == "" {
		ret = "/namespaces"
	}
	http.Redirect(w, r, ret, http.StatusSeeOther)
}

// startSession starts a session of usr, signed in by how, and sets its cookie. A session cookie that
// came with the request (another user's, on a shared browser) ends first.
func (u *UI) startSession(w http.ResponseWriter, r *http.Request, usr *store.User, how string) error {
	if ck, err := r.Cookie(CookieName); err == nil {
		_ = u.o.Store.EndSession(r.Context(), ck.Value)
	}
	_, cookie, err := u.o.Store.CreateSession(r.Context(), usr.Name)
	if err != nil {
		return err
	}
	u.audit(r, usr.Name, store.Audit{Action: "sign-in", Kind: "User", Name: usr.Name, Detail: "web session, " + how})
	setSession(w, cookie)
	return nil
}

// signOut ends the session; the sign-in page that follows returns to the form's return field (the
// consent page's "not you?"), when ValidReturn accepts it.
func (u *UI) signOut(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	_ = r.ParseForm()
	if ck, err := r.Cookie(CookieName); err == nil {
		if err := u.o.Store.EndSession(r.Context(), ck.Value); err != nil {
			u.internal(w, r, nil, err)
			return
		}
	}
	clearSession(w)
	setFlash(w, "You are signed out.")
	ret, _ := ValidReturn(r.PostForm.Get("return"), u.o.Info.Domain)
	http.Redirect(w, r, SignInURL("", ret), http.StatusSeeOther)
}
func (u *UI) endAllSessions(w http.ResponseWriter, r *http.Request, c *caller) {
	if err := u.o.Store.EndSessionsOf(r.Context(), c.user.Name); err != nil {
		u.internal(w, r, c, err)
		return
	}
	clearSession(w)
	setFlash(w, "Every session of yours is signed out, this one included.")
	http.Redirect(w, r, "/signin", http.StatusSeeOther)
}

func setSession(w http.ResponseWriter, value string) {
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: value, Path: "/", MaxAge: int(store.SessionLifetime.Seconds()),
		Secure: true, HttpOnly: true, SameSite: http.SameSiteLaxMode})
}

func clearSession(w http.ResponseWriter) {
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: "", Path: "/", MaxAge: -1, Secure: true, HttpOnly: true, SameSite: http.SameSiteLaxMode})
}

// audit records a change made through the UI, as the API does (store.Record); failures are logged.
func (u *UI) audit(r *http.Request, actor string, a store.Audit) {
	if a.Err != nil && errors.Is(a.Err, store.ErrNotFound) {
		return
	}
	a.Actor = actor
	if err := u.o.Store.Record(r.Context(), a, u.o.Instance); err != nil {
		u.o.Log.Warn("audit record not written", "action", a.Action, "object", a.Kind+"/"+a.Name, "err", err)
	}
}

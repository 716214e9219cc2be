// Package web is the platform's web UI and `devtool ui`'s local dashboard: html/template pages with
// embedded assets (a small stylesheet and script; every page works as plain forms and links
// without them), served by the platform server (UI, below) or on loopback by `devtool ui` (Local).
//
// The platform's UI reads the cluster as the signed-in user: every Kubernetes call of a page is
// made impersonating the user's ServiceAccount (clients cached per user), so a page can show
// nothing RBAC would deny; a namespace the user is not a member of answers 404 (never 403, as the
// API does). State changes go through internal/platform/store with the same checks as the JSON API.
//
// Sessions: a random cookie "dvs_<id>_<secret>" (__Host-, Secure, HttpOnly, SameSite=Lax), of which
// the cluster keeps only the secret's SHA-256, in a Session resource read live on every request
// (store/sessions.go), so both replicas accept a session and a sign-out on one is seen by the other
// at once. It is the platform's only browser session: the sign-in page (password, API token or an
// OpenID Connect provider: auth.go, oidc.go) starts it, and the CLI's browser and device logins
// (clilogin.go) ask the signed-in user on pages of this UI. Every state change is a POST checked by
// net/http's CrossOriginProtection; the rate limits are the API's (Options.AllowAccount for
// signed-in requests, Options.AllowLogin for every sign-in attempt).
package web

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/devtool/devtool/internal/platform/api"
	"github.com/devtool/devtool/internal/platform/sso"
	"github.com/devtool/devtool/internal/platform/store"
)

// CookieName is the session cookie: the __Host- prefix makes the browser refuse it unless it is
// Secure, host-only and for the whole site.
const CookieName = "__Host-devtool-session"

// PasswordChecker checks a user's name and password and returns the user (server.Server.CheckPassword:
// the store's argon2id check with the lockout kept on the User). store.ErrBadLogin refuses the
// sign-in (the page never says which part was wrong), store.ErrBusy asks to try again shortly (429);
// any other error is the platform's failure.
type PasswordChecker func(ctx context.Context, name, password, remoteAddr string) (*store.User, error)

// Analytics is the platform's analytics (*analytics.Aggregator): the admin page shows its daily
// counts and switches it on and off; nil: the page says none are collected.
type Analytics interface {
	Enabled() bool
	SetEnabled(ctx context.Context, enabled bool) error
	Report(days int) (api.AnalyticsReport, error)
}

// AnalyticsRow is one line of the admin page: the runs of a command by a CLI version on a day
// (every OS and architecture together).
type AnalyticsRow struct {
	Day       string // YYYY-MM-DD
	Command   string
	Version   string
	Successes int64
	Failures  int64
}

// Options configure the platform's UI.
type Options struct {
	Store *store.Store
	Info  api.Info
	Log   *slog.Logger
	// CheckPassword enables the password form of the sign-in page; nil: API tokens (and single
	// sign-on) only.
	CheckPassword PasswordChecker
	// SSO is the OpenID Connect providers offered on the sign-in page (nil: none).
	SSO *sso.Providers
	// ExternalURL is the platform's address as users reach it (single sign-on's redirect address);
	// "" takes the request's Host.
	ExternalURL string
	Analytics   Analytics
	// AllowAccount takes one request of an account's budget (the API's per-account limit:
	// server.Server.AllowAccount); nil: no limit.
	AllowAccount func(user string) bool
	// AllowLogin takes one sign-in attempt of a client address's budget and of the named account's
	// ("" when none is named): the API's login limits (server.Server.AllowLogin), so the sign-in,
	// consent and device pages and the API's logins share them. nil: no limit.
	AllowLogin func(addr, account string) bool
	// NoteUser names the user in the server's request log (server.NoteUser); nil: not named.
	NoteUser func(w http.ResponseWriter, user string)
	// Streams caps the log streams one user may hold open at once (default 8).
	Streams int
	// Instance names this replica in audit records (its pod name).
	Instance string
	Now      func() time.Time
}

// UI is the platform's web UI.
type UI struct {
	o       Options
	mux     *http.ServeMux
	t       *templates
	clients *userClients
	csrf    *http.CrossOriginProtection

	mu      sync.Mutex
	streams map[string]int // open log streams by user

	// closing ends every log stream (CloseStreams, at the server's shutdown).
	closing     context.Context
	closeStream context.CancelFunc
}

// New makes the UI; Handler serves it.
func New(o Options) (*UI, error) {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Streams == 0 {
		o.Streams = 8
	}
	t, err := parseTemplates()
	if err != nil {
		return nil, err
	}
	u := &UI{o: o, mux: http.NewServeMux(), t: t, clients: newUserClients(o.Store),
		csrf: http.NewCrossOriginProtection(), streams: map[string]int{}}
	u.closing, u.closeStream = context.WithCancel(context.Background())
	u.csrf.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.errorPage(w, r, nil, http.StatusForbidden, "This request came from another site and was refused (cross-origin request protection). Use the form on this site.")
	}))
	u.routes()
	return u, nil
}

// Handler serves the UI: security headers, the cross-origin check on every state change, then the
// routes.
func (u *UI) Handler() http.Handler {
	return securityHeaders(u.o.Info.Domain, u.csrf.Handler(u.mux))
}

func (u *UI) routes() {
	m := u.mux
	m.Handle("GET /static/", staticHandler())
	m.HandleFunc("GET /{$}", u.home)
	m.HandleFunc("GET /signin", u.signInPage)
	m.HandleFunc("POST /signin", u.signIn)
	m.HandleFunc("POST /signout", u.signOut)
	m.HandleFunc("GET "+sso.StartPath+"{id}", u.ssoStart)
	m.HandleFunc("GET "+sso.CallbackPath, u.ssoCallback)
	m.HandleFunc("GET "+api.AuthorizePath, u.authorizePage)
	m.HandleFunc("POST "+api.AuthorizePath, u.authorize)
	m.HandleFunc("GET "+api.DevicePagePath, u.authed(u.devicePage))
	m.HandleFunc("POST "+api.DevicePagePath, u.authed(u.deviceDecide))
	m.HandleFunc("GET /namespaces", u.authed(u.namespaces))
	m.HandleFunc("POST /namespaces", u.authed(u.createNamespace))
	m.HandleFunc("GET /namespaces/{ns}", u.member(u.namespace))
	m.HandleFunc("GET /namespaces/{ns}/delete", u.member(u.confirmDelete))
	m.HandleFunc("POST /namespaces/{ns}/delete", u.member(u.deleteNamespace))
	m.HandleFunc("POST /namespaces/{ns}/members", u.member(u.share))
	m.HandleFunc("POST /namespaces/{ns}/members/{user}/remove", u.member(u.unshare))
	m.HandleFunc("GET /namespaces/{ns}/logs", u.member(u.logsPage))
	m.HandleFunc("GET /namespaces/{ns}/logs/stream", u.member(u.logsStream))
	m.HandleFunc("GET /namespaces/{ns}/logs.txt", u.member(u.logsText))
	m.HandleFunc("GET /namespaces/{ns}/environments/{env}", u.member(u.environment))
	m.HandleFunc("GET /namespaces/{ns}/environments/{env}/logs", u.member(u.logsPage))
	m.HandleFunc("GET /namespaces/{ns}/environments/{env}/logs/stream", u.member(u.logsStream))
	m.HandleFunc("GET /namespaces/{ns}/environments/{env}/logs.txt", u.member(u.logsText))
	m.HandleFunc("GET /namespaces/{ns}/secrets", u.member(u.namespaceSecrets))
	m.HandleFunc("POST /namespaces/{ns}/secrets", u.member(u.setNamespaceSecret))
	m.HandleFunc("POST /namespaces/{ns}/secrets/{name}/delete", u.member(u.deleteNamespaceSecret))
	m.HandleFunc("GET /secrets", u.authed(u.secrets))
	m.HandleFunc("POST /secrets", u.authed(u.setSecret))
	m.HandleFunc("POST /secrets/{name}/delete", u.authed(u.deleteSecret))
	m.HandleFunc("GET /tokens", u.authed(u.tokens))
	m.HandleFunc("POST /tokens", u.authed(u.createToken))
	m.HandleFunc("POST /tokens/{id}/revoke", u.authed(u.revokeToken))
	m.HandleFunc("POST /sessions/end-all", u.authed(u.endAllSessions))
	m.HandleFunc("GET /admin", u.admin(u.adminPage))
	m.HandleFunc("POST /admin/users", u.admin(u.createUser))
	m.HandleFunc("POST /admin/users/{name}/delete", u.admin(u.deleteUser))
	m.HandleFunc("POST /admin/limits", u.admin(u.setLimits))
	m.HandleFunc("POST /admin/analytics", u.admin(u.setAnalytics))
	m.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		c, _ := u.caller(r)
		u.errorPage(w, r, c, http.StatusNotFound, "There is no page at "+r.URL.Path+".")
	})
}

// securityHeaders are on every answer: a strict content security policy (csp), no framing, no
// sniffing, no referrer to other sites, no caching of pages.
func securityHeaders(domain string, h http.Handler) http.Handler {
	policy := csp(domain)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Content-Security-Policy", policy)
		hd.Set("X-Frame-Options", "DENY")
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("Referrer-Policy", "same-origin")
		if !strings.HasPrefix(r.URL.Path, "/static/") {
			hd.Set("Cache-Control", "no-store")
		}
		if r.TLS != nil {
			hd.Set("Strict-Transport-Security", "max-age=31536000")
		}
		h.ServeHTTP(w, r)
	})
}

// csp is the pages' content security policy: only this site's own script and stylesheet; forms post
// here, or return to an endpoint under the platform's domain after sign-in, or to formTargets (the
// CLI's loopback address after its consent page).
func csp(domain string, formTargets ...string) string {
	formAction := "'self'"
	if domain != "" {
		formAction += " https://*." + domain + ":*"
	}
	for _, t := range formTargets {
		formAction += " " + t
	}
	return "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
		"form-action " + formAction + "; frame-ancestors 'none'; base-uri 'none'"
}

// --- callers

// caller is the signed-in user of a request.
type caller struct {
	user *store.User
}

// caller reads the request's session (nil when there is none or it is not valid).
func (u *UI) caller(r *http.Request) (*caller, error) {
	ck, err := r.Cookie(CookieName)
	if err != nil || ck.Value == "" {
		return nil, nil
	}
	usr, _, err := u.o.Store.SessionUser(r.Context(), ck.Value)
	if errors.Is(err, store.ErrBadSession) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	return &caller{user: usr}, nil
}

// SessionUser is the signed-in user of a request to the platform (its session cookie), for other
// parts of the platform: the ingress's sign-in for private endpoints.
func (u *UI) SessionUser(r *http.Request) (*store.User, bool) {
	c, err := u.caller(r)
	if err != nil || c == nil {
		return nil, false
	}
	return c.user, true
}

type authedHandler func(w http.ResponseWriter, r *http.Request, c *caller)

// authed serves signed-in users: anyone else is sent to the sign-in page (and back afterwards).
func (u *UI) authed(h authedHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ret := r.URL.RequestURI()
		if r.Method != http.MethodGet {
			ret = "/"
		}
		if c, ok := u.signedIn(w, r, ret); ok {
			h(w, r, c)
		}
	}
}

// signedIn is the request's signed-in user, counted against the account's rate limit. Without one
// (or over the limit) it answers itself, sending a browser with no valid session to the sign-in
// page, which returns to ret afterwards.
func (u *UI) signedIn(w http.ResponseWriter, r *http.Request, ret string) (*caller, bool) {
	c, err := u.caller(r)
	if err != nil {
		u.internal(w, r, nil, err)
		return nil, false
	}
	if c == nil {
		if _, err := r.Cookie(CookieName); err == nil {
			clearSession(w) // ended or expired: the browser may forget it
		}
		http.Redirect(w, r, SignInURL("", ret), http.StatusSeeOther)
		return nil, false
	}
	if u.o.NoteUser != nil {
		u.o.NoteUser(w, c.user.Name)
	}
	if u.o.AllowAccount != nil && !u.o.AllowAccount(c.user.Name) {
		w.Header().Set("Retry-After", "1")
		u.errorPage(w, r, c, http.StatusTooManyRequests, "Too many requests from your account: wait a moment and try again.")
		return nil, false
	}
	return c, true
}

// allowLogin takes one sign-in attempt of the address's and the named account's budgets (the
// API's); over them it answers 429 through render (the page the attempt came from) and says false.
func (u *UI) allowLogin(w http.ResponseWriter, r *http.Request, account string, render func(status int, msg string)) bool {
	if u.o.AllowLogin == nil || u.o.AllowLogin(clientAddr(r), account) {
		return true
	}
	w.Header().Set("Retry-After", "1")
	render(http.StatusTooManyRequests, "Too many sign-in attempts: wait a moment and try again.")
	return false
}

// baseURL is the platform's address as users reach it: Options.ExternalURL, else the request's host.
func (u *UI) baseURL(r *http.Request) string {
	if u.o.ExternalURL != "" {
		return strings.TrimSuffix(u.o.ExternalURL, "/")
	}
	return "https://" + r.Host
}

// member serves a namespace's pages to its members only: for anyone else the namespace does not
// exist (404, as the API answers), whether it exists or not.
func (u *UI) member(h authedHandler) http.HandlerFunc {
	return u.authed(func(w http.ResponseWriter, r *http.Request, c *caller) {
		ns := r.PathValue("ns")
		if u.o.Store.RoleIn(c.user.Name, ns) == "" || u.o.Store.ManagedNamespace(ns) == nil {
			// The caches may not show a namespace made a moment ago (the page after creating
			// it): ask the API server before answering that it does not exist.
			role, err := u.o.Store.LiveRoleIn(r.Context(), c.user.Name, ns)
			if err != nil {
				u.internal(w, r, c, err)
				return
			}
			if role == "" {
				u.errorPage(w, r, c, http.StatusNotFound, "There is no namespace "+ns+" you are a member of.")
				return
			}
		}
		h(w, r, c)
	})
}

// admin serves admins only; to anyone else the page does not exist.
func (u *UI) admin(h authedHandler) http.HandlerFunc {
	return u.authed(func(w http.ResponseWriter, r *http.Request, c *caller) {
		if !c.user.Admin {
			u.errorPage(w, r, c, http.StatusNotFound, "There is no page at "+r.URL.Path+".")
			return
		}
		h(w, r, c)
	})
}

func (u *UI) home(w http.ResponseWriter, r *http.Request) {
	c, err := u.caller(r)
	if err != nil {
		u.internal(w, r, nil, err)
		return
	}
	if c == nil {
		http.Redirect(w, r, "/signin", http.StatusSeeOther)
		return
	}
	http.Redirect(w, r, "/namespaces", http.StatusSeeOther)
}

func clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// openStream counts a log stream of user; false when the user holds the maximum already.
func (u *UI) openStream(user string) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.streams[user] >= u.o.Streams {
		return false
	}
	u.streams[user]++
	return true
}

func (u *UI) streamClosed(user string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.streams[user]--; u.streams[user] <= 0 {
		delete(u.streams, user)
	}
}

// CloseStreams ends every open log stream and refuses new ones (http.Server.RegisterOnShutdown).
func (u *UI) CloseStreams() { u.closeStream() }

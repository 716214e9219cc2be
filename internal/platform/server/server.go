// Package server is the platform's HTTP API (/api/v1, the contract in internal/platform/api): bearer
// authentication against the store's tokens, bounded JSON bodies, JSON errors, rate limits per
// address and per account, and a request log that never holds a token. State lives in
// internal/platform/store (the Kubernetes API); the handlers only check input and map errors.
package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/devtool/devtool/internal/platform/analytics"
	"github.com/devtool/devtool/internal/platform/api"
	"github.com/devtool/devtool/internal/platform/pipeline"
	"github.com/devtool/devtool/internal/platform/pki"
	"github.com/devtool/devtool/internal/platform/preview"
	"github.com/devtool/devtool/internal/platform/sso"
	"github.com/devtool/devtool/internal/platform/store"
)

// MaxBody bounds every request body.
const MaxBody = 1 << 20

// Options configure the server.
type Options struct {
	Store *store.Store
	Info  api.Info
	Log   *slog.Logger
	// Rate limits per replica: requests per second and burst, per client address and per account.
	AddrRate, AccountRate   rate.Limit
	AddrBurst, AccountBurst int
	// Login limits per replica, per client address and per account named: every way to sign in,
	// the API's (password, OAuth endpoints) and the web UI's (its sign-in, consent and device
	// pages, through AllowLogin). Stricter than the limits above, which apply too.
	LoginAddrRate, LoginAccountRate   rate.Limit
	LoginAddrBurst, LoginAccountBurst int
	Now                               func() time.Time
	Instance                          string // this replica (its pod name), in audit records
	// ExternalURL is the platform's address as users reach it (the device login's page address);
	// "" takes the request's Host.
	ExternalURL string
	// Analytics counts the CLI's analytics events (nil: the platform accepts none).
	Analytics *analytics.Aggregator
	// Web serves every path outside the API (/api/) and /healthz: the web UI
	// (internal/platform/web), behind the same per-address limit and request log. Its pages are
	// where a person signs in, so the CLI's browser and device logins and single sign-on need it:
	// nil, /api/v1/info offers password and token logins only, and other paths answer JSON 404s.
	Web http.Handler
	// SSO lists the OpenID Connect providers the web UI's sign-in page offers, for /api/v1/info.
	SSO *sso.Providers
	// BuilderCA signs users' client certificates for the hosted BuildKit (nil, or Info.Builder
	// empty: no build service, POST /builder/credentials answers 404).
	BuilderCA *pki.CA
	// Pipelines runs pipelines and Previews previews (nil: their routes answer 503).
	Pipelines *pipeline.Manager
	Previews  *preview.Manager
	// WakeKey authenticates the ingress's requests to wake a sleeping preview (nil: refused).
	WakeKey []byte
}

// Server serves the API.
type Server struct {
	o                         Options
	mux                       *http.ServeMux
	addrs                     *limiters
	accounts                  *limiters
	loginAddrs, loginAccounts *limiters
	routes                    []string
	devicePolls               devicePolls
}

// New makes the server; Handler serves it.
func New(o Options) *Server {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.AddrRate == 0 {
		o.AddrRate, o.AddrBurst = 50, 100
	}
	if o.AccountRate == 0 {
		o.AccountRate, o.AccountBurst = 20, 40
	}
	if o.LoginAddrRate == 0 {
		o.LoginAddrRate, o.LoginAddrBurst = 20, 100
	}
	if o.LoginAccountRate == 0 {
		o.LoginAccountRate, o.LoginAccountBurst = 1, 10
	}
	s := &Server{o: o, mux: http.NewServeMux(),
		addrs: newLimiters(o.AddrRate, o.AddrBurst, o.Now), accounts: newLimiters(o.AccountRate, o.AccountBurst, o.Now),
		loginAddrs: newLimiters(o.LoginAddrRate, o.LoginAddrBurst, o.Now), loginAccounts: newLimiters(o.LoginAccountRate, o.LoginAccountBurst, o.Now)}
	s.devicePolls.now = o.Now
	p := api.Prefix
	s.mux.HandleFunc("GET /healthz", s.healthz)
	s.routes = append(s.routes, "GET "+p+"/info", "POST "+p+"/login", "POST "+api.TokenPath, "POST "+api.DeviceAuthPath)
	s.mux.HandleFunc("GET "+p+"/info", s.info)
	s.handle("GET "+p+"/me", s.me)
	s.mux.HandleFunc("POST "+p+"/login", s.login)
	s.handle("PUT "+p+"/me/password", s.changePassword)
	s.handle("PUT "+p+"/users/{name}/password", s.admin(s.resetPassword))
	s.handle("POST "+p+"/users/{name}/unlock", s.admin(s.unlock))
	s.mux.HandleFunc("POST "+api.TokenPath, s.token)
	s.mux.HandleFunc("POST "+api.DeviceAuthPath, s.deviceAuthorize)
	s.handle("POST "+p+"/users", s.admin(s.createUser))
	s.handle("GET "+p+"/users", s.admin(s.listUsers))
	s.handle("DELETE "+p+"/users/{name}", s.admin(s.deleteUser))
	s.handle("POST "+p+"/tokens", s.createToken)
	s.handle("GET "+p+"/tokens", s.listTokens)
	s.handle("DELETE "+p+"/tokens/{id}", s.deleteToken)
	s.handle("POST "+p+"/namespaces", s.createNamespace)
	s.handle("GET "+p+"/namespaces", s.listNamespaces)
	s.handle("GET "+p+"/namespaces/{name}", s.getNamespace)
	s.handle("DELETE "+p+"/namespaces/{name}", s.deleteNamespace)
	s.handle("PUT "+p+"/namespaces/{name}/members/{user}", s.share)
	s.handle("DELETE "+p+"/namespaces/{name}/members/{user}", s.unshare)
	s.handle("POST "+p+"/kubetoken", s.kubeToken)
	s.handle("POST "+p+"/builder/credentials", s.builderCredentials)
	s.handle("GET "+p+"/secrets", s.listSecrets)
	s.handle("GET "+p+"/secrets/values", s.resolveSecrets)
	s.handle("PUT "+p+"/secrets/{name}", s.putSecret)
	s.handle("DELETE "+p+"/secrets/{name}", s.deleteSecret)
	s.handle("POST "+p+"/analytics", s.postAnalytics)
	s.handle("GET "+p+"/analytics", s.admin(s.analyticsReport))
	s.handle("GET "+p+"/analytics/settings", s.analyticsSettings)
	s.handle("PUT "+p+"/analytics/settings", s.admin(s.setAnalyticsSettings))
	s.pipelineRoutes()
	s.previewRoutes()
	notFound := func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "not_found", "no route "+r.Method+" "+r.URL.Path, "")
	}
	s.mux.HandleFunc(p+"/", notFound)
	if o.Web != nil {
		s.mux.Handle("/", o.Web)
	} else {
		s.mux.HandleFunc("/", notFound)
	}
	return s
}

// AllowAccount takes one request of the account's budget (the limit every API route applies), so
// the web UI shares it: false means answer 429.
func (s *Server) AllowAccount(name string) bool { return s.accounts.allow(name) }

// NoteUser names the signed-in user in the request log of a response Handler serves (the web UI
// calls it once it knows the session's user).
func NoteUser(w http.ResponseWriter, name string) {
	for {
		if rec, ok := w.(*recorder); ok {
			rec.user = name
			return
		}
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			return
		}
		w = u.Unwrap()
	}
}

// Handler is the whole API with the request log and the per-address limit around it.
func (s *Server) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := s.o.Now()
		rec := &recorder{ResponseWriter: w, status: http.StatusOK}
		if r.URL.Path == "/healthz" { // the kubelet's probe: neither limited nor logged
			s.mux.ServeHTTP(w, r)
			return
		}
		if !s.addrs.allow(clientAddr(r)) {
			tooMany(rec)
		} else {
			s.mux.ServeHTTP(rec, r)
		}
		// Never the Authorization header, never a body: the path holds no secret (token ids are not).
		s.o.Log.Info("request", "method", r.Method, "path", r.URL.Path, "status", rec.status,
			"user", rec.user, "remote", clientAddr(r), "duration_ms", s.o.Now().Sub(start).Milliseconds())
	})
}

type recorder struct {
	http.ResponseWriter
	status int
	user   string
}

func (r *recorder) WriteHeader(code int) { r.status = code; r.ResponseWriter.WriteHeader(code) }

// Unwrap lets http.ResponseController reach the connection (flushes and deadlines of streamed
// answers: the web UI's log streams, pipeline logs).
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

func clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

func tooMany(w http.ResponseWriter) {
	w.Header().Set("Retry-After", "1")
	writeError(w, http.StatusTooManyRequests, "rate_limited", "too many requests: retry later", "")
}

// caller is the authenticated request's user and token.
type caller struct {
	user  *store.User
	token *store.AccessToken
}

type handler func(w http.ResponseWriter, r *http.Request, c caller)

// Routes lists the API's method and path patterns (for tests that must cover every route).
func (s *Server) Routes() []string { return append([]string(nil), s.routes...) }

// handle registers an authenticated route.
func (s *Server) handle(pattern string, h handler) {
	s.routes = append(s.routes, pattern)
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Get("Authorization")
		bearer, ok := strings.CutPrefix(auth, "Bearer ")
		if !ok || bearer == "" {
			w.Header().Set("WWW-Authenticate", `Bearer realm="devtool"`)
			writeError(w, http.StatusUnauthorized, "unauthorized", "no token: send Authorization: Bearer <token>", "")
			return
		}
		u, t, err := s.o.Store.Authenticate(r.Context(), strings.TrimSpace(bearer))
		if errors.Is(err, store.ErrBadToken) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="devtool", error="invalid_token"`)
			writeError(w, http.StatusUnauthorized, "unauthorized", "invalid, revoked or expired token", "")
			return
		} else if err != nil {
			s.internal(w, r, err)
			return
		}
		if rec, ok := w.(*recorder); ok {
			rec.user = u.Name
		}
		if !s.accounts.allow(u.Name) {
			tooMany(w)
			return
		}
		h(w, r, caller{user: u, token: t})
	})
}

func (s *Server) admin(h handler) handler {
	return func(w http.ResponseWriter, r *http.Request, c caller) {
		if !c.user.Admin {
			writeError(w, http.StatusForbidden, "forbidden", "only an admin may do this", "")
			return
		}
		h(w, r, c)
	}
}

// --- JSON in and out

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, code, msg, field string) {
	writeJSON(w, status, api.Error{Error: api.ErrorBody{Code: code, Message: msg, Field: field}})
}

// decodeError is a request body that cannot be read as the expected JSON.
type decodeError struct {
	status      int
	field, what string
}

func (e *decodeError) Error() string { return e.what }

// Decode reads one JSON value of at most MaxBody bytes from body into v. Unknown fields are
// ignored (a newer CLI may send them); anything after the value is refused.
func Decode(body io.Reader, v any) error {
	dec := json.NewDecoder(io.LimitReader(body, MaxBody+1))
	if err := dec.Decode(v); err != nil {
		var mbe *http.MaxBytesError
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &mbe):
			return &decodeError{status: http.StatusRequestEntityTooLarge, what: fmt.Sprintf("request body over %d bytes", MaxBody)}
		case errors.As(err, &te):
			return &decodeError{status: http.StatusBadRequest, field: te.Field, what: fmt.Sprintf("%s: expected %s, found a JSON %s", te.Field, te.Type, te.Value)}
		case errors.Is(err, io.EOF):
			return &decodeError{status: http.StatusBadRequest, what: "empty body: expected a JSON object"}
		}
		return &decodeError{status: http.StatusBadRequest, what: "malformed JSON: " + err.Error()}
	}
	if dec.More() {
		return &decodeError{status: http.StatusBadRequest, what: "one JSON object expected, found more after it"}
	}
	return nil
}

// read decodes the request body into v, answering the error itself (false) when it cannot.
func (s *Server) read(w http.ResponseWriter, r *http.Request, v any) bool {
	r.Body = http.MaxBytesReader(w, r.Body, MaxBody)
	err := Decode(r.Body, v)
	var de *decodeError
	if errors.As(err, &de) {
		code := "bad_request"
		if de.status == http.StatusRequestEntityTooLarge {
			code = "too_large"
		}
		writeError(w, de.status, code, de.what, de.field)
		return false
	}
	return err == nil
}

// fail maps a store error to its status.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	var in *store.InputError
	switch {
	case errors.As(err, &in):
		writeError(w, http.StatusBadRequest, "bad_request", in.Error(), in.Field)
	case errors.Is(err, store.ErrNotFound):
		writeError(w, http.StatusNotFound, "not_found", err.Error(), "")
	case errors.Is(err, store.ErrForbidden):
		writeError(w, http.StatusForbidden, "forbidden", err.Error(), "")
	case errors.Is(err, store.ErrConflict):
		writeError(w, http.StatusConflict, "conflict", err.Error(), "")
	case errors.Is(err, context.Canceled):
		// the client went away: nothing to answer
	default:
		s.internal(w, r, err)
	}
}

func (s *Server) internal(w http.ResponseWriter, r *http.Request, err error) {
	s.o.Log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	writeError(w, http.StatusInternalServerError, "internal", "internal error: see the platform's log", "")
}

// audit records a change (or its refusal: 4xx other than 404, which must not reveal names, and 5xx)
// as an Event on the object; a failure to record is logged, never the caller's problem.
func (s *Server) audit(r *http.Request, c caller, a store.Audit) {
	if a.Err != nil && errors.Is(a.Err, store.ErrNotFound) {
		return
	}
	a.Actor = c.user.Name
	if err := s.o.Store.Record(r.Context(), a, s.o.Instance); err != nil {
		s.o.Log.Warn("audit record not written", "action", a.Action, "object", a.Kind+"/"+a.Name, "err", err)
	}
}

// --- limits

type limiters struct {
	rate  rate.Limit
	burst int
	now   func() time.Time
	mu    sync.Mutex
	m     map[string]*entry
	swept time.Time
}

type entry struct {
	l    *rate.Limiter
	seen time.Time
}

func newLimiters(r rate.Limit, burst int, now func() time.Time) *limiters {
	return &limiters{rate: r, burst: burst, now: now, m: map[string]*entry{}}
}

// allow takes one request of key's budget. Entries idle for 10 minutes are dropped once a minute,
// so the map stays as small as the set of recent clients.
func (l *limiters) allow(key string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	if now.Sub(l.swept) > time.Minute {
		for k, e := range l.m {
			if now.Sub(e.seen) > 10*time.Minute {
				delete(l.m, k)
			}
		}
		l.swept = now
	}
	e := l.m[key]
	if e == nil {
		e = &entry{l: rate.NewLimiter(l.rate, l.burst)}
		l.m[key] = e
	}
	e.seen = now
	return e.l.AllowN(now, 1)
}

// --- routes

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	if !s.o.Store.Synced() {
		writeError(w, http.StatusServiceUnavailable, "unavailable", "caches not synced yet", "")
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (s *Server) info(w http.ResponseWriter, r *http.Request) {
	info := s.o.Info
	info.Analytics = s.analyticsEnabled()
	info.Login = &api.LoginMethods{Password: true}
	if s.o.Web != nil { // the web UI's pages sign people in
		info.Login.Browser, info.Login.Device, info.Login.Providers = true, true, s.o.SSO.List(r.Context())
	}
	writeJSON(w, http.StatusOK, info)
}

func (s *Server) apiUser(u *store.User) api.User {
	out := api.User{Name: u.Name, Admin: u.Admin, Created: u.Created.UTC()}
	if ns := s.o.Store.ManagedNamespace(u.Name); ns != nil && ns.Labels[store.LabelPersonal] == u.Name {
		out.Namespace = u.Name
	}
	return out
}

func (s *Server) me(w http.ResponseWriter, r *http.Request, c caller) {
	out := s.apiUser(c.user)
	userDetails(&out, c.user)
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) createUser(w http.ResponseWriter, r *http.Request, c caller) {
	var req api.CreateUserRequest
	if !s.read(w, r, &req) {
		return
	}
	u, tok, err := s.o.Store.CreateUser(r.Context(), req.Name, req.Admin, req.Password)
	s.audit(r, c, store.Audit{Action: "create", Kind: "User", Name: req.Name, Detail: fmt.Sprintf("admin=%v", req.Admin), Err: err})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, api.CreateUserResponse{Name: u.Name, Token: tok})
}

func (s *Server) listUsers(w http.ResponseWriter, r *http.Request, c caller) {
	us, err := s.o.Store.Users()
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := api.UserList{Items: []api.User{}}
	for _, u := range us {
		a := s.apiUser(u)
		userDetails(&a, u)
		out.Items = append(out.Items, a)
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) deleteUser(w http.ResponseWriter, r *http.Request, c caller) {
	name := r.PathValue("name")
	if name == c.user.Name {
		writeError(w, http.StatusConflict, "conflict", "you cannot remove your own account", "")
		return
	}
	err := s.o.Store.DeleteUser(r.Context(), name)
	s.audit(r, c, store.Audit{Action: "delete", Kind: "User", Name: name, Err: err})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func apiToken(t *store.AccessToken) api.Token {
	out := api.Token{ID: t.ID, Name: t.Name, Owner: t.Owner, Created: t.Created.UTC(), Expires: t.Expires.UTC()}
	if !t.LastUsed.IsZero() {
		lu := t.LastUsed.UTC()
		out.LastUsed = &lu
	}
	return out
}

func (s *Server) createToken(w http.ResponseWriter, r *http.Request, c caller) {
	var req api.CreateTokenRequest
	if !s.read(w, r, &req) {
		return
	}
	if req.ExpiresInSeconds < 0 || req.ExpiresInSeconds > int64(store.MaxTokenLifetime/time.Second) {
		writeError(w, http.StatusBadRequest, "bad_request", "expiresInSeconds: between 0 (the default, 90 days) and 31536000 (one year)", "expiresInSeconds")
		return
	}
	t, tok, err := s.o.Store.CreateToken(r.Context(), c.user.Name, req.Name, time.Duration(req.ExpiresInSeconds)*time.Second)
	if err != nil {
		s.audit(r, c, store.Audit{Action: "create", Kind: "AccessToken", Name: "(new)", Err: err})
		s.fail(w, r, err)
		return
	}
	s.audit(r, c, store.Audit{Action: "create", Kind: "AccessToken", Name: t.ID, Detail: "name " + t.Name})
	out := apiToken(t)
	out.Token = tok
	writeJSON(w, http.StatusCreated, out)
}

func (s *Server) listTokens(w http.ResponseWriter, r *http.Request, c caller) {
	ts, err := s.o.Store.Tokens(c.user.Name)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := api.TokenList{Items: []api.Token{}}
	for _, t := range ts {
		out.Items = append(out.Items, apiToken(t))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) deleteToken(w http.ResponseWriter, r *http.Request, c caller) {
	err := s.o.Store.DeleteToken(r.Context(), c.user.Name, r.PathValue("id"))
	s.audit(r, c, store.Audit{Action: "revoke", Kind: "AccessToken", Name: r.PathValue("id"), Err: err})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) apiNamespace(name, role, caller string, members bool) api.Namespace {
	out := api.Namespace{Name: name, Role: role, Status: "Active"}
	if ns := s.o.Store.ManagedNamespace(name); ns != nil {
		if ns.DeletionTimestamp != nil {
			out.Status = "Deleting"
		}
		out.Personal = ns.Labels[store.LabelPersonal] != ""
	}
	if members {
		ms, _ := s.o.Store.Members(name)
		for _, m := range ms {
			out.Members = append(out.Members, api.Member{User: m.User, Role: m.Role})
		}
	}
	return out
}

func (s *Server) createNamespace(w http.ResponseWriter, r *http.Request, c caller) {
	var req api.CreateNamespaceRequest
	if !s.read(w, r, &req) {
		return
	}
	created, err := s.o.Store.CreateNamespace(r.Context(), c.user.Name, req.Name)
	if created || err != nil {
		s.audit(r, c, store.Audit{Action: "create", Kind: "Namespace", Name: req.Name, Namespace: auditNS(req.Name, created), Err: err})
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	out := api.Namespace{Name: req.Name, Status: "Active", Role: api.RoleOwner,
		Members: []api.Member{{User: c.user.Name, Role: api.RoleOwner}}}
	writeJSON(w, status, out)
}

func (s *Server) listNamespaces(w http.ResponseWriter, r *http.Request, c caller) {
	ms, err := s.o.Store.MembershipsOf(c.user.Name)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := api.NamespaceList{Items: []api.Namespace{}}
	for _, m := range ms {
		if s.o.Store.ManagedNamespace(m.Namespace) == nil {
			continue // a binding left in a namespace the platform does not manage
		}
		out.Items = append(out.Items, s.apiNamespace(m.Namespace, m.Role, c.user.Name, false))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) getNamespace(w http.ResponseWriter, r *http.Request, c caller) {
	name := r.PathValue("name")
	role := s.o.Store.RoleIn(c.user.Name, name)
	if role == "" || s.o.Store.ManagedNamespace(name) == nil {
		writeError(w, http.StatusNotFound, "not_found", fmt.Sprintf("namespace %q: not found", name), "")
		return
	}
	writeJSON(w, http.StatusOK, s.apiNamespace(name, role, c.user.Name, true))
}

func (s *Server) deleteNamespace(w http.ResponseWriter, r *http.Request, c caller) {
	err := s.o.Store.DeleteNamespace(r.Context(), c.user.Name, r.PathValue("name"))
	s.audit(r, c, store.Audit{Action: "delete", Kind: "Namespace", Name: r.PathValue("name"), Err: err})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusAccepted, api.Namespace{Name: r.PathValue("name"), Status: "Deleting", Role: api.RoleOwner})
}

func (s *Server) share(w http.ResponseWriter, r *http.Request, c caller) {
	var req api.ShareRequest
	if !s.read(w, r, &req) {
		return
	}
	err := s.o.Store.Share(r.Context(), c.user.Name, r.PathValue("name"), r.PathValue("user"), req.Role)
	s.audit(r, c, store.Audit{Action: "share", Kind: "Namespace", Name: r.PathValue("name"), Namespace: r.PathValue("name"),
		Detail: r.PathValue("user") + " as " + req.Role, Err: err})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, api.Member{User: r.PathValue("user"), Role: req.Role})
}

func (s *Server) unshare(w http.ResponseWriter, r *http.Request, c caller) {
	err := s.o.Store.Unshare(r.Context(), c.user.Name, r.PathValue("name"), r.PathValue("user"))
	s.audit(r, c, store.Audit{Action: "unshare", Kind: "Namespace", Name: r.PathValue("name"), Namespace: r.PathValue("name"),
		Detail: r.PathValue("user"), Err: err})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) kubeToken(w http.ResponseWriter, r *http.Request, c caller) {
	var req api.KubeTokenRequest
	if r.ContentLength != 0 && !s.read(w, r, &req) {
		return
	}
	tr, err := s.o.Store.KubeToken(r.Context(), c.user.Name, req.ExpirationSeconds)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, api.KubeToken{Token: tr.Status.Token, ExpirationTimestamp: tr.Status.ExpirationTimestamp.UTC(),
		APIServer: s.o.Info.APIServer, APIServerCA: s.o.Info.APIServerCA})
}

// secretScope reads ?scope= (default user) and ?namespace= (additive to the contract: the contract's
// PUT and DELETE address the caller's own secrets, which stay the default).
func secretScope(r *http.Request) store.SecretScope {
	return store.SecretScope{Scope: r.URL.Query().Get("scope"), Namespace: r.URL.Query().Get("namespace")}
}

func (s *Server) putSecret(w http.ResponseWriter, r *http.Request, c caller) {
	var req api.SecretValue
	if !s.read(w, r, &req) {
		return
	}
	err := s.o.Store.SetSecret(r.Context(), c.user, secretScope(r), r.PathValue("name"), req.Value)
	s.audit(r, c, store.Audit{Action: "set-secret", Kind: "Secret", Name: r.PathValue("name"), Detail: scopeDetail(r), Err: err})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	sc := secretScope(r).Scope
	if sc == "" {
		sc = api.ScopeUser
	}
	writeJSON(w, http.StatusOK, api.SecretInfo{Name: r.PathValue("name"), Scope: sc})
}

func (s *Server) deleteSecret(w http.ResponseWriter, r *http.Request, c caller) {
	err := s.o.Store.DeleteSecret(r.Context(), c.user, secretScope(r), r.PathValue("name"))
	s.audit(r, c, store.Audit{Action: "delete-secret", Kind: "Secret", Name: r.PathValue("name"), Detail: scopeDetail(r), Err: err})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) listSecrets(w http.ResponseWriter, r *http.Request, c caller) {
	items, err := s.o.Store.Secrets(r.Context(), c.user, r.URL.Query().Get("namespace"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if items == nil {
		items = []api.SecretInfo{}
	}
	writeJSON(w, http.StatusOK, api.SecretList{Items: items})
}

func (s *Server) resolveSecrets(w http.ResponseWriter, r *http.Request, c caller) {
	vals, err := s.o.Store.ResolveSecrets(r.Context(), c.user, r.URL.Query().Get("namespace"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, api.ResolvedSecrets{Values: vals})
}

// auditNS is where a namespace's creation is recorded: in it when it was made, else (refused) in the
// platform's namespace.
func auditNS(name string, created bool) string {
	if created {
		return name
	}
	return ""
}

func scopeDetail(r *http.Request) string {
	sc := secretScope(r)
	switch sc.Scope {
	case "":
		return "scope user"
	case api.ScopeNamespace:
		return "scope namespace " + sc.Namespace
	}
	return "scope " + sc.Scope
}

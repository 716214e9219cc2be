package server

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devtool/devtool/internal/platform/api"
	"github.com/devtool/devtool/internal/platform/store"
)

// OIDCSecret configures sign-in through an OpenID Connect provider: a Secret in the platform's
// namespace (written by `devtool-platform install --oidc-...`, or by hand), re-read every few seconds
// so a change needs no restart. Keys: issuer, clientID, clientSecret, name (the button's text),
// scopes (default "openid profile email"), usernameClaim (default preferred_username, else the
// e-mail's local part), groupsClaim (default groups), adminGroups (comma-separated: members are
// admins), signUp ("false": only existing linked accounts sign in; default true, an account is
// made on first login).
const OIDCSecret = "devtool-platform-oidc"

// OIDCProviderID is the provider's id in /api/v1/info and its sign-in path.
const OIDCProviderID = "oidc"

const (
	oidcCookie     = "devtool_oidc"
	oidcStateLife  = 10 * time.Minute
	oidcConfigLife = 5 * time.Second
)

// OIDCConfig is the provider's configuration.
type OIDCConfig struct {
	Issuer, ClientID, ClientSecret, Name string
	Scopes                               []string
	UsernameClaim, GroupsClaim           string
	AdminGroups                          []string
	SignUp                               bool
}

// ParseOIDCConfig reads the Secret's data; nil when it names no issuer.
func ParseOIDCConfig(data map[string][]byte) (*OIDCConfig, error) {
	get := func(k string) string { return strings.TrimSpace(string(data[k])) }
	if get("issuer") == "" {
		return nil, nil
	}
	c := &OIDCConfig{Issuer: get("issuer"), ClientID: get("clientID"), ClientSecret: get("clientSecret"), Name: get("name"),
		UsernameClaim: get("usernameClaim"), GroupsClaim: get("groupsClaim"), SignUp: get("signUp") != "false"}
	if u, err := url.Parse(c.Issuer); err != nil || u.Host == "" || u.Scheme != "https" && u.Scheme != "http" {
		return nil, fmt.Errorf("OIDC issuer %q: expected an http(s) URL", c.Issuer)
	}
	if c.ClientID == "" {
		return nil, errors.New("OIDC: clientID is required")
	}
	if c.Name == "" {
		c.Name = "single sign-on"
	}
	c.Scopes = strings.Fields(get("scopes"))
	if len(c.Scopes) == 0 {
		c.Scopes = []string{oidc.ScopeOpenID, "profile", "email"}
	}
	if !slices.Contains(c.Scopes, oidc.ScopeOpenID) {
		c.Scopes = append([]string{oidc.ScopeOpenID}, c.Scopes...)
	}
	if c.UsernameClaim == "" {
		c.UsernameClaim = "preferred_username"
	}
	if c.GroupsClaim == "" {
		c.GroupsClaim = "groups"
	}
	for _, g := range strings.Split(get("adminGroups"), ",") {
		if g = strings.TrimSpace(g); g != "" {
			c.AdminGroups = append(c.AdminGroups, g)
		}
	}
	return c, nil
}

type oidcProvider struct {
	cfg      *OIDCConfig
	provider *oidc.Provider
	verifier *oidc.IDTokenVerifier
}

type oidcCache struct {
	mu      sync.Mutex
	rv      string
	fetched time.Time
	cfg     *OIDCConfig
	p       *oidcProvider
}

// oidcConfig reads the configuration (cached a few seconds); nil when none is set.
func (s *Server) oidcConfig(ctx context.Context) (*OIDCConfig, string, error) {
	c := &s.oidc
	c.mu.Lock()
	defer c.mu.Unlock()
	if time.Since(c.fetched) < oidcConfigLife {
		return c.cfg, c.rv, nil
	}
	sec, err := s.o.Store.Kube.CoreV1().Secrets(s.o.Store.Namespace).Get(ctx, OIDCSecret, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		c.cfg, c.rv, c.p, c.fetched = nil, "", nil, time.Now()
		return nil, "", nil
	} else if err != nil {
		return nil, "", err
	}
	if sec.ResourceVersion != c.rv {
		cfg, err := ParseOIDCConfig(sec.Data)
		if err != nil {
			return nil, "", fmt.Errorf("Secret %s/%s: %w", s.o.Store.Namespace, OIDCSecret, err)
		}
		c.cfg, c.rv, c.p = cfg, sec.ResourceVersion, nil
	}
	c.fetched = time.Now()
	return c.cfg, c.rv, nil
}

// oidcProviderFor discovers the provider (once per configuration).
func (s *Server) oidcProviderFor(ctx context.Context) (*oidcProvider, error) {
	cfg, rv, err := s.oidcConfig(ctx)
	if err != nil || cfg == nil {
		return nil, err
	}
	s.oidc.mu.Lock()
	p := s.oidc.p
	s.oidc.mu.Unlock()
	if p != nil && p.cfg == cfg {
		return p, nil
	}
	dctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	prov, err := oidc.NewProvider(oidc.ClientContext(dctx, s.httpClient()), cfg.Issuer)
	if err != nil {
		return nil, fmt.Errorf("discovering the OIDC provider %s: %w", cfg.Issuer, err)
	}
	p = &oidcProvider{cfg: cfg, provider: prov, verifier: prov.Verifier(&oidc.Config{ClientID: cfg.ClientID})}
	s.oidc.mu.Lock()
	if s.oidc.rv == rv {
		s.oidc.p = p
	}
	s.oidc.mu.Unlock()
	return p, nil
}

func (s *Server) httpClient() *http.Client {
	return &http.Client{Timeout: 15 * time.Second}
}

func (p *oidcProvider) oauth(redirect string) *oauth2.Config {
	return &oauth2.Config{ClientID: p.cfg.ClientID, ClientSecret: p.cfg.ClientSecret, Endpoint: p.provider.Endpoint(),
		RedirectURL: redirect, Scopes: p.cfg.Scopes}
}

// providers lists the sign-in providers for the page and /api/v1/info.
func (s *Server) providers(ctx context.Context) []api.LoginProvider {
	cfg, _, err := s.oidcConfig(ctx)
	if err != nil {
		s.o.Log.Warn("OIDC configuration", "err", err)
		return nil
	}
	if cfg == nil {
		return nil
	}
	return []api.LoginProvider{{ID: OIDCProviderID, Name: cfg.Name}}
}

type oidcState struct {
	Return   string `json:"r"`
	Nonce    string `json:"n"`
	Verifier string `json:"v"`
	Binding  string `json:"b"`
}

// oidcStart sends the browser to the provider. The state is signed (any replica takes the
// callback) and bound to this browser by a cookie, so a login cannot be planted in another's browser.
func (s *Server) oidcStart(w http.ResponseWriter, r *http.Request) {
	if r.PathValue("id") != OIDCProviderID {
		s.message(w, http.StatusNotFound, "Sign in", "No such sign-in provider.")
		return
	}
	if !s.loginAllowed(w, r, "") {
		return
	}
	p, err := s.oidcProviderFor(r.Context())
	if err != nil || p == nil {
		if err != nil {
			s.o.Log.Error("OIDC", "err", err)
		}
		s.message(w, http.StatusServiceUnavailable, "Sign in", "Single sign-on is not available now: see the platform's log.")
		return
	}
	st := oidcState{Return: safeReturn(r.URL.Query().Get("return")), Nonce: rand32(), Verifier: oauth2.GenerateVerifier(), Binding: rand32()}
	body, _ := json.Marshal(st)
	state, err := s.o.Store.Sign(r.Context(), "oidc-state", body, s.o.Now().Add(oidcStateLife))
	if err != nil {
		s.internalPage(w, err)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: oidcCookie, Value: st.Binding, Path: "/login/oidc/", MaxAge: int(oidcStateLife.Seconds()),
		Secure: true, HttpOnly: true, SameSite: http.SameSiteLaxMode})
	u := p.oauth(s.baseURL(r)+"/login/oidc/callback").AuthCodeURL(state, oidc.Nonce(st.Nonce), oauth2.S256ChallengeOption(st.Verifier))
	http.Redirect(w, r, u, http.StatusSeeOther)
}

func (s *Server) oidcCallback(w http.ResponseWriter, r *http.Request) {
	if !s.loginAllowed(w, r, "") {
		return
	}
	q := r.URL.Query()
	body, err := s.o.Store.Verify(r.Context(), "oidc-state", q.Get("state"))
	var st oidcState
	if err != nil || json.Unmarshal(body, &st) != nil {
		s.message(w, http.StatusBadRequest, "Sign in", "The sign-in came back with an invalid or expired state: start again.")
		return
	}
	c, err := r.Cookie(oidcCookie)
	if err != nil || c.Value == "" || c.Value != st.Binding {
		s.message(w, http.StatusBadRequest, "Sign in", "This sign-in was not started in this browser: start again.")
		return
	}
	http.SetCookie(w, &http.Cookie{Name: oidcCookie, Value: "", Path: "/login/oidc/", MaxAge: -1, Secure: true, HttpOnly: true, SameSite: http.SameSiteLaxMode})
	if e := q.Get("error"); e != "" {
		s.message(w, http.StatusUnauthorized, "Sign in", "The provider refused the sign-in: "+printableName(e+" "+q.Get("error_description"), 200))
		return
	}
	p, err := s.oidcProviderFor(r.Context())
	if err != nil || p == nil {
		s.message(w, http.StatusServiceUnavailable, "Sign in", "Single sign-on is not available now: see the platform's log.")
		return
	}
	ctx := oidc.ClientContext(r.Context(), s.httpClient())
	tok, err := p.oauth(s.baseURL(r)+"/login/oidc/callback").Exchange(ctx, q.Get("code"), oauth2.VerifierOption(st.Verifier))
	if err != nil {
		s.o.Log.Info("OIDC code exchange failed", "err", err)
		s.message(w, http.StatusUnauthorized, "Sign in", "The provider did not confirm the sign-in: start again.")
		return
	}
	raw, _ := tok.Extra("id_token").(string)
	idt, err := p.verifier.Verify(ctx, raw)
	if err != nil || idt.Nonce != st.Nonce {
		s.o.Log.Info("OIDC ID token refused", "err", err)
		s.message(w, http.StatusUnauthorized, "Sign in", "The provider's ID token was not valid: start again.")
		return
	}
	var claims map[string]any
	if err := idt.Claims(&claims); err != nil {
		s.message(w, http.StatusUnauthorized, "Sign in", "The provider's ID token could not be read.")
		return
	}
	u, err := s.oidcUser(r.Context(), p.cfg, idt.Issuer+" "+idt.Subject, claims)
	if err != nil {
		s.o.Log.Info("OIDC sign-in refused", "subject", idt.Subject, "err", err)
		msg := "The platform refused the sign-in."
		var ie *store.InputError
		if errors.As(err, &ie) || errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrForbidden) {
			msg += " " + err.Error()
		}
		s.message(w, http.StatusForbidden, "Sign in", msg)
		return
	}
	if err := StartSession(r.Context(), s.o.Store, w, u.Name); err != nil {
		s.internalPage(w, err)
		return
	}
	s.audit(r, caller{user: u}, store.Audit{Action: "login", Kind: "User", Name: u.Name, Detail: "OpenID Connect, browser session"})
	http.Redirect(w, r, st.Return, http.StatusSeeOther)
}

var notName = regexp.MustCompile(`[^a-z0-9-]+`)

// OIDCUserName makes a platform user name from a claim: lower case, other characters as '-',
// trimmed to 40.
func OIDCUserName(v string) string {
	if at := strings.IndexByte(v, '@'); at >= 0 {
		v = v[:at]
	}
	n := notName.ReplaceAllString(strings.ToLower(v), "-")
	if len(n) > 40 {
		n = n[:40]
	}
	return strings.Trim(n, "-")
}

// oidcUser finds, or on first login makes, the account of an OpenID Connect identity; admin follows
// the admin groups when they are configured.
func (s *Server) oidcUser(ctx context.Context, cfg *OIDCConfig, subject string, claims map[string]any) (*store.User, error) {
	str := func(k string) string { v, _ := claims[k].(string); return v }
	name := OIDCUserName(str(cfg.UsernameClaim))
	if name == "" {
		name = OIDCUserName(str("email"))
	}
	if why := store.ValidUserName(name); why != "" {
		return nil, &store.InputError{Field: cfg.UsernameClaim, Reason: fmt.Sprintf("the provider's user name %q cannot name an account: %s", name, why)}
	}
	admin := false
	if gs, ok := claims[cfg.GroupsClaim].([]any); ok {
		for _, g := range gs {
			if gstr, _ := g.(string); slices.Contains(cfg.AdminGroups, gstr) {
				admin = true
			}
		}
	}
	return s.o.Store.OIDCUser(ctx, name, subject, admin, len(cfg.AdminGroups) > 0, cfg.SignUp)
}

func rand32() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

func (s *Server) internalPage(w http.ResponseWriter, err error) {
	s.o.Log.Error("page failed", "err", err)
	s.message(w, http.StatusInternalServerError, "Error", "The platform failed: see its log.")
}

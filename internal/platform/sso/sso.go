// Package sso is the platform's single sign-on through an OpenID Connect provider (go-oidc with
// x/oauth2): its configuration (a Secret of the platform's namespace, re-read every few seconds so a
// change needs no restart), the provider's discovery, the signed state of a sign-in in progress
// (any replica takes the provider's answer) and the account an identity signs in to (made on first
// login; admin through the provider's groups). It never touches HTTP answers: the web UI's sign-in
// page (internal/platform/web) sends the browser to the provider and takes it back.
package sso

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
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

// SecretName configures sign-in through an OpenID Connect provider: a Secret in the platform's
// namespace (written by `devtool-platform install --oidc-...`, or by hand). Keys: issuer, clientID,
// clientSecret, name (the button's text), scopes (default "openid profile email"), usernameClaim
// (default preferred_username, else the e-mail's local part), groupsClaim (default groups),
// adminGroups (comma-separated: members are admins), signUp ("false": only existing linked accounts
// sign in; default true, an account is made on first login).
const SecretName = "devtool-platform-oidc"

// ProviderID is the provider's id in /api/v1/info and in its sign-in path.
const ProviderID = "oidc"

// The browser's paths: StartPath+ProviderID sends it to the provider, which sends it back to
// CallbackPath (the redirect address to register at the provider: <platform URL>/login/oidc/callback).
const (
	StartPath    = "/login/oidc/"
	CallbackPath = "/login/oidc/callback"
)

// StateLifetime is how long a sign-in may take at the provider.
const StateLifetime = 10 * time.Minute

const configLife = 5 * time.Second

// Config is the provider's configuration.
type Config struct {
	Issuer, ClientID, ClientSecret, Name string
	Scopes                               []string
	UsernameClaim, GroupsClaim           string
	AdminGroups                          []string
	SignUp                               bool
}

// ParseConfig reads the Secret's data; nil when it names no issuer.
func ParseConfig(data map[string][]byte) (*Config, error) {
	get := func(k string) string { return strings.TrimSpace(string(data[k])) }
	if get("issuer") == "" {
		return nil, nil
	}
	c := &Config{Issuer: get("issuer"), ClientID: get("clientID"), ClientSecret: get("clientSecret"), Name: get("name"),
		UsernameClaim: get("usernameClaim"), GroupsClaim: get("groupsClaim"), SignUp: get("signUp") != "false"}
	if u, err := url.Parse(c.Issuer); err != nil || u.Host == "" || u.Scheme != "https" && u.Scheme != "http" {
		return nil, fmt.Errorf("issuer %q: expected an http(s) URL", c.Issuer)
	}
	if c.ClientID == "" {
		return nil, errors.New("clientID is required")
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

// Providers reads the configuration and talks to the provider. Safe for concurrent use.
type Providers struct {
	st  *store.Store
	log *slog.Logger
	hc  *http.Client

	mu      sync.Mutex
	rv      string
	fetched time.Time
	cfg     *Config
	p       *provider
}

type provider struct {
	cfg      *Config
	provider *oidc.Provider
	verifier *oidc.IDTokenVerifier
}

// New makes the providers of the platform whose state st keeps.
func New(st *store.Store, log *slog.Logger) *Providers {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Providers{st: st, log: log, hc: &http.Client{Timeout: 15 * time.Second}}
}

// config reads the configuration (cached a few seconds); nil when none is set.
func (ps *Providers) config(ctx context.Context) (*Config, string, error) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if time.Since(ps.fetched) < configLife {
		return ps.cfg, ps.rv, nil
	}
	sec, err := ps.st.Kube.CoreV1().Secrets(ps.st.Namespace).Get(ctx, SecretName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		ps.cfg, ps.rv, ps.p, ps.fetched = nil, "", nil, time.Now()
		return nil, "", nil
	} else if err != nil {
		return nil, "", err
	}
	if sec.ResourceVersion != ps.rv || sec.ResourceVersion == "" { // changed, or no version to tell
		cfg, err := ParseConfig(sec.Data)
		if err != nil {
			return nil, "", fmt.Errorf("OIDC configuration (Secret %s/%s): %w", ps.st.Namespace, SecretName, err)
		}
		ps.cfg, ps.rv, ps.p = cfg, sec.ResourceVersion, nil
	}
	ps.fetched = time.Now()
	return ps.cfg, ps.rv, nil
}

// discover returns the provider (discovered once per configuration); nil when none is configured.
func (ps *Providers) discover(ctx context.Context) (*provider, error) {
	cfg, rv, err := ps.config(ctx)
	if err != nil || cfg == nil {
		return nil, err
	}
	ps.mu.Lock()
	p := ps.p
	ps.mu.Unlock()
	if p != nil && p.cfg == cfg {
		return p, nil
	}
	dctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	prov, err := oidc.NewProvider(oidc.ClientContext(dctx, ps.hc), cfg.Issuer)
	if err != nil {
		return nil, fmt.Errorf("discovering the OIDC provider %s: %w", cfg.Issuer, err)
	}
	p = &provider{cfg: cfg, provider: prov, verifier: prov.Verifier(&oidc.Config{ClientID: cfg.ClientID})}
	ps.mu.Lock()
	if ps.rv == rv {
		ps.p = p
	}
	ps.mu.Unlock()
	return p, nil
}

func (p *provider) oauth(redirect string) *oauth2.Config {
	return &oauth2.Config{ClientID: p.cfg.ClientID, ClientSecret: p.cfg.ClientSecret, Endpoint: p.provider.Endpoint(),
		RedirectURL: redirect, Scopes: p.cfg.Scopes}
}

// List is the providers users may sign in with (for the sign-in page and /api/v1/info); none when
// the configuration cannot be read (logged).
func (ps *Providers) List(ctx context.Context) []api.LoginProvider {
	if ps == nil {
		return nil
	}
	cfg, _, err := ps.config(ctx)
	if err != nil {
		ps.log.Warn("OIDC configuration", "err", err)
		return nil
	}
	if cfg == nil {
		return nil
	}
	return []api.LoginProvider{{ID: ProviderID, Name: cfg.Name}}
}

// Error is a refused or failed sign-in: Status and Message are for the browser (they name no
// secret); Err, when set, is for the platform's log.
type Error struct {
	Status  int
	Message string
	Err     error
}

func (e *Error) Error() string {
	if e.Err != nil {
		return e.Message + ": " + e.Err.Error()
	}
	return e.Message
}

func unavailable(err error) *Error {
	return &Error{Status: http.StatusServiceUnavailable, Message: "Single sign-on is not available now: see the platform's log.", Err: err}
}

type state struct {
	Return   string `json:"r"`
	Nonce    string `json:"n"`
	Verifier string `json:"v"`
	Binding  string `json:"b"`
}

// Begin starts a sign-in with provider id: the provider's address to send the browser to, and a
// binding for a cookie of this browser that Finish must get back (a sign-in cannot be planted in
// another's browser). redirect is the platform's CallbackPath address; ret (already checked by the
// caller) is where the browser goes afterwards. The state is signed with the platform's key, so any
// replica finishes the sign-in.
func (ps *Providers) Begin(ctx context.Context, id, redirect, ret string) (authURL, binding string, err error) {
	if ps == nil || id != ProviderID {
		return "", "", &Error{Status: http.StatusNotFound, Message: "No such sign-in provider."}
	}
	p, err := ps.discover(ctx)
	if err != nil || p == nil {
		return "", "", unavailable(err)
	}
	st := state{Return: ret, Nonce: random(), Verifier: oauth2.GenerateVerifier(), Binding: random()}
	body, _ := json.Marshal(st)
	signed, err := ps.st.Sign(ctx, "oidc-state", body, time.Now().Add(StateLifetime))
	if err != nil {
		return "", "", err
	}
	return p.oauth(redirect).AuthCodeURL(signed, oidc.Nonce(st.Nonce), oauth2.S256ChallengeOption(st.Verifier)), st.Binding, nil
}

// Finish takes the provider's answer q (at redirect) in the browser that holds binding, checks the
// ID token and returns the account it signs in to (made on first login when sign-up is on) and
// where the browser goes next. A refusal is an *Error.
func (ps *Providers) Finish(ctx context.Context, redirect string, q url.Values, binding string) (*store.User, string, error) {
	if ps == nil {
		return nil, "", &Error{Status: http.StatusNotFound, Message: "No such sign-in provider."}
	}
	body, err := ps.st.Verify(ctx, "oidc-state", q.Get("state"))
	var st state
	if errors.Is(err, store.ErrBadSignature) || err == nil && json.Unmarshal(body, &st) != nil {
		return nil, "", &Error{Status: http.StatusBadRequest, Message: "The sign-in came back with an invalid or expired state: start again."}
	} else if err != nil {
		return nil, "", err
	}
	if binding == "" || binding != st.Binding {
		return nil, "", &Error{Status: http.StatusBadRequest, Message: "This sign-in was not started in this browser: start again."}
	}
	if e := q.Get("error"); e != "" {
		return nil, "", &Error{Status: http.StatusUnauthorized, Message: "The provider refused the sign-in: " + Printable(e+" "+q.Get("error_description"), 200)}
	}
	p, err := ps.discover(ctx)
	if err != nil || p == nil {
		return nil, "", unavailable(err)
	}
	cctx := oidc.ClientContext(ctx, ps.hc)
	tok, err := p.oauth(redirect).Exchange(cctx, q.Get("code"), oauth2.VerifierOption(st.Verifier))
	if err != nil {
		return nil, "", &Error{Status: http.StatusUnauthorized, Message: "The provider did not confirm the sign-in: start again.", Err: err}
	}
	raw, _ := tok.Extra("id_token").(string)
	idt, err := p.verifier.Verify(cctx, raw)
	if err == nil && idt.Nonce != st.Nonce {
		err = errors.New("nonce mismatch")
	}
	if err != nil {
		return nil, "", &Error{Status: http.StatusUnauthorized, Message: "The provider's ID token was not valid: start again.", Err: err}
	}
	var claims map[string]any
	if err := idt.Claims(&claims); err != nil {
		return nil, "", &Error{Status: http.StatusUnauthorized, Message: "The provider's ID token could not be read.", Err: err}
	}
	u, err := ps.account(ctx, p.cfg, idt.Issuer+" "+idt.Subject, claims)
	if err != nil {
		msg := "The platform refused the sign-in."
		var ie *store.InputError
		if errors.As(err, &ie) || errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrForbidden) {
			msg += " " + err.Error()
		}
		return nil, "", &Error{Status: http.StatusForbidden, Message: msg, Err: err}
	}
	return u, st.Return, nil
}

var notName = regexp.MustCompile(`[^a-z0-9-]+`)

// UserName makes a platform user name from a claim: the part before an '@', lower case, other
// characters as '-', trimmed to 40.
func UserName(v string) string {
	if at := strings.IndexByte(v, '@'); at >= 0 {
		v = v[:at]
	}
	n := notName.ReplaceAllString(strings.ToLower(v), "-")
	if len(n) > 40 {
		n = n[:40]
	}
	return strings.Trim(n, "-")
}

// account finds, or on first login makes, the account of an identity; admin follows the admin
// groups when they are configured.
func (ps *Providers) account(ctx context.Context, cfg *Config, subject string, claims map[string]any) (*store.User, error) {
	str := func(k string) string { v, _ := claims[k].(string); return v }
	name := UserName(str(cfg.UsernameClaim))
	if name == "" {
		name = UserName(str("email"))
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
	return ps.st.OIDCUser(ctx, name, subject, admin, len(cfg.AdminGroups) > 0, cfg.SignUp)
}

// Printable keeps the first n bytes of printable characters of s (what another party sent, for a
// page or a log).
func Printable(s string, n int) string {
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

func random() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

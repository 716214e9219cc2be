package server

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/devtool/devtool/internal/platform/api"
	"github.com/devtool/devtool/internal/platform/sso"
	"github.com/devtool/devtool/internal/platform/store"
)

// The OAuth 2.0 endpoints the CLI's browser and device logins end at (their pages, where a person
// signs in and allows, are the web UI's: internal/platform/web/clilogin.go). Everything a login
// needs between two requests is in the cluster (codes, device logins), so any replica finishes what
// another began.

const (
	deviceLoginLifetime = 10 * time.Minute
	devicePollInterval  = 2 // seconds
)

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

// token is the token endpoint (RFC 6749 §3.2): an authorization code with its PKCE verifier, or an
// approved device code, for a new API token.
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
		if !c.Matches(f.Get("code_verifier"), f.Get("redirect_uri")) {
			oauthError(w, http.StatusBadRequest, "invalid_grant", "the code_verifier or redirect_uri does not match the authorization request")
			return
		}
		user, how = c.User, "browser login"
	case "urn:ietf:params:oauth:grant-type:device_code":
		code := f.Get("device_code")
		d, err := s.o.Store.PollDeviceLogin(r.Context(), code)
		if err != nil || d.Status != store.DevicePending || !s.o.Now().Before(d.Expires) {
			s.devicePolls.forget(code)
		}
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
		case d.Status == store.DevicePending && s.devicePolls.tooSoon(code):
			oauthError(w, http.StatusBadRequest, "slow_down", "polled sooner than the interval: wait 5 seconds longer between polls")
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
	u, err := s.o.Store.GetUserNow(r.Context(), user)
	if err != nil {
		oauthError(w, http.StatusBadRequest, "invalid_grant", "the account is gone")
		return
	}
	t, tok, err := s.o.Store.CreateToken(r.Context(), u.Name, "devtool CLI ("+how+")", 0)
	if err != nil {
		s.internal(w, r, err)
		return
	}
	NoteUser(w, u.Name)
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

// deviceAuthorize is the device authorization endpoint (RFC 8628 §3.1): the codes, and the web
// UI's page where the person enters the user code.
func (s *Server) deviceAuthorize(w http.ResponseWriter, r *http.Request) {
	if !s.loginAllowed(w, r, "") || !s.oauthForm(w, r) {
		return
	}
	if s.o.Web == nil {
		oauthError(w, http.StatusBadRequest, "unsupported_grant_type", "this platform runs without its web UI: log in with a password or a token")
		return
	}
	client := sso.Printable(r.PostForm.Get("client_name"), 100)
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

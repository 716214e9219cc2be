package server

import (
	"context"
	"net/http"
	"time"

	"github.com/devtool/devtool/internal/platform/store"
)

// SessionCookie holds a browser session: an API token named store.SessionTokenName (Secure,
// HttpOnly, SameSite=Lax). The sign-in pages set it; the web UI reads it with SessionUser.
const SessionCookie = "devtool_session"

// SetSession writes the session cookie for token, valid until expires.
func SetSession(w http.ResponseWriter, token string, expires time.Time) {
	http.SetCookie(w, &http.Cookie{Name: SessionCookie, Value: token, Path: "/", Expires: expires,
		MaxAge: int(time.Until(expires).Seconds()), Secure: true, HttpOnly: true, SameSite: http.SameSiteLaxMode})
}

// ClearSession removes the session cookie.
func ClearSession(w http.ResponseWriter) {
	http.SetCookie(w, &http.Cookie{Name: SessionCookie, Value: "", Path: "/", MaxAge: -1, Secure: true, HttpOnly: true, SameSite: http.SameSiteLaxMode})
}

// SessionUser returns the user of the request's session cookie, or nil when there is none or it is
// no longer valid (revoked, expired, a removed user). The token is checked live, as every API token.
func SessionUser(ctx context.Context, st *store.Store, r *http.Request) (*store.User, *store.AccessToken) {
	c, err := r.Cookie(SessionCookie)
	if err != nil || c.Value == "" {
		return nil, nil
	}
	u, t, err := st.Authenticate(ctx, c.Value)
	if err != nil {
		return nil, nil
	}
	return u, t
}

// StartSession makes a session for user and sets its cookie.
func StartSession(ctx context.Context, st *store.Store, w http.ResponseWriter, user string) error {
	tok, exp, err := st.CreateSession(ctx, user)
	if err != nil {
		return err
	}
	SetSession(w, tok, exp)
	return nil
}

package server

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/devtool/devtool/internal/platform/api"
	"github.com/devtool/devtool/internal/platform/store"
)

// badLogin is the one answer to every refused password login: unknown user, no password, wrong
// password or locked account look the same (the web UI's sign-in page says it in its words).
const badLogin = "wrong user name or password (after repeated failures the account is locked for a while)"

// loginAllowed takes one request of the per-address and the per-account login budgets (stricter
// than the API's), answering 429 itself when either is spent.
func (s *Server) loginAllowed(w http.ResponseWriter, r *http.Request, account string) bool {
	if !s.AllowLogin(clientAddr(r), account) {
		tooMany(w)
		return false
	}
	return true
}

// AllowLogin takes one sign-in attempt of the client address's budget and, when account is named,
// of the account's: the limits of every way to sign in, the API's and the web UI's. false means
// answer 429.
func (s *Server) AllowLogin(addr, account string) bool {
	return s.loginAddrs.allow(addr) && (account == "" || s.loginAccounts.allow(account))
}

// CheckPassword is the store's password check (argon2id, lockout on the User) for the API's
// password login and the web UI's sign-in page: a refusal's reason is logged (never the password)
// and the failure that locks an account is an audit record. Errors: store.ErrBadLogin (every
// refusal), store.ErrBusy (too many hashes at once: 429), others.
func (s *Server) CheckPassword(ctx context.Context, user, password, remoteAddr string) (*store.User, error) {
	u, err := s.o.Store.CheckPassword(ctx, user, password)
	if err != nil {
		var le *store.LoginError
		if errors.As(err, &le) {
			s.o.Log.Info("login refused", "user", user, "remote", remoteAddr, "reason", le.Reason)
			if le.LockedNow {
				a := store.Audit{Actor: "(anonymous)", Action: "lock", Kind: "User", Name: user, Detail: le.Reason + ", from " + remoteAddr}
				if err := s.o.Store.Record(ctx, a, s.o.Instance); err != nil {
					s.o.Log.Warn("audit record not written", "action", a.Action, "object", a.Kind+"/"+a.Name, "err", err)
				}
			}
		}
		return nil, err
	}
	return u, nil
}

// loginFailed answers a failed password check: 401 (one body), 429, or 500.
func (s *Server) loginFailed(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, store.ErrBadLogin):
		writeError(w, http.StatusUnauthorized, "unauthorized", badLogin, "")
	case errors.Is(err, store.ErrBusy):
		w.Header().Set("Retry-After", "5")
		writeError(w, http.StatusTooManyRequests, "rate_limited", store.ErrBusy.Error(), "")
	case errors.Is(err, context.Canceled):
	default:
		s.internal(w, r, err)
	}
}

// login is POST /api/v1/login: a user name and password for a new API token.
func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	var req api.LoginRequest
	if !s.read(w, r, &req) {
		return
	}
	if !s.loginAllowed(w, r, req.User) {
		return
	}
	if req.ExpiresInSeconds < 0 || req.ExpiresInSeconds > int64(store.MaxTokenLifetime/time.Second) {
		writeError(w, http.StatusBadRequest, "bad_request", "expiresInSeconds: between 0 (the default, 90 days) and 31536000 (one year)", "expiresInSeconds")
		return
	}
	u, err := s.CheckPassword(r.Context(), req.User, req.Password, clientAddr(r))
	if err != nil {
		s.loginFailed(w, r, err)
		return
	}
	name := req.TokenName
	if name == "" {
		name = "password login"
	}
	t, tok, err := s.o.Store.CreateToken(r.Context(), u.Name, name, time.Duration(req.ExpiresInSeconds)*time.Second)
	NoteUser(w, u.Name)
	c := caller{user: u}
	if err != nil {
		s.audit(r, c, store.Audit{Action: "login", Kind: "User", Name: u.Name, Err: err})
		s.fail(w, r, err)
		return
	}
	s.audit(r, c, store.Audit{Action: "login", Kind: "User", Name: u.Name, Detail: "password; token " + t.ID})
	out := apiToken(t)
	out.Token = tok
	writeJSON(w, http.StatusOK, out)
}

// changePassword is PUT /api/v1/me/password.
func (s *Server) changePassword(w http.ResponseWriter, r *http.Request, c caller) {
	var req api.PasswordChange
	if !s.read(w, r, &req) {
		return
	}
	if why := store.ValidPassword(req.New); why != "" {
		writeError(w, http.StatusBadRequest, "bad_request", "new: "+why, "new")
		return
	}
	if c.user.PasswordHash != "" {
		if !s.loginAllowed(w, r, c.user.Name) {
			return
		}
		if _, err := s.CheckPassword(r.Context(), c.user.Name, req.Current, clientAddr(r)); err != nil {
			if errors.Is(err, store.ErrBadLogin) {
				writeError(w, http.StatusForbidden, "forbidden", "current: the current password is wrong (or the account is locked for a while)", "current")
				return
			}
			s.loginFailed(w, r, err)
			return
		}
	}
	err := s.o.Store.SetPassword(r.Context(), c.user.Name, req.New)
	s.audit(r, c, store.Audit{Action: "set-password", Kind: "User", Name: c.user.Name, Err: err})
	if err != nil {
		s.failPassword(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) failPassword(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, store.ErrBusy) {
		s.loginFailed(w, r, err)
		return
	}
	s.fail(w, r, err)
}

// resetPassword is PUT /api/v1/users/{name}/password (admin).
func (s *Server) resetPassword(w http.ResponseWriter, r *http.Request, c caller) {
	var req api.PasswordReset
	if !s.read(w, r, &req) {
		return
	}
	name := r.PathValue("name")
	err := s.o.Store.SetPassword(r.Context(), name, req.Password)
	detail := "password set"
	if req.Password == "" {
		detail = "password login off"
	}
	s.audit(r, c, store.Audit{Action: "reset-password", Kind: "User", Name: name, Detail: detail, Err: err})
	if err != nil {
		s.failPassword(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// unlock is POST /api/v1/users/{name}/unlock (admin).
func (s *Server) unlock(w http.ResponseWriter, r *http.Request, c caller) {
	name := r.PathValue("name")
	err := s.o.Store.Unlock(r.Context(), name)
	s.audit(r, c, store.Audit{Action: "unlock", Kind: "User", Name: name, Err: err})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// userDetails adds what an admin (or the user) may see of an account.
func userDetails(out *api.User, u *store.User) {
	out.Password = u.PasswordHash != ""
	out.FailedLogins = u.FailedLogins
	out.OIDC = u.Subject != ""
	if !u.LockedUntil.IsZero() && time.Now().Before(u.LockedUntil) {
		t := u.LockedUntil.UTC()
		out.LockedUntil = &t
	}
}

package web

import (
	"errors"
	"net/http"

	"github.com/devtool/devtool/internal/platform/sso"
)

// Single sign-on: the sign-in page links to sso.StartPath+<provider>, which sends the browser to the
// provider; the provider sends it back to sso.CallbackPath, which starts the web session and goes
// on to where the sign-in was for (a page of the UI, the CLI's consent page, an endpoint). The
// provider's protocol is internal/platform/sso's; here are the cookies and pages.

// ssoCookie binds a sign-in in progress to the browser that started it.
const ssoCookie = "__Host-devtool-sso"

func (u *UI) ssoStart(w http.ResponseWriter, r *http.Request) {
	if !u.allowLogin(w, r, "", u.errorPageFn(w, r)) {
		return
	}
	ret, _ := ValidReturn(r.URL.Query().Get("return"), u.o.Info.Domain)
	authURL, binding, err := u.o.SSO.Begin(r.Context(), r.PathValue("id"), u.baseURL(r)+sso.CallbackPath, ret)
	if err != nil {
		u.ssoFailed(w, r, err)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: ssoCookie, Value: binding, Path: "/", MaxAge: int(sso.StateLifetime.Seconds()),
		Secure: true, HttpOnly: true, SameSite: http.SameSiteLaxMode})
	http.Redirect(w, r, authURL, http.StatusSeeOther)
}

func (u *UI) ssoCallback(w http.ResponseWriter, r *http.Request) {
	if !u.allowLogin(w, r, "", u.errorPageFn(w, r)) {
		return
	}
	binding := ""
	if ck, err := r.Cookie(ssoCookie); err == nil {
		binding = ck.Value
	}
	http.SetCookie(w, &http.Cookie{Name: ssoCookie, Value: "", Path: "/", MaxAge: -1, Secure: true, HttpOnly: true, SameSite: http.SameSiteLaxMode})
	usr, ret, err := u.o.SSO.Finish(r.Context(), u.baseURL(r)+sso.CallbackPath, r.URL.Query(), binding)
	if err != nil {
		u.ssoFailed(w, r, err)
		return
	}
	if err := u.startSession(w, r, usr, "OpenID Connect"); err != nil {
		u.internal(w, r, nil, err)
		return
	}
	if ret, ok := ValidReturn(ret, u.o.Info.Domain); ok {
		http.Redirect(w, r, ret, http.StatusSeeOther)
		return
	}
	http.Redirect(w, r, "/namespaces", http.StatusSeeOther)
}

// ssoFailed shows a refused single sign-on (its reason for the log only) or the platform's failure.
func (u *UI) ssoFailed(w http.ResponseWriter, r *http.Request, err error) {
	var se *sso.Error
	if !errors.As(err, &se) {
		u.internal(w, r, nil, err)
		return
	}
	if se.Err != nil {
		u.o.Log.Info("single sign-on refused", "err", se.Err, "remote", clientAddr(r))
	}
	u.errorPage(w, r, nil, se.Status, se.Message)
}

// errorPageFn answers with an error page (for allowLogin outside the sign-in page).
func (u *UI) errorPageFn(w http.ResponseWriter, r *http.Request) func(int, string) {
	return func(status int, msg string) { u.errorPage(w, r, nil, status, msg) }
}

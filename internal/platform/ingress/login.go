package ingress

import (
	"context"
	"crypto/ed25519"
	"errors"
	"html/template"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// LoginOptions configure the platform's side of private endpoints (served by `devtool-platform
// serve` at LoginPath).
//
// The seam with the web UI: Session finds the visitor's web session (the UI's cookie on the
// platform's host); SignInURL(next) is the UI's sign-in page, which sends the visitor to next once
// signed in. Without them (nil), the page is a minimal form that takes an API token.
type LoginOptions struct {
	// Key signs tickets (Keys.TicketKey).
	Key ed25519.PrivateKey
	// Domain: rd must be https://<one label>.<Domain>[:port]/..., an endpoint host.
	Domain string
	// Authenticate checks an API token (the token form).
	Authenticate func(ctx context.Context, token string) (Identity, error)
	// Session returns the signed-in user of a request to the platform, if any.
	Session func(r *http.Request) (Identity, bool)
	// SignInURL is the web UI's sign-in page that comes back to next.
	SignInURL func(next string) string
	Log       *slog.Logger
	Now       func() time.Time
}

// ErrBadCredentials is what Authenticate returns for a token that does not sign in.
var ErrBadCredentials = errors.New("invalid, revoked or expired token")

type login struct {
	o        LoginOptions
	mu       sync.Mutex
	limiters map[string]*rate.Limiter
}

// LoginHandler serves LoginPath: GET signs in (or shows the form) and redirects to the endpoint
// with a ticket; POST takes the form's token. Cross-origin POSTs are refused.
func LoginHandler(o LoginOptions) http.Handler {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	l := &login{o: o, limiters: map[string]*rate.Limiter{}}
	return http.NewCrossOriginProtection().Handler(l)
}

func (l *login) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Frame-Options", "DENY")
	w.Header().Set("Referrer-Policy", "no-referrer")
	if r.URL.Path != LoginPath {
		problem(w, r, http.StatusNotFound, "Not found", "no page "+r.URL.Path)
		return
	}
	var rd string
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		rd = r.URL.Query().Get("rd")
	case http.MethodPost:
		r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
		if err := r.ParseForm(); err != nil {
			problem(w, r, http.StatusBadRequest, "Bad request", "the form could not be read")
			return
		}
		rd = r.PostForm.Get("rd")
	default:
		w.Header().Set("Allow", "GET, HEAD, POST")
		problem(w, r, http.StatusMethodNotAllowed, "Method not allowed", r.Method)
		return
	}
	target, err := l.endpointURL(rd)
	if err != nil {
		problem(w, r, http.StatusBadRequest, "Bad request", err.Error())
		return
	}
	if r.Method == http.MethodPost {
		if !l.allow(r) {
			w.Header().Set("Retry-After", "1")
			problem(w, r, http.StatusTooManyRequests, "Too many requests", "retry in a moment")
			return
		}
		id, err := l.o.Authenticate(r.Context(), strings.TrimSpace(r.PostForm.Get("token")))
		if errors.Is(err, ErrBadCredentials) {
			l.form(w, http.StatusUnauthorized, target, "That token does not sign in: it is invalid, revoked or expired.")
			return
		} else if err != nil {
			l.o.Log.Warn("endpoint login failed", "err", err.Error())
			problem(w, r, http.StatusInternalServerError, "Internal error", "the sign-in could not be checked; try again")
			return
		}
		l.handOver(w, r, id, target)
		return
	}
	if l.o.Session != nil {
		if id, ok := l.o.Session(r); ok {
			l.handOver(w, r, id, target)
			return
		}
	}
	if l.o.SignInURL != nil {
		http.Redirect(w, r, l.o.SignInURL(r.URL.RequestURI()), http.StatusFound)
		return
	}
	l.form(w, http.StatusOK, target, "")
}

// endpointURL checks rd is an endpoint's URL (https, a host <label>.<domain>), so the platform never
// hands a ticket to, nor redirects to, anything else.
func (l *login) endpointURL(rd string) (*url.URL, error) {
	u, err := url.Parse(rd)
	if err != nil || u.Scheme != "https" || u.User != nil || u.Host == "" {
		return nil, errors.New("rd must be the https URL of an endpoint")
	}
	host := normalizeHost(u.Hostname())
	label, ok := strings.CutSuffix(host, "."+normalizeHost(l.o.Domain))
	if l.o.Domain == "" || !ok || label == "" || strings.Contains(label, ".") {
		return nil, errors.New("rd must be the URL of an endpoint under " + l.o.Domain)
	}
	return u, nil
}

func (l *login) handOver(w http.ResponseWriter, r *http.Request, id Identity, target *url.URL) {
	t, err := SignTicket(l.o.Key, id, target.Hostname(), l.o.Now())
	if err != nil {
		problem(w, r, http.StatusInternalServerError, "Internal error", "could not sign the sign-in ticket")
		return
	}
	rd := target.EscapedPath()
	if rd == "" {
		rd = "/"
	}
	if target.RawQuery != "" {
		rd += "?" + target.RawQuery
	}
	q := url.Values{"ticket": {t}, "rd": {rd}}
	dest := url.URL{Scheme: "https", Host: target.Host, Path: AuthPath, RawQuery: q.Encode()}
	l.o.Log.Info("endpoint login", "user", id.User, "host", target.Hostname())
	http.Redirect(w, r, dest.String(), http.StatusSeeOther)
}

var formPage = template.Must(template.New("login").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
<title>Sign in to {{.Host}}</title></head>
<body>
<main>
<h1>Sign in to {{.Host}}</h1>
<p>This endpoint is private: only members of its namespace may open it.</p>
{{if .Error}}<p role="alert"><strong>{{.Error}}</strong></p>{{end}}
<form method="post" action="{{.Action}}">
<input type="hidden" name="rd" value="{{.RD}}">
<p><label for="token">API token</label><br>
<input id="token" name="token" type="password" autocomplete="off" required size="70"></p>
<p><button type="submit">Sign in</button></p>
</form>
<p>Make a token with <code>devtool context</code> or ask your platform admin.</p>
</main>
</body></html>
`))

func (l *login) form(w http.ResponseWriter, status int, target *url.URL, msg string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_ = formPage.Execute(w, map[string]string{"Host": target.Hostname(), "RD": target.String(), "Action": LoginPath, "Error": msg})
}

// allow rate-limits token attempts per client address (each one reads the API server).
func (l *login) allow(r *http.Request) bool {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	lim := l.limiters[host]
	if lim == nil {
		if len(l.limiters) > 10000 {
			l.limiters = map[string]*rate.Limiter{}
		}
		lim = rate.NewLimiter(2, 10)
		l.limiters[host] = lim
	}
	return lim.Allow()
}

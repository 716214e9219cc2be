package ingress

import (
	"context"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/devtool/devtool/internal/labels"
)

// Private endpoints (docs/platform.md, "Private endpoints"):
//
//  1. A request to a private route without a valid cookie is sent (302) to the platform's LoginPath
//     with rd = the URL it asked for.
//  2. The platform signs the visitor in (the web UI's session, or the token form of login.go) and
//     sends it back to https://<endpoint host>/.devtool/auth?ticket=...&rd=<path>: the ticket is
//     signed with the platform's Ed25519 key, names the user, its Kubernetes identity (the user's
//     ServiceAccount) and the endpoint's host, and lives TicketTTL. Cookies cannot cross hosts, so
//     the ticket travels in the redirect.
//  3. The ingress checks the ticket with the public key, sets CookieName for that host only
//     (Secure, HttpOnly, SameSite=Lax, an HMAC of the ingress's cookie key, CookieTTL), and
//     redirects to rd.
//  4. Every request then asks the API server, with a SubjectAccessReview, whether that identity may
//     get the route's Service in its namespace (a viewer, editor or owner may): Kubernetes decides.
//     Answers are cached for authzTTL (denials for authzDenyTTL).
const (
	// AuthPath is where the ingress takes a ticket, on every endpoint host.
	AuthPath = "/.devtool/auth"
	// LoginPath is the platform's page that signs a visitor in for an endpoint.
	LoginPath = "/auth/endpoint"
	// CookieName holds an endpoint login; host-only (__Host- prefix), never passed to the backend.
	CookieName = "__Host-devtool-endpoint"
	// AnnotationPrivate on an Ingress ("true"/"false") says whether its routes are private; on a
	// Namespace, the default of its Ingresses (previews are private by default).
	AnnotationPrivate = labels.Private

	TicketTTL    = time.Minute
	CookieTTL    = 12 * time.Hour
	authzTTL     = 30 * time.Second
	authzDenyTTL = 5 * time.Second
)

// Identity is a signed-in platform user.
type Identity struct {
	User string `json:"u"`
	// KubeUser is the user's Kubernetes identity (system:serviceaccount:<ns>:<sa>), the subject of
	// the access reviews.
	KubeUser string `json:"k"`
}

// Keys sign and check endpoint logins. The platform holds TicketKey; the ingress holds TicketPublic
// and CookieKey.
type Keys struct {
	TicketKey    ed25519.PrivateKey
	TicketPublic ed25519.PublicKey
	CookieKey    []byte
}

// NewKeys makes a fresh set (the install keeps them in a Secret).
func NewKeys() (*Keys, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	ck := make([]byte, 32)
	if _, err := rand.Read(ck); err != nil {
		return nil, err
	}
	return &Keys{TicketKey: priv, TicketPublic: pub, CookieKey: ck}, nil
}

type ticketBody struct {
	Identity
	Host    string `json:"h"`
	Expires int64  `json:"e"`
	Nonce   string `json:"n,omitempty"`
}

const (
	ticketContext = "devtool-ticket-v1."
	cookieContext = "devtool-cookie-v1."
)

// SignTicket makes the ticket that hands id over to host (a name, no port).
func SignTicket(key ed25519.PrivateKey, id Identity, host string, now time.Time) (string, error) {
	n := make([]byte, 12)
	if _, err := rand.Read(n); err != nil {
		return "", err
	}
	b, err := json.Marshal(ticketBody{Identity: id, Host: normalizeHost(host), Expires: now.Add(TicketTTL).Unix(), Nonce: base64.RawURLEncoding.EncodeToString(n)})
	if err != nil {
		return "", err
	}
	p := base64.RawURLEncoding.EncodeToString(b)
	sig := ed25519.Sign(key, []byte(ticketContext+p))
	return p + "." + base64.RawURLEncoding.EncodeToString(sig), nil
}

var errBadTicket = errors.New("the sign-in ticket is invalid, expired or for another host")

// VerifyTicket checks a ticket's signature, expiry and host.
func VerifyTicket(pub ed25519.PublicKey, ticket, host string, now time.Time) (*Identity, error) {
	p, s, ok := strings.Cut(ticket, ".")
	if !ok || len(ticket) > 4096 {
		return nil, errBadTicket
	}
	sig, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || !ed25519.Verify(pub, []byte(ticketContext+p), sig) {
		return nil, errBadTicket
	}
	var tb ticketBody
	if err := decodePayload(p, &tb); err != nil {
		return nil, errBadTicket
	}
	if tb.Host != normalizeHost(host) || now.Unix() >= tb.Expires || tb.User == "" || tb.KubeUser == "" {
		return nil, errBadTicket
	}
	return &tb.Identity, nil
}

type cookieBody struct {
	Identity
	Host    string `json:"h"`
	Expires int64  `json:"e"`
}

func signCookie(key []byte, id Identity, host string, exp time.Time) string {
	b, _ := json.Marshal(cookieBody{Identity: id, Host: normalizeHost(host), Expires: exp.Unix()})
	p := base64.RawURLEncoding.EncodeToString(b)
	return p + "." + base64.RawURLEncoding.EncodeToString(mac(key, p))
}

func verifyCookie(key []byte, v, host string, now time.Time) (*Identity, bool) {
	p, s, ok := strings.Cut(v, ".")
	if !ok || len(v) > 4096 {
		return nil, false
	}
	sig, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || !hmac.Equal(sig, mac(key, p)) {
		return nil, false
	}
	var cb cookieBody
	if err := decodePayload(p, &cb); err != nil {
		return nil, false
	}
	if cb.Host != normalizeHost(host) || now.Unix() >= cb.Expires || cb.KubeUser == "" {
		return nil, false
	}
	return &cb.Identity, true
}

func mac(key []byte, p string) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(cookieContext + p))
	return h.Sum(nil)
}

func decodePayload(p string, v any) error {
	b, err := base64.RawURLEncoding.DecodeString(p)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// Authorizer answers whether an identity may use a route: "may get the route's Service in its
// namespace", asked of the API server (SubjectAccessReview), cached briefly.
type Authorizer interface {
	Allowed(ctx context.Context, kubeUser string, b Backend) (bool, string, error)
}

// SARAuthorizer asks the API server.
type SARAuthorizer struct {
	Client kubernetes.Interface
	Now    func() time.Time

	mu    sync.Mutex
	cache map[string]authzAnswer
}

type authzAnswer struct {
	allowed bool
	reason  string
	until   time.Time
}

// serviceAccountGroups are the groups the API server gives a ServiceAccount's tokens.
func serviceAccountGroups(kubeUser string) []string {
	rest, ok := strings.CutPrefix(kubeUser, "system:serviceaccount:")
	if !ok {
		return []string{"system:authenticated"}
	}
	ns, _, _ := strings.Cut(rest, ":")
	return []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}
}

func (a *SARAuthorizer) now() time.Time {
	if a.Now != nil {
		return a.Now()
	}
	return time.Now()
}

// Allowed implements Authorizer.
func (a *SARAuthorizer) Allowed(ctx context.Context, kubeUser string, b Backend) (bool, string, error) {
	key := kubeUser + "\x00" + b.Namespace + "\x00" + b.Service
	now := a.now()
	a.mu.Lock()
	if ans, ok := a.cache[key]; ok && now.Before(ans.until) {
		a.mu.Unlock()
		return ans.allowed, ans.reason, nil
	}
	a.mu.Unlock()
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:   kubeUser,
		Groups: serviceAccountGroups(kubeUser),
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: b.Namespace, Verb: "get", Group: "", Resource: "services", Name: b.Service,
		},
	}}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := a.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
	if err != nil {
		return false, "", fmt.Errorf("asking the API server whether %s may read namespace %s: %w", kubeUser, b.Namespace, err)
	}
	ans := authzAnswer{allowed: out.Status.Allowed && !out.Status.Denied, reason: out.Status.Reason, until: now.Add(authzTTL)}
	if !ans.allowed {
		ans.until = now.Add(authzDenyTTL)
	}
	a.mu.Lock()
	if a.cache == nil || len(a.cache) > 10000 {
		a.cache = map[string]authzAnswer{}
	}
	a.cache[key] = ans
	a.mu.Unlock()
	return ans.allowed, ans.reason, nil
}

// endpointAuth is the ingress's side of private endpoints.
type endpointAuth struct {
	keys        *Keys
	authz       Authorizer
	platformURL string // where LoginPath is
	now         func() time.Time
	log         *slog.Logger
}

// loginURL is the platform's sign-in for the URL r asked for.
func (a *endpointAuth) loginURL(r *http.Request) string {
	orig := "https://" + r.Host + r.URL.RequestURI()
	return strings.TrimSuffix(a.platformURL, "/") + LoginPath + "?rd=" + url.QueryEscape(orig)
}

// check lets r through when it carries a valid login of a user who may read the route's
// namespace; otherwise it answers (redirect to the login, 401 or 403) and returns false.
func (a *endpointAuth) check(w http.ResponseWriter, r *http.Request, route Route) bool {
	var id *Identity
	if c, err := r.Cookie(CookieName); err == nil {
		id, _ = verifyCookie(a.keys.CookieKey, c.Value, stripPort(r.Host), a.now())
	}
	if id == nil {
		login := a.loginURL(r)
		if (r.Method == http.MethodGet || r.Method == http.MethodHead) && r.Header.Get("Upgrade") == "" {
			w.Header().Set("Cache-Control", "no-store")
			http.Redirect(w, r, login, http.StatusFound)
			return false
		}
		w.Header().Set("Location", login)
		problem(w, r, http.StatusUnauthorized, "Sign-in required", "This endpoint is private: sign in at "+login)
		return false
	}
	ok, reason, err := a.authz.Allowed(r.Context(), id.KubeUser, route.Backend)
	if err != nil {
		a.log.Warn("access review failed", "user", id.User, "namespace", route.Backend.Namespace, "err", err.Error())
		problem(w, r, http.StatusServiceUnavailable, "Service unavailable", "Could not check your access to this endpoint; try again.")
		return false
	}
	if !ok {
		detail := fmt.Sprintf("You are signed in as %s, who is not a member of namespace %s.", id.User, route.Backend.Namespace)
		if reason != "" {
			a.log.Info("endpoint access refused", "user", id.User, "namespace", route.Backend.Namespace, "reason", reason)
		}
		problem(w, r, http.StatusForbidden, "Forbidden", detail)
		return false
	}
	return true
}

// redeem takes a ticket at AuthPath: sets the host's cookie and sends the visitor on to rd.
func (a *endpointAuth) redeem(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Referrer-Policy", "no-referrer")
	w.Header().Set("Cache-Control", "no-store")
	host := stripPort(r.Host)
	id, err := VerifyTicket(a.keys.TicketPublic, r.URL.Query().Get("ticket"), host, a.now())
	if err != nil {
		problem(w, r, http.StatusBadRequest, "Sign-in failed", err.Error()+": open the endpoint again to sign in.")
		return
	}
	rd := r.URL.Query().Get("rd")
	if !localPath(rd) {
		rd = "/"
	}
	exp := a.now().Add(CookieTTL)
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: signCookie(a.keys.CookieKey, *id, host, exp), Path: "/",
		Expires: exp, Secure: true, HttpOnly: true, SameSite: http.SameSiteLaxMode})
	http.Redirect(w, r, rd, http.StatusSeeOther)
}

// localPath: a path on the same host (not //host, not /\host, no scheme).
func localPath(p string) bool {
	return strings.HasPrefix(p, "/") && !strings.HasPrefix(p, "//") && !strings.HasPrefix(p, "/\\") &&
		!strings.ContainsAny(p, "\r\n")
}

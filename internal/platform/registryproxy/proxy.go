// Package registryproxy is the access check in front of the platform's registry (a Distribution
// registry listening on its pod's loopback only). Pulls are open, since the kubelet pulls without
// credentials; pushes and deletes need a Kubernetes token of the user (the one the platform hands
// out, POST /api/v1/kubetoken) as the password of HTTP basic authentication, and are allowed only
// into <registry>/<namespace>/... when the API server says that user may create (push) or delete
// images.devtool.dev in that namespace: a TokenReview, then a SubjectAccessReview as the user. The
// platform's membership roles grant it to a namespace's owners and editors, so a user pushes into
// the namespaces they belong to and nowhere else. Answers are cached for a few seconds.
package registryproxy

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
)

// The resource whose verbs decide pushes (create) and deletes (delete): a name in the platform's API
// group that no object has, checked by SubjectAccessReview only.
const (
	Group    = "devtool.dev"
	Resource = "images"
)

// Realm is the basic-authentication realm the proxy challenges with.
const Realm = "devtool registry"

// Proxy checks each request and forwards the allowed ones to Upstream.
type Proxy struct {
	// Upstream is the registry, e.g. http://127.0.0.1:5000.
	Upstream *url.URL
	// Kube asks the API server (TokenReview, SubjectAccessReview).
	Kube kubernetes.Interface
	Log  *slog.Logger
	// CacheTTL bounds how long an answer of the API server is reused (default 10 s).
	CacheTTL time.Duration
	Now      func() time.Time

	once  sync.Once
	rp    *httputil.ReverseProxy
	mu    sync.Mutex
	cache map[string]cached
	// flight makes concurrent requests that miss the cache for the same key (a push's layers
	// go in parallel) ask the API server once.
	flight singleflight.Group
}

// reviewTimeout bounds one question to the API server, asked for every request waiting on it.
const reviewTimeout = 10 * time.Second

type cached struct {
	user    *authnv1.UserInfo
	allowed bool
	err     string // a refusal to repeat (bad token)
	expires time.Time
}

// maxCache bounds the cache; when full, expired entries go, then everything.
const maxCache = 4096

func (p *Proxy) init() {
	p.once.Do(func() {
		if p.Log == nil {
			p.Log = slog.New(slog.DiscardHandler)
		}
		if p.Now == nil {
			p.Now = time.Now
		}
		if p.CacheTTL == 0 {
			p.CacheTTL = 10 * time.Second
		}
		p.cache = map[string]cached{}
		up := p.Upstream
		p.rp = &httputil.ReverseProxy{
			Rewrite: func(pr *httputil.ProxyRequest) {
				pr.SetURL(up)
				pr.Out.Header.Del("Authorization") // the registry itself checks nothing: never hand it a token
			},
			FlushInterval: -1,
			ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
				p.Log.Error("registry unreachable", "err", err, "method", r.Method, "path", r.URL.Path)
				writeError(w, http.StatusBadGateway, "UNAVAILABLE", "the registry behind the proxy does not answer")
			},
		}
	})
}

// ServeHTTP implements http.Handler.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.init()
	w.Header().Set("Docker-Distribution-API-Version", "registry/2.0")
	path := r.URL.Path
	if path == "/healthz" {
		w.WriteHeader(http.StatusOK)
		return
	}
	if path != "/v2" && !strings.HasPrefix(path, "/v2/") {
		writeError(w, http.StatusNotFound, "NAME_UNKNOWN", "not a registry path")
		return
	}
	token, hasCreds := credentials(r)
	if path == "/v2" || path == "/v2/" {
		// The version check: clients learn here that this registry takes basic authentication,
		// and check the credentials they would push with.
		if !hasCreds {
			challenge(w, "credentials needed: your user name and a Kubernetes token from the platform (devtool does this)")
			return
		}
		if _, ok := p.authenticate(w, r, token); !ok {
			return
		}
		p.rp.ServeHTTP(w, r)
		return
	}
	repo, kind, ok := parse(path)
	if !ok {
		if strings.HasPrefix(path, "/v2/_catalog") {
			writeError(w, http.StatusForbidden, "DENIED", "the catalog is not listed: it would name every namespace's images")
			return
		}
		writeError(w, http.StatusNotFound, "NAME_INVALID", "expected /v2/<namespace>/<name>/(manifests|blobs|tags)/...")
		return
	}
	ns, rest, _ := strings.Cut(repo, "/")
	if rest == "" || len(validation.IsDNS1123Label(ns)) > 0 {
		writeError(w, http.StatusForbidden, "DENIED", fmt.Sprintf("repository %q: names are <namespace>/<name>, the namespace a valid namespace name", repo))
		return
	}
	verb := ""
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		// Pulls are open (the kubelet pulls with no credentials); credentials sent anyway must be good.
		if hasCreds {
			if _, ok := p.authenticate(w, r, token); !ok {
				return
			}
		}
		p.rp.ServeHTTP(w, r)
		return
	case http.MethodPost, http.MethodPut, http.MethodPatch:
		verb = "create"
	case http.MethodDelete:
		verb = "delete"
	default:
		writeError(w, http.StatusMethodNotAllowed, "UNSUPPORTED", "method "+r.Method+" not allowed")
		return
	}
	if !hasCreds {
		challenge(w, "pushing needs credentials: your user name and a Kubernetes token from the platform (devtool does this)")
		return
	}
	user, ok := p.authenticate(w, r, token)
	if !ok {
		return
	}
	allowed, err := p.authorize(r.Context(), user, ns, rest, verb)
	if err != nil {
		p.Log.Error("access review failed", "user", user.Username, "repository", repo, "err", err)
		writeError(w, http.StatusServiceUnavailable, "UNAVAILABLE", "the access check could not ask the API server; retry")
		return
	}
	if !allowed {
		p.Log.Warn("refused", "user", user.Username, "repository", repo, "verb", verb, "kind", kind)
		writeError(w, http.StatusForbidden, "DENIED", fmt.Sprintf("%s may not push to %s: only members of namespace %s (owners and editors) may", displayName(user), repo, ns))
		return
	}
	if kind == "manifests" {
		p.Log.Info("push", "user", user.Username, "repository", repo, "verb", verb, "reference", r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:])
	}
	p.rp.ServeHTTP(w, r)
}

// credentials returns the token of HTTP basic authentication (the password) or of a bearer header.
func credentials(r *http.Request) (string, bool) {
	if _, pass, ok := r.BasicAuth(); ok && pass != "" {
		return pass, true
	}
	if b, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok && strings.TrimSpace(b) != "" {
		return strings.TrimSpace(b), true
	}
	return "", false
}

// parse splits /v2/<repo>/(manifests|blobs|tags)/... into the repository and the kind.
func parse(path string) (repo, kind string, ok bool) {
	rest := strings.TrimPrefix(path, "/v2/")
	for _, k := range []string{"/manifests/", "/blobs/", "/tags/"} {
		if i := strings.LastIndex(rest, k); i > 0 {
			repo = rest[:i]
			if strings.Contains(repo, "//") || strings.Contains(repo, "..") {
				return "", "", false
			}
			return repo, strings.Trim(k, "/"), true
		}
	}
	return "", "", false
}

func displayName(u *authnv1.UserInfo) string {
	// system:serviceaccount:<platform namespace>:u-<name> is platform user <name>.
	if parts := strings.Split(u.Username, ":"); len(parts) == 4 && parts[0] == "system" && parts[1] == "serviceaccount" && strings.HasPrefix(parts[3], "u-") {
		return "user " + strings.TrimPrefix(parts[3], "u-")
	}
	return u.Username
}

func (p *Proxy) authenticate(w http.ResponseWriter, r *http.Request, token string) (*authnv1.UserInfo, bool) {
	sum := sha256.Sum256([]byte(token))
	key := "t:" + base64.RawStdEncoding.EncodeToString(sum[:])
	if c, ok := p.get(key); ok {
		if c.user == nil {
			challenge(w, c.err)
			return nil, false
		}
		return c.user, true
	}
	v, err, _ := p.flight.Do(key, func() (any, error) {
		if c, ok := p.get(key); ok {
			return c, nil
		}
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), reviewTimeout)
		defer cancel()
		tr, err := p.Kube.AuthenticationV1().TokenReviews().Create(ctx, &authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
		if err != nil {
			return nil, err
		}
		c := cached{err: "the password is not a valid Kubernetes token (revoked, expired or not one): log in to the platform again"}
		if tr.Status.Authenticated {
			u := tr.Status.User
			c = cached{user: &u}
		} else {
			p.Log.Warn("bad credentials", "remote", r.RemoteAddr) // once per review, as before: not for cached refusals
		}
		p.put(key, c)
		return c, nil
	})
	if err != nil {
		p.Log.Error("token review failed", "err", err)
		writeError(w, http.StatusServiceUnavailable, "UNAVAILABLE", "the access check could not ask the API server; retry")
		return nil, false
	}
	c := v.(cached)
	if c.user == nil {
		challenge(w, c.err)
		return nil, false
	}
	return c.user, true
}

func (p *Proxy) authorize(ctx context.Context, u *authnv1.UserInfo, ns, name, verb string) (bool, error) {
	key := "a:" + u.Username + "\x00" + ns + "\x00" + name + "\x00" + verb
	if c, ok := p.get(key); ok {
		return c.allowed, nil
	}
	v, err, _ := p.flight.Do(key, func() (any, error) {
		if c, ok := p.get(key); ok {
			return c.allowed, nil
		}
		extra := map[string]authzv1.ExtraValue{}
		for k, v := range u.Extra {
			extra[k] = authzv1.ExtraValue(v)
		}
		sar := &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
			User: u.Username, UID: u.UID, Groups: u.Groups, Extra: extra,
			ResourceAttributes: &authzv1.ResourceAttributes{Namespace: ns, Verb: verb, Group: Group, Resource: Resource, Name: name},
		}}
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), reviewTimeout)
		defer cancel()
		res, err := p.Kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
		if err != nil {
			return false, err
		}
		p.put(key, cached{allowed: res.Status.Allowed})
		return res.Status.Allowed, nil
	})
	if err != nil {
		return false, err
	}
	return v.(bool), nil
}

func (p *Proxy) get(key string) (cached, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	c, ok := p.cache[key]
	if !ok || !p.Now().Before(c.expires) {
		return cached{}, false
	}
	return c, true
}

func (p *Proxy) put(key string, c cached) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.Now()
	if len(p.cache) >= maxCache {
		for k, e := range p.cache {
			if !now.Before(e.expires) {
				delete(p.cache, k)
			}
		}
		if len(p.cache) >= maxCache {
			p.cache = map[string]cached{}
		}
	}
	c.expires = now.Add(p.CacheTTL)
	p.cache[key] = c
}

func challenge(w http.ResponseWriter, msg string) {
	w.Header().Set("WWW-Authenticate", fmt.Sprintf("Basic realm=%q", Realm))
	writeError(w, http.StatusUnauthorized, "UNAUTHORIZED", msg)
}

// writeError answers in the registry API's error format.
func writeError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"errors": []map[string]any{{"code": code, "message": msg}}})
}

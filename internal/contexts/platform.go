package contexts

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"k8s.io/client-go/rest"

	"github.com/devtool/devtool/internal/atomicfile"
	"github.com/devtool/devtool/internal/buildinfo"
	"github.com/devtool/devtool/internal/errs"
	"github.com/devtool/devtool/internal/platform/api"
	"github.com/devtool/devtool/internal/platform/client"
	"github.com/devtool/devtool/internal/safefile"
)

// ErrNoPlatformCredentials says a platform context has no API token.
var ErrNoPlatformCredentials = errors.New("no API token for the platform")

// maxCABytes caps a CA file named by --ca-cert or DEVTOOL_CA_CERT.
const maxCABytes = 1 << 20

// ReadCAFile reads a PEM CA file named by the user (--ca-cert, DEVTOOL_CA_CERT) and checks it holds a certificate.
func ReadCAFile(path, what string) ([]byte, error) {
	data, err := safefile.Read(path, maxCABytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if _, err := client.TLSConfig(data); err != nil {
		return nil, fmt.Errorf("%s %s: %v", what, path, err)
	}
	return data, nil
}

// EnvContext is the platform context DEVTOOL_URL, DEVTOOL_TOKEN, DEVTOOL_NAMESPACE and DEVTOOL_CA_CERT
// describe, for CI with no saved context; nil when DEVTOOL_URL is not set. A saved platform context of
// the same URL in cfg gives what the variables do not (its CA, namespace, registry); it is not changed.
func EnvContext(getenv func(string) string, cfg *Config) (*Context, error) {
	if getenv == nil || getenv(api.EnvURL) == "" {
		return nil, nil
	}
	url, err := client.NormalizeURL(getenv(api.EnvURL))
	if err != nil {
		return nil, errs.WithHint(fmt.Errorf("%s: %w", api.EnvURL, err), "set it to the platform's address, as https://platform.example")
	}
	c := &Context{Name: url, IsDevtool: true, fromEnv: true}
	if cfg != nil {
		if saved := cfg.Contexts[url]; saved != nil && saved.IsDevtool {
			cp := *saved
			c = &cp
		}
	}
	return withEnv(c, getenv)
}

// withEnv applies DEVTOOL_TOKEN, DEVTOOL_NAMESPACE and DEVTOOL_CA_CERT to a copy of platform context c.
func withEnv(saved *Context, getenv func(string) string) (*Context, error) {
	cp := *saved
	c := &cp
	if t := getenv(api.EnvToken); t != "" {
		c.Token = t
	}
	if ns := getenv(api.EnvNamespace); ns != "" {
		if err := ValidateNamespace(ns); err != nil {
			return nil, fmt.Errorf("%s: %w", api.EnvNamespace, err)
		}
		c.Namespace = ns
	}
	if p := getenv(api.EnvCACert); p != "" {
		ca, err := ReadCAFile(p, api.EnvCACert)
		if err != nil {
			return nil, err
		}
		c.Certificate = string(ca)
	}
	return c, nil
}

// PlatformClient builds the API client of a platform context (its URL, token and CA).
func PlatformClient(c *Context) (*client.Client, error) {
	return client.New(client.Options{URL: c.Name, Token: c.Token, CA: []byte(c.Certificate),
		UserAgent: "devtool/" + buildinfo.Get().Version})
}

// needToken fails with an auth error when the platform context has no token.
func needToken(c *Context) error {
	if c.Token != "" {
		return nil
	}
	return &errs.AuthError{Err: fmt.Errorf("platform context %s: %w", c.Name, ErrNoPlatformCredentials),
		Hint: fmt.Sprintf("run 'devtool context use %s --token <token>', or set %s", c.Name, api.EnvToken)}
}

// kubeTokenRecord is a cached kube token of one platform user.
type kubeTokenRecord struct {
	URL     string        `json:"url"`
	Issued  time.Time     `json:"issued"`
	Token   api.KubeToken `json:"kubeToken"`
	TokenID string        `json:"apiTokenId,omitempty"`
}

// renewAt is when a token issued at issued and expiring at exp should be replaced: once 80% of its
// life is spent.
func renewAt(issued, exp time.Time) time.Time {
	return issued.Add(exp.Sub(issued) * 8 / 10)
}

// KubeTokens fetches short-lived Kubernetes tokens of a platform user (POST /api/v1/kubetoken)
// and caches them under <home>/.devtool/kubetoken/ (0600, written atomically) until 80% of their
// life is spent. The cache is keyed by platform URL and API token, so another token (another user)
// never sees it.
type KubeTokens struct {
	Store *Store
	// Now is the clock (tests); nil is time.Now.
	Now func() time.Time
}

func (k *KubeTokens) now() time.Time {
	if k.Now != nil {
		return k.Now()
	}
	return time.Now()
}

func (k *KubeTokens) path(c *Context) string {
	sum := sha256.Sum256([]byte(c.Name + "\n" + c.Token))
	return filepath.Join(k.Store.Dir, "kubetoken", hex.EncodeToString(sum[:12])+".json")
}

// Get returns a kube token with at least 20% of its life left, from the cache or the platform.
func (k *KubeTokens) Get(ctx context.Context, c *Context) (*api.KubeToken, error) {
	rec, err := k.get(ctx, c)
	if err != nil {
		return nil, err
	}
	return &rec.Token, nil
}

func (k *KubeTokens) get(ctx context.Context, c *Context) (*kubeTokenRecord, error) {
	if err := needToken(c); err != nil {
		return nil, err
	}
	p := k.path(c)
	if data, err := safefile.Read(p, 1<<20); err == nil {
		var rec kubeTokenRecord
		if json.Unmarshal(data, &rec) == nil && rec.URL == c.Name && rec.Token.Token != "" &&
			k.now().Before(rec.renewAt()) {
			return &rec, nil
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("reading the cached Kubernetes token: %w", err)
	}
	return k.renew(ctx, c)
}

// GetRenewAt is Get, with the time the token should be replaced (80% of its life): what a credential
// plugin gives as the expiry, so its caller asks again in time.
func (k *KubeTokens) GetRenewAt(ctx context.Context, c *Context) (*api.KubeToken, time.Time, error) {
	rec, err := k.get(ctx, c)
	if err != nil {
		return nil, time.Time{}, err
	}
	return &rec.Token, rec.renewAt(), nil
}

func (r *kubeTokenRecord) renewAt() time.Time { return renewAt(r.Issued, r.Token.ExpirationTimestamp) }

// renew asks the platform for a new kube token and caches it.
func (k *KubeTokens) renew(ctx context.Context, c *Context) (*kubeTokenRecord, error) {
	pc, err := PlatformClient(c)
	if err != nil {
		return nil, err
	}
	defer pc.Close()
	issued := k.now()
	kt, err := pc.KubeToken(ctx, 0)
	if err != nil {
		return nil, err
	}
	id, _ := client.TokenID(c.Token)
	rec := &kubeTokenRecord{URL: c.Name, Issued: issued, Token: *kt, TokenID: id}
	data, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := k.Store.ensureDir(k.Store.Dir); err != nil {
		return nil, err
	}
	if err := k.Store.ensureDir(filepath.Dir(k.path(c))); err != nil {
		return nil, err
	}
	if err := atomicfile.WriteChecked(k.path(c), append(data, '\n'), 0o600, nil); err != nil {
		return nil, err
	}
	return rec, nil
}

// Forget removes the cached token of c (after the cluster refused it).
func (k *KubeTokens) Forget(c *Context) {
	_ = os.Remove(k.path(c))
}

// PlatformRESTConfig is the Kubernetes client configuration of a platform user: the cluster's address
// and CA from the platform, and a bearer token of the user's ServiceAccount from KubeTokens, renewed
// in the background of requests once 80% of its life is spent (and at once after a 401). The
// platform's admin credentials are never involved.
func PlatformRESTConfig(ctx context.Context, tokens *KubeTokens, c *Context) (*rest.Config, error) {
	rec, err := tokens.get(ctx, c)
	if err != nil {
		return nil, fmt.Errorf("platform context %s: getting Kubernetes credentials: %w", c.Name, err)
	}
	kt := &rec.Token
	src := &tokenSource{tokens: tokens, c: c, cur: rec}
	cfg := &rest.Config{
		Host:            kt.APIServer,
		TLSClientConfig: rest.TLSClientConfig{CAData: []byte(kt.APIServerCA)},
		Dial:            client.Dial,
		WrapTransport:   func(rt http.RoundTripper) http.RoundTripper { return &bearerRoundTripper{base: rt, src: src} },
	}
	return cfg, nil
}

// tokenSource hands out the current kube token, renewing it when stale.
type tokenSource struct {
	tokens *KubeTokens
	c      *Context

	mu  sync.Mutex
	cur *kubeTokenRecord
}

// token returns the current token; refused, when not "", is a token the cluster refused: it is
// dropped from the cache and a new one fetched.
func (s *tokenSource) token(ctx context.Context, refused string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur != nil && s.cur.Token.Token == refused {
		s.tokens.Forget(s.c)
		s.cur = nil
	}
	if s.cur == nil || !s.tokens.now().Before(s.cur.renewAt()) {
		rec, err := s.tokens.get(ctx, s.c)
		if err != nil {
			return "", err
		}
		s.cur = rec
	}
	return s.cur.Token.Token, nil
}

type bearerRoundTripper struct {
	base http.RoundTripper
	src  *tokenSource
}

func (rt *bearerRoundTripper) WrappedRoundTripper() http.RoundTripper { return rt.base }

func (rt *bearerRoundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	tok, err := rt.src.token(req.Context(), "")
	if err != nil {
		return nil, err
	}
	r := req.Clone(req.Context())
	r.Header.Set("Authorization", "Bearer "+tok)
	resp, err := rt.base.RoundTrip(r)
	if err == nil && resp.StatusCode == http.StatusUnauthorized && (req.Body == nil || req.GetBody != nil) {
		// The token was refused (revoked ServiceAccount token, clock skew): renew once and retry.
		next, terr := rt.src.token(req.Context(), tok)
		if terr != nil || next == tok {
			return resp, nil
		}
		r2 := req.Clone(req.Context())
		if req.GetBody != nil {
			if r2.Body, err = req.GetBody(); err != nil {
				return resp, nil
			}
		}
		resp.Body.Close()
		r2.Header.Set("Authorization", "Bearer "+next)
		return rt.base.RoundTrip(r2)
	}
	return resp, err
}

// SavePlatform stores a platform context (replacing one of the same URL) and makes it current.
func SavePlatform(store *Store, c *Context) error {
	c.IsDevtool, c.fromEnv = true, false
	return store.Update(func(cfg *Config) error {
		cp := *c
		cfg.Contexts[c.Name] = &cp
		cfg.CurrentContext = c.Name
		return nil
	})
}

// EnsureNamespace creates namespace ns on the platform of c when the user cannot see it yet
// (POST /api/v1/namespaces, idempotent); created reports whether it was made now.
func EnsureNamespace(ctx context.Context, c *Context, ns string) (created bool, err error) {
	pc, err := PlatformClient(c)
	if err != nil {
		return false, err
	}
	defer pc.Close()
	if _, err := pc.Namespace(ctx, ns); err == nil {
		return false, nil
	} else if !client.IsNotFound(err) {
		return false, err
	}
	_, created, err = pc.CreateNamespace(ctx, ns)
	return created, err
}

// StoredSecrets returns the platform's stored secrets a command uses as the third source of
// ${NAME} (after the shell and .env: spec A6) and in its deploy and destroy commands' environment:
// the caller's, its namespace's and the admin-wide ones, merged by the platform (namespace over
// user over admin). It is nil, without touching the network, when the context in use is not a
// platform (or cannot be selected: the command's own resolution reports why). The values must
// never be printed (internal/secretmask).
func (r *Resolver) StoredSecrets(ctx context.Context, flags Flags) (map[string]string, error) {
	sel, err := r.Select(flags)
	if err != nil || sel.Context == nil || !sel.Context.IsDevtool {
		return nil, nil
	}
	c := sel.Context
	if err := needToken(c); err != nil {
		return nil, err
	}
	pc, err := PlatformClient(c)
	if err != nil {
		return nil, err
	}
	defer pc.Close()
	ns := sel.Namespace
	if ns == "" { // a context from DEVTOOL_URL alone: the user's personal namespace
		me, err := pc.Me(ctx)
		if err != nil {
			return nil, err
		}
		ns = firstNonEmpty(me.Namespace, me.Name)
	}
	vals, err := pc.ResolvedSecrets(ctx, ns)
	if err != nil {
		return nil, fmt.Errorf("reading the stored secrets of platform %s: %w", c.Name, err)
	}
	return vals, nil
}

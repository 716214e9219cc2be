// Package labelproxy is the labelling proxy that deploy commands (kubectl, helm, anything using a
// kubeconfig) talk to instead of the API server, so that destroy can find what they created.
//
// The proxy listens on 127.0.0.1 only, on a free port, with a CA, server certificate and bearer token
// made in memory for each run. Requests without the token get 401. Authenticated requests go to the
// real API server with the user's own credentials (never the proxy's token). Writes of stored objects
// (create, update, server-side apply, merge and strategic merge patches, in JSON or YAML) get the
// configured labels in metadata.labels and in the pod templates of workloads; selectors are never
// touched. Everything else — reads, watches, logs, subresources, exec/attach/port-forward upgrades —
// passes through unchanged. See docs/labelproxy.md.
package labelproxy

import (
	"bytes"
	"context"
	"crypto/subtle"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/devtool/devtool/internal/atomicfile"
	"github.com/devtool/devtool/internal/labels"
)

// DefaultMaxBodyBytes caps the bodies the proxy reads to label them.
const DefaultMaxBodyBytes = 10 << 20

// DefaultValidity is how long the proxy's certificates are valid: longer than any deploy, short
// enough that a leaked kubeconfig is useless soon (it already is once the process ends, since the
// proxy and its keys only live in memory).
const DefaultValidity = 12 * time.Hour

// Options configures a proxy.
type Options struct {
	// Upstream is the real API server and the user's credentials for it.
	Upstream *rest.Config
	// Labels are added to the objects and pod templates written through the proxy.
	Labels map[string]string
	// ClusterLabels are added as well to the metadata of cluster-scoped objects (a request whose
	// path names no namespace, and Namespaces), never to pod templates: deploy puts the
	// environment's namespace there, since deployed-by alone does not tell two namespaces'
	// environments of the same name apart outside a namespace.
	ClusterLabels map[string]string
	// Logger receives debug logs (what was labelled, what passed through unlabelled); nil discards.
	Logger *slog.Logger
	// Warn receives, once per method and path, a sentence for the user about a write forwarded
	// without labels that destroy will therefore not find (encoded, CBOR or unreadable protobuf
	// bodies). nil: only the logger hears of it.
	Warn func(string)
	// MaxBodyBytes caps a write body the proxy must read to label it; 0 means DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// Validity of the certificates; 0 means DefaultValidity.
	Validity time.Duration
}

// Proxy is a running labelling proxy. It stops when the context given to Start is cancelled.
type Proxy struct {
	url   string
	creds *credentials
	log   *slog.Logger
	lab   labeler
	max   int64

	warn     func(string)
	warnMu   sync.Mutex
	warnSeen map[string]bool

	proxy, upgrade *httputil.ReverseProxy

	// handlers counts requests being served: srv.Close does not wait for them, and the upstream
	// connections they use become idle (and can be closed) only once they have returned.
	// (A counter, not a WaitGroup: a request already accepted may start while the stop waits.)
	handlers atomic.Int64

	done chan struct{}
	err  error
}

// Start listens on 127.0.0.1 on a free port and serves until ctx is cancelled.
func Start(ctx context.Context, o Options) (*Proxy, error) {
	if o.Upstream == nil {
		return nil, errors.New("labelproxy: no upstream API server")
	}
	if len(o.Labels) == 0 {
		return nil, errors.New("labelproxy: no labels to add")
	}
	for _, set := range []map[string]string{o.Labels, o.ClusterLabels} {
		for k, v := range set {
			if errs := validation.IsQualifiedName(k); len(errs) > 0 {
				return nil, fmt.Errorf("labelproxy: label key %q: %s", k, strings.Join(errs, "; "))
			}
			if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
				return nil, fmt.Errorf("labelproxy: label %s value %q: %s", k, v, strings.Join(errs, "; "))
			}
		}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if o.Validity <= 0 {
		o.Validity = DefaultValidity
	}
	upstreamURL, _, err := rest.DefaultServerUrlFor(o.Upstream)
	if err != nil {
		return nil, fmt.Errorf("labelproxy: upstream address: %w", err)
	}
	rt, err := rest.TransportFor(o.Upstream)
	if err != nil {
		return nil, fmt.Errorf("labelproxy: upstream transport: %w", err)
	}
	// Connection upgrades (SPDY, WebSocket) need HTTP/1.1; the regular transport may speak HTTP/2,
	// which has no upgrades. Same credentials, HTTP/1.1 only.
	up := rest.CopyConfig(o.Upstream)
	up.NextProtos = []string{"http/1.1"}
	upRT, err := rest.TransportFor(up)
	if err != nil {
		return nil, fmt.Errorf("labelproxy: upstream transport: %w", err)
	}
	creds, err := newCredentials(o.Validity)
	if err != nil {
		return nil, fmt.Errorf("labelproxy: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("labelproxy: listening on 127.0.0.1: %w", err)
	}
	p := &Proxy{
		url:   "https://" + ln.Addr().String(),
		creds: creds,
		log:   o.Logger,
		lab:   labeler{labels: copyMap(o.Labels), cluster: copyMap(o.ClusterLabels)},
		max:   o.MaxBodyBytes,
		warn:  o.Warn,
		done:  make(chan struct{}),
	}
	p.proxy = p.reverseProxy(upstreamURL, rt)
	p.upgrade = p.reverseProxy(upstreamURL, upRT)

	srv := &http.Server{
		Handler: p,
		TLSConfig: &tls.Config{
			Certificates: []tls.Certificate{creds.server},
			MinVersion:   tls.VersionTLS12,
		},
		ReadHeaderTimeout: 30 * time.Second,
		// Request contexts end with ctx, so in-flight watches, upgrades and upstream calls stop with it.
		BaseContext: func(net.Listener) context.Context { return ctx },
		ErrorLog:    slog.NewLogLogger(o.Logger.Handler(), slog.LevelDebug),
	}
	var wg sync.WaitGroup
	wg.Add(1)
	serveErr := make(chan error, 1)
	go func() {
		defer wg.Done()
		serveErr <- srv.ServeTLS(ln, "", "")
	}()
	go func() {
		defer close(p.done)
		var err error
		select {
		case <-ctx.Done():
		case err = <-serveErr:
		}
		// No graceful drain: request contexts already ended with ctx (BaseContext), and a graceful
		// HTTP/2 shutdown would wait a second for clients that are gone.
		_ = srv.Close()
		wg.Wait()
		// their contexts ended with ctx: they return at once (bounded all the same)
		for deadline := time.Now().Add(2 * time.Second); p.handlers.Load() > 0 && time.Now().Before(deadline); {
			time.Sleep(5 * time.Millisecond)
		}
		utilnet.CloseIdleConnectionsFor(rt)
		utilnet.CloseIdleConnectionsFor(upRT)
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			p.err = fmt.Errorf("labelproxy: %w", err)
		}
	}()
	return p, nil
}

// URL is the proxy's address, https://127.0.0.1:<port>.
func (p *Proxy) URL() string { return p.url }

// Done is closed once the proxy has stopped (after ctx was cancelled) and released its connections.
func (p *Proxy) Done() <-chan struct{} { return p.done }

// Wait blocks until the proxy has stopped and returns why it stopped, if not because ctx ended.
func (p *Proxy) Wait() error {
	<-p.done
	return p.err
}

// Kubeconfig is a kubeconfig pointing at the proxy with this run's CA and token; namespace is its
// context's namespace ("" leaves it unset).
func (p *Proxy) Kubeconfig(namespace string) clientcmdapi.Config {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["devtool"] = &clientcmdapi.Cluster{Server: p.url, CertificateAuthorityData: p.creds.caPEM}
	cfg.AuthInfos["devtool"] = &clientcmdapi.AuthInfo{Token: p.creds.token}
	cfg.Contexts["devtool"] = &clientcmdapi.Context{Cluster: "devtool", AuthInfo: "devtool", Namespace: namespace}
	cfg.CurrentContext = "devtool"
	return *cfg
}

// WriteKubeconfig writes Kubeconfig(namespace) to path, readable by the owner only (0600). The file
// is replaced atomically, so a command never reads half of it.
func (p *Proxy) WriteKubeconfig(path, namespace string) error {
	data, err := clientcmd.Write(p.Kubeconfig(namespace))
	if err != nil {
		return fmt.Errorf("encoding the proxy kubeconfig: %w", err)
	}
	if err := atomicfile.Write(path, data, 0o600); err != nil {
		return fmt.Errorf("the proxy kubeconfig: %w", err)
	}
	return nil
}

func (p *Proxy) reverseProxy(upstream *url.URL, rt http.RoundTripper) *httputil.ReverseProxy {
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(upstream)
			// The user's credentials are added by rt; the proxy's token must never reach the API
			// server (client-go's auth wrappers keep an Authorization header that is already there).
			pr.Out.Header.Del("Authorization")
		},
		Transport:     rt,
		FlushInterval: -1, // watches and logs stream
		ErrorLog:      slog.NewLogLogger(p.log.Handler(), slog.LevelDebug),
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if r.Context().Err() != nil {
				return // the client went away or the proxy is stopping
			}
			p.log.Debug("labelproxy: upstream request failed", "method", r.Method, "path", r.URL.Path, "err", err)
			writeStatus(w, http.StatusBadGateway, metav1.StatusReasonServiceUnavailable,
				"devtool labelling proxy: the API server could not be reached: "+err.Error())
		},
	}
}

// ServeHTTP checks the token, labels writes, and forwards.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.handlers.Add(1)
	defer p.handlers.Add(-1)
	if !p.authorized(r) {
		writeStatus(w, http.StatusUnauthorized, metav1.StatusReasonUnauthorized, "Unauthorized")
		return
	}
	r.Header.Del("Authorization")
	// An HTTP/1 server otherwise drains and closes the request body as soon as the response starts;
	// when the API server answers before reading a streamed body (an early 4xx), the transport's
	// copy of that body then fails and it cuts the response off. HTTP/2 is always full duplex.
	_ = http.NewResponseController(w).EnableFullDuplex()
	if isUpgrade(r) {
		p.upgrade.ServeHTTP(w, r)
		return
	}
	if t, ok := parseTarget(r.URL.Path); ok && labelled(r.Method, t) && r.Body != nil && r.Body != http.NoBody {
		if !p.label(w, r, t) {
			return
		}
	}
	p.proxy.ServeHTTP(w, r)
}

// label replaces r's body by its labelled version; false means it answered the request with an error.
func (p *Proxy) label(w http.ResponseWriter, r *http.Request, t target) bool {
	mediaType, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil {
		return true // the API server will say what is wrong
	}
	if enc := r.Header.Get("Content-Encoding"); enc != "" && enc != "identity" {
		p.log.Warn("labelproxy: encoded body forwarded without labels", "method", r.Method, "path", r.URL.Path, "encoding", enc)
		p.warnUnlabelled(r, "its body is "+enc+"-encoded")
		return true
	}
	if strings.Contains(mediaType, "cbor") {
		p.log.Warn("labelproxy: CBOR body forwarded without labels", "method", r.Method, "path", r.URL.Path)
		p.warnUnlabelled(r, "its body is CBOR")
		return true
	}
	if r.ContentLength > p.max {
		p.tooLarge(w, r)
		return false
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, p.max+1))
	r.Body.Close()
	if err != nil {
		writeStatus(w, http.StatusBadRequest, metav1.StatusReasonBadRequest, "devtool labelling proxy: reading the request body: "+err.Error())
		return false
	}
	if int64(len(body)) > p.max {
		p.tooLarge(w, r)
		return false
	}
	var out []byte
	var ct string
	var ok bool
	lab := p.lab
	lab.keepSet = fromDevtool(r)
	if mediaType == "application/vnd.kubernetes.protobuf" && (r.Method == http.MethodPost || r.Method == http.MethodPut) {
		out, ok = lab.rewriteProtobuf(r.Method, t, body) // devtool's own client sends JSON
		ct = mediaType
	} else {
		out, ct, ok = lab.rewrite(r.Method, mediaType, t, body)
	}
	if !ok {
		level := slog.LevelDebug // JSON patches and bodies the API server will reject anyway
		if strings.Contains(mediaType, "protobuf") {
			level = slog.LevelWarn // an object that destroy will not find
			p.warnUnlabelled(r, "its protobuf body could not be read")
		}
		p.log.Log(r.Context(), level, "labelproxy: forwarded without labels", "method", r.Method, "path", r.URL.Path, "contentType", mediaType)
		out = body
	} else {
		p.log.Debug("labelproxy: labelled", "method", r.Method, "path", r.URL.Path)
		r.Header.Set("Content-Type", ct)
	}
	r.Body = io.NopCloser(bytes.NewReader(out))
	r.ContentLength = int64(len(out))
	r.Header.Set("Content-Length", strconv.Itoa(len(out)))
	r.GetBody = nil
	return true
}

func (p *Proxy) tooLarge(w http.ResponseWriter, r *http.Request) {
	writeStatus(w, http.StatusRequestEntityTooLarge, metav1.StatusReasonRequestEntityTooLarge,
		fmt.Sprintf("devtool labelling proxy: the %s body for %s is larger than %d bytes, the most the proxy reads to label an object", r.Method, r.URL.Path, p.max))
}

func (p *Proxy) authorized(r *http.Request) bool {
	h := r.Header.Get("Authorization")
	const prefix = "Bearer "
	if len(h) < len(prefix) || !strings.EqualFold(h[:len(prefix)], prefix) {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(strings.TrimSpace(h[len(prefix):])), []byte(p.creds.token)) == 1
}

func isUpgrade(r *http.Request) bool {
	for _, v := range r.Header.Values("Connection") {
		for _, tok := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(tok), "upgrade") {
				return r.Header.Get("Upgrade") != ""
			}
		}
	}
	return false
}

// writeStatus answers like the API server does, so kubectl prints the message as it would its own.
func writeStatus(w http.ResponseWriter, code int, reason metav1.StatusReason, msg string) {
	b, _ := json.Marshal(metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure,
		Message:  msg,
		Reason:   reason,
		Code:     int32(code),
	})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_, _ = w.Write(b)
}

func copyMap(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// warnUnlabelled tells the user, once per method and path, that a write went through unlabelled.
func (p *Proxy) warnUnlabelled(r *http.Request, why string) {
	if p.warn == nil {
		return
	}
	key := r.Method + " " + r.URL.Path
	p.warnMu.Lock()
	if p.warnSeen == nil {
		p.warnSeen = map[string]bool{}
	}
	seen := p.warnSeen[key]
	p.warnSeen[key] = true
	p.warnMu.Unlock()
	if !seen {
		p.warn(fmt.Sprintf("%s %s was forwarded without devtool's labels (%s): destroy will not delete what it creates", r.Method, r.URL.Path, why))
	}
}

// fromDevtool reports whether r was sent by devtool's own client (a devtool command run by a
// devtool.yml command), by its User-Agent.
func fromDevtool(r *http.Request) bool {
	ua := r.Header.Get("User-Agent")
	return ua == labels.ClientUserAgent || strings.HasPrefix(ua, labels.ClientUserAgent+"/")
}

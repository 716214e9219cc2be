package ingress

import (
	"context"
	"errors"
	"fmt"
	"html"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"strings"
	"sync"
	"time"
)

// Waker wakes a backend that has no endpoint at all (a sleeping preview's workload scaled to zero):
// Wake asks for it and returns; the proxy then waits up to WakeTimeout for a ready endpoint and
// serves the request. nil (the default) answers 503 at once. Previews set it.
type Waker interface {
	Wake(ctx context.Context, b Backend) error
}

// WakeTimeout bounds how long a request waits for a woken backend.
const WakeTimeout = 2 * time.Minute

// maxAttempts bounds the endpoints one request tries after refused dials.
const maxAttempts = 3

// proxy is the data path: route, check, pick an endpoint, forward.
type proxy struct {
	table    func() *Table
	resolver *resolver
	picker   *picker
	auth     *endpointAuth // nil: private routes are refused (no keys)
	waker    Waker
	changed  func() <-chan struct{}
	rp       *httputil.ReverseProxy
	tr       *http.Transport
	log      *slog.Logger
}

type targetKey struct{}

// target is what the transport needs of a request: the backend and its endpoints.
type target struct {
	key   string
	addrs []string
	// refusedUntil, set when this request woke the backend, is how long refused dials are
	// tried again: a woken pod is ready (no readiness probe) before its server listens, and
	// the request that woke it must not get a 502 for that.
	refusedUntil time.Time
}

// wokenRefusedWindow bounds how long a request that woke its backend keeps dialing while
// every endpoint refuses; retryAfterRefusedMin doubling to retryAfterRefusedMax between tries.
const (
	wokenRefusedWindow   = 30 * time.Second
	retryAfterRefusedMin = 50 * time.Millisecond
	retryAfterRefusedMax = time.Second
)

func newProxy(table func() *Table, res *resolver, auth *endpointAuth, waker Waker, changed func() <-chan struct{}, log *slog.Logger) *proxy {
	d := &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}
	tr := &http.Transport{
		DialContext:           d.DialContext,
		MaxIdleConns:          1024,
		MaxIdleConnsPerHost:   128,
		IdleConnTimeout:       90 * time.Second,
		ExpectContinueTimeout: time.Second,
		DisableCompression:    true, // bytes pass through as the backend sends them
		ReadBufferSize:        64 << 10,
		WriteBufferSize:       64 << 10,
	}
	p := &proxy{table: table, resolver: res, picker: newPicker(time.Now), auth: auth, waker: waker, changed: changed, tr: tr, log: log}
	p.rp = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetXForwarded()
			pr.Out.URL.Scheme = "http"
			pr.Out.URL.Host = "backend.invalid" // the transport dials an endpoint of the target
			pr.Out.Host = pr.In.Host            // the backend sees the name it was asked by
			stripCookie(pr.Out.Header, CookieName)
		},
		Transport:  &retryTransport{base: tr, picker: p.picker},
		BufferPool: bufferPool{},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if errors.Is(err, context.Canceled) || r.Context().Err() != nil {
				return // the client left
			}
			tg, _ := r.Context().Value(targetKey{}).(*target)
			name := ""
			if tg != nil {
				name = tg.key
			}
			p.log.Warn("backend failed", "backend", name, "host", r.Host, "path", r.URL.Path, "err", err.Error())
			problem(w, r, http.StatusBadGateway, "Bad gateway", fmt.Sprintf("The backend %s did not answer: %v", name, err))
		},
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	return p
}

func (p *proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if c := CleanPath(r.URL.Path); c != r.URL.Path {
		r.URL.Path, r.URL.RawPath = c, ""
	}
	route, ok := p.table().Match(r.Host, r.URL.Path)
	if !ok {
		problem(w, r, http.StatusNotFound, "Not found", "No endpoint is served at "+r.Host+".")
		return
	}
	if r.URL.Path == AuthPath {
		if p.auth == nil {
			problem(w, r, http.StatusNotFound, "Not found", "This ingress has no platform login.")
			return
		}
		p.auth.redeem(w, r)
		return
	}
	if route.Private {
		if p.auth == nil {
			problem(w, r, http.StatusServiceUnavailable, "Private endpoint", "This endpoint is private and the ingress has no platform login configured.")
			return
		}
		if !p.auth.check(w, r, route) {
			return
		}
	}
	tg := &target{key: route.Backend.String()}
	addrs, err := p.resolver.resolve(route.Backend)
	if errors.Is(err, errNoEndpoint) && p.waker != nil {
		addrs, err = p.wake(r.Context(), route.Backend)
		tg.refusedUntil = time.Now().Add(wokenRefusedWindow)
	}
	if err != nil {
		problem(w, r, http.StatusServiceUnavailable, "Service unavailable", err.Error())
		return
	}
	tg.addrs = addrs
	ctx := context.WithValue(r.Context(), targetKey{}, tg)
	p.rp.ServeHTTP(w, r.WithContext(ctx))
}

// wake asks the Waker for b and waits for one of its endpoints to be ready.
func (p *proxy) wake(ctx context.Context, b Backend) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, WakeTimeout)
	defer cancel()
	ch := p.changed() // taken before asking: no change is missed
	if err := p.waker.Wake(ctx, b); err != nil {
		return nil, fmt.Errorf("waking %s: %w", b, err)
	}
	for {
		addrs, err := p.resolver.resolve(b)
		if !errors.Is(err, errNoEndpoint) {
			return addrs, err
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%s did not wake within %s: %w", b, WakeTimeout, err)
		case <-ch:
			ch = p.changed()
		}
	}
}

// retryTransport dials one of the target's endpoints; when a dial fails (refused, unreachable:
// a pod that just went away), it marks that endpoint down for a while and tries the next, as long
// as nothing of the request was sent.
type retryTransport struct {
	base   http.RoundTripper
	picker *picker
}

func (t *retryTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	tg, ok := req.Context().Value(targetKey{}).(*target)
	if !ok || len(tg.addrs) == 0 {
		return nil, errors.New("no endpoint for this request")
	}
	var body *trackedBody
	if req.Body != nil && req.Body != http.NoBody {
		body = &trackedBody{rc: req.Body}
	}
	wait := retryAfterRefusedMin
	for {
		resp, again, err := t.tryEndpoints(req, tg, body)
		if !again || !time.Now().Add(wait).Before(tg.refusedUntil) {
			return resp, err
		}
		timer := time.NewTimer(wait)
		select {
		case <-req.Context().Done():
			timer.Stop()
			return nil, err
		case <-timer.C:
		}
		wait = min(2*wait, retryAfterRefusedMax)
	}
}

// tryEndpoints tries up to maxAttempts endpoints of tg; again says every try failed to dial
// before anything of the request was sent (so it may be tried again).
func (t *retryTransport) tryEndpoints(req *http.Request, tg *target, body *trackedBody) (_ *http.Response, again bool, _ error) {
	var lastErr error
	for i, addr := range t.picker.order(tg.key, tg.addrs) {
		if i == maxAttempts {
			break
		}
		out := *req // a shallow copy per attempt, as Request.WithContext makes
		u := *req.URL
		u.Host = addr
		out.URL = &u
		if body != nil {
			out.Body = body
		}
		resp, err := t.base.RoundTrip(&out)
		if err == nil {
			return resp, false, nil
		}
		lastErr = err
		if !isDialError(err) || body != nil && body.wasRead() || req.Context().Err() != nil {
			return nil, false, err
		}
		t.picker.markDown(addr)
	}
	return nil, true, lastErr
}

func isDialError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// trackedBody is a request body that knows whether a byte was read; its Close is left to the
// server (which closes every request body), so a refused dial's RoundTrip cannot spoil a retry.
type trackedBody struct {
	mu   sync.Mutex
	rc   io.ReadCloser
	read bool
}

func (b *trackedBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	b.read = true
	b.mu.Unlock()
	return b.rc.Read(p)
}

func (b *trackedBody) Close() error { return nil }

func (b *trackedBody) wasRead() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.read
}

// stripCookie removes the named cookie from the Cookie headers (the endpoint's login stays with
// the ingress; the backend never sees it).
func stripCookie(h http.Header, name string) {
	vals := h.Values("Cookie")
	if len(vals) == 0 {
		return
	}
	var kept []string
	for _, v := range vals {
		for _, part := range strings.Split(v, ";") {
			part = strings.TrimSpace(part)
			if part == "" {
				continue
			}
			if n, _, _ := strings.Cut(part, "="); n == name {
				continue
			}
			kept = append(kept, part)
		}
	}
	h.Del("Cookie")
	if len(kept) > 0 {
		h.Set("Cookie", strings.Join(kept, "; "))
	}
}

var bufPool = sync.Pool{New: func() any { b := make([]byte, 64<<10); return &b }}

type bufferPool struct{}

func (bufferPool) Get() []byte  { return *(bufPool.Get().(*[]byte)) }
func (bufferPool) Put(b []byte) { bufPool.Put(&b) }

// problem answers an error of the ingress itself: a short HTML page for browsers, text otherwise.
func problem(w http.ResponseWriter, r *http.Request, status int, title, detail string) {
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if strings.Contains(r.Header.Get("Accept"), "text/html") {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(status)
		fmt.Fprintf(w, "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>%s</title></head>\n<body><h1>%s</h1>\n<p>%s</p>\n<p><small>devtool ingress</small></p></body></html>\n",
			html.EscapeString(title), html.EscapeString(title), html.EscapeString(detail))
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	fmt.Fprintf(w, "%s: %s\n", title, detail)
}

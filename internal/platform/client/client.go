// Package client is the CLI's HTTP client of the platform API (internal/platform/api): base URL,
// bearer token, the platform's CA pinned when the context has one, a deadline on every request,
// bounded answers, and errors mapped to devtool's error types (401 is an errs.AuthError: exit 4).
//
// Host names under .localhost resolve to loopback inside devtool itself (RFC 6761, as curl and
// Chromium do), whatever the system resolver says: see Dial.
package client

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Limits of one exchange with the platform.
const (
	// DefaultTimeout bounds one request, answer included.
	DefaultTimeout = 30 * time.Second
	// MaxAnswerBytes caps a successful answer's body (a namespace list of a big installation is far less).
	MaxAnswerBytes = 4 << 20
	// maxErrorBytes caps an error answer's body.
	maxErrorBytes = 64 << 10
)

// Options configure a Client.
type Options struct {
	// URL is the platform's address, https://host[:port] (a path is not allowed).
	URL string
	// Token is the API token; empty for GET /api/v1/info only.
	Token string
	// CA is the platform's CA (PEM). When set it is the only trusted root (pinned); when empty the
	// system's roots are used.
	CA []byte
	// Timeout bounds each request (0: DefaultTimeout).
	Timeout time.Duration
	// UserAgent names the CLI and its version.
	UserAgent string
}

// Client talks to one platform as one user.
type Client struct {
	base      *url.URL
	token     string
	ua        string
	timeout   time.Duration
	http      *http.Client
	pinnedCA  bool
	urlString string
}

// ParseURL checks a platform URL: https, a host, no path beyond "/", no query, no user info. It
// returns the URL in its normal form (scheme and host lower case, no trailing slash).
func ParseURL(raw string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		return nil, fmt.Errorf("platform URL %q: %v", raw, err)
	}
	if !strings.EqualFold(u.Scheme, "https") {
		return nil, fmt.Errorf("platform URL %q: must start with https:// (the platform is only reached over TLS)", raw)
	}
	if u.Host == "" || u.Hostname() == "" {
		return nil, fmt.Errorf("platform URL %q: no host name", raw)
	}
	if u.User != nil {
		return nil, fmt.Errorf("platform URL %q: must not hold a user name or password (give the token with --token or DEVTOOL_TOKEN)", raw)
	}
	if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("platform URL %q: must be the platform's address alone, as https://host[:port]", raw)
	}
	return &url.URL{Scheme: "https", Host: strings.ToLower(u.Host)}, nil
}

// NormalizeURL is ParseURL's result as a string ("" and the error when it is not valid).
func NormalizeURL(raw string) (string, error) {
	u, err := ParseURL(raw)
	if err != nil {
		return "", err
	}
	return u.String(), nil
}

// New builds a client. It does not connect.
func New(o Options) (*Client, error) {
	base, err := ParseURL(o.URL)
	if err != nil {
		return nil, err
	}
	tlsCfg, err := TLSConfig(o.CA)
	if err != nil {
		return nil, err
	}
	timeout := o.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	tr := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           Dial,
		TLSClientConfig:       tlsCfg,
		ForceAttemptHTTP2:     true,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: timeout,
		MaxIdleConns:          4,
		IdleConnTimeout:       30 * time.Second,
	}
	ua := o.UserAgent
	if ua == "" {
		ua = "devtool"
	}
	return &Client{
		base: base, token: o.Token, ua: ua, timeout: timeout, pinnedCA: len(o.CA) > 0, urlString: base.String(),
		http: &http.Client{
			Transport: tr,
			// Never follow a redirect: it would carry the token elsewhere.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
	}, nil
}

// URL is the platform's address in its normal form.
func (c *Client) URL() string { return c.urlString }

// Close releases idle connections.
func (c *Client) Close() { c.http.CloseIdleConnections() }

// TLSConfig trusts only caPEM when given (every certificate in it), else the system's roots.
// Verification is never skipped.
func TLSConfig(caPEM []byte) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if len(caPEM) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(caPEM) {
			return nil, errors.New("the platform's CA certificate is not a PEM certificate")
		}
		cfg.RootCAs = pool
	}
	return cfg, nil
}

// IsLocalhost reports whether host is "localhost" or a name under .localhost (RFC 6761 §6.3).
func IsLocalhost(host string) bool {
	h := strings.TrimSuffix(strings.ToLower(host), ".")
	return h == "localhost" || strings.HasSuffix(h, ".localhost")
}

var dialer = &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}

// Dial is a DialContext that sends names under .localhost to loopback (127.0.0.1, then ::1)
// without asking a resolver, and dials everything else as net.Dialer does.
func Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || !IsLocalhost(host) {
		return dialer.DialContext(ctx, network, addr)
	}
	var firstErr error
	for _, ip := range []string{"127.0.0.1", "::1"} {
		if network == "tcp4" && ip == "::1" || network == "tcp6" && ip == "127.0.0.1" {
			continue
		}
		conn, err := dialer.DialContext(ctx, network, net.JoinHostPort(ip, port))
		if err == nil {
			return conn, nil
		}
		if firstErr == nil {
			firstErr = err
		}
	}
	return nil, fmt.Errorf("dialing %s (a .localhost name, so loopback): %w", addr, firstErr)
}

// do sends one request and decodes a 2xx answer into out (when not nil). It returns the status.
func (c *Client) do(ctx context.Context, method, path string, in, out any) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	var body io.Reader
	if in != nil {
		data, err := json.Marshal(in)
		if err != nil {
			return 0, fmt.Errorf("encoding the request %s %s: %w", method, path, err)
		}
		body = bytes.NewReader(data)
	}
	u := *c.base
	u.Path, u.RawQuery, _ = strings.Cut(path, "?") // a route may end in a query (?namespace=...)
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return 0, fmt.Errorf("platform request %s %s: %w", method, path, err)
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", c.ua)
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, c.transportError(ctx, method, path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp.StatusCode, c.answerError(method, path, resp)
	}
	data, err := readCapped(resp.Body, MaxAnswerBytes)
	if err != nil {
		return resp.StatusCode, fmt.Errorf("platform %s: reading the answer to %s %s: %w", c.urlString, method, path, err)
	}
	if out != nil && len(bytes.TrimSpace(data)) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			return resp.StatusCode, fmt.Errorf("platform %s: the answer to %s %s is not the expected JSON (is %s a devtool platform?): %v",
				c.urlString, method, path, c.urlString, err)
		}
	}
	return resp.StatusCode, nil
}

func readCapped(r io.Reader, max int64) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("the answer is larger than %d bytes", max)
	}
	return data, nil
}

func (c *Client) transportError(ctx context.Context, method, path string, err error) error {
	var verr *tls.CertificateVerificationError
	var uerr x509.UnknownAuthorityError
	switch {
	case errors.As(err, &verr), errors.As(err, &uerr):
		e := &TrustError{URL: c.urlString, Pinned: c.pinnedCA, Err: err}
		if verr != nil {
			e.Chain = verr.UnverifiedCertificates
		}
		return e
	case ctx.Err() == context.DeadlineExceeded && !errors.Is(err, context.Canceled):
		return fmt.Errorf("platform %s: no answer to %s %s within %s: %w", c.urlString, method, path, c.timeout, err)
	}
	return fmt.Errorf("platform %s: %s %s: %w", c.urlString, method, path, err)
}

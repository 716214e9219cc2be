package client

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"unicode"

	"github.com/devtool/devtool/internal/errs"
	"github.com/devtool/devtool/internal/platform/api"
)

// APIError is a non-2xx answer of the platform. A 401 is returned wrapped in an errs.AuthError
// (exit code 4); errors.As finds the APIError inside either way.
type APIError struct {
	URL, Method, Path string
	Status            int
	Code              string // the server's stable word (bad_request, not_found, ...); "" when the body was not the API's
	Message           string
	Field             string
	RetryAfter        string // the Retry-After header of a 429
}

func (e *APIError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "platform %s refused %s %s (%d", e.URL, e.Method, e.Path, e.Status)
	if e.Code != "" {
		b.WriteString(" " + e.Code)
	}
	b.WriteString(")")
	if e.Message != "" {
		b.WriteString(": " + e.Message)
	}
	if e.Field != "" {
		fmt.Fprintf(&b, " (field %q)", e.Field)
	}
	if e.RetryAfter != "" {
		fmt.Fprintf(&b, "; retry after %s s", e.RetryAfter)
	}
	return b.String()
}

// StatusOf returns the HTTP status of the platform's answer inside err, or 0.
func StatusOf(err error) int {
	var ae *APIError
	if errors.As(err, &ae) {
		return ae.Status
	}
	return 0
}

// IsNotFound reports a 404 of the platform (also what another user's namespace answers).
func IsNotFound(err error) bool { return StatusOf(err) == http.StatusNotFound }

// IsUnauthorized reports a 401: no token, or a revoked, expired or unknown one.
func IsUnauthorized(err error) bool { return StatusOf(err) == http.StatusUnauthorized }

// answerError turns a non-2xx answer into an APIError (wrapped in errs.AuthError for 401).
func (c *Client) answerError(method, path string, resp *http.Response) error {
	e := &APIError{URL: c.urlString, Method: method, Path: path, Status: resp.StatusCode, RetryAfter: resp.Header.Get("Retry-After")}
	data, _ := readCapped(resp.Body, maxErrorBytes) // too large or cut: the status still says what happened
	var body api.Error
	if err := json.Unmarshal(data, &body); err == nil && (body.Error.Code != "" || body.Error.Message != "") {
		e.Code, e.Message, e.Field = body.Error.Code, printable(body.Error.Message, 500), printable(body.Error.Field, 100)
	} else {
		e.Message = http.StatusText(resp.StatusCode)
		if s := printable(string(data), 200); s != "" {
			e.Message += ": " + s
		}
	}
	if resp.StatusCode == http.StatusUnauthorized {
		return &errs.AuthError{Err: e, Hint: fmt.Sprintf(
			"the platform refused the API token (missing, revoked, expired or unknown): get a new token and run 'devtool context use %s --token <token>', or set %s",
			c.urlString, api.EnvToken)}
	}
	return e
}

// printable keeps at most n runes of s, on one line, without control characters: an answer's text
// is shown to the user and must not drive their terminal.
func printable(s string, n int) string {
	var b strings.Builder
	count := 0
	for _, r := range strings.TrimSpace(s) {
		if count >= n {
			b.WriteString("…")
			break
		}
		switch {
		case r == '\n' || r == '\r' || r == '\t':
			b.WriteRune(' ')
		case !unicode.IsPrint(r):
			b.WriteRune('?')
		default:
			b.WriteRune(r)
		}
		count++
	}
	return b.String()
}

// TrustError is a TLS certificate the client does not trust. Chain is what the server presented
// (when known): `context use` shows the CA's fingerprint from it and asks.
type TrustError struct {
	URL    string
	Pinned bool // the context's own CA was used (and did not match)
	Chain  []*x509.Certificate
	Err    error
}

func (e *TrustError) Error() string {
	if e.Pinned {
		return fmt.Sprintf("platform %s: its TLS certificate is not signed by the CA saved with the context (or given with --ca-cert / %s): %v", e.URL, api.EnvCACert, e.Err)
	}
	return fmt.Sprintf("platform %s: its TLS certificate is not trusted: %v", e.URL, e.Err)
}

func (e *TrustError) Unwrap() error { return e.Err }

// CA picks, from the presented chain, the certificate to trust: the last one that is a CA (the
// root, when the server sends it), else the leaf itself. nil when there is no chain.
func (e *TrustError) CA() *x509.Certificate {
	for i := len(e.Chain) - 1; i >= 0; i-- {
		if c := e.Chain[i]; c.BasicConstraintsValid && c.IsCA {
			return c
		}
	}
	if len(e.Chain) > 0 {
		return e.Chain[0]
	}
	return nil
}

// Fingerprint is a certificate's SHA-256 in the usual colon-separated upper-case hex.
func Fingerprint(c *x509.Certificate) string {
	sum := sha256.Sum256(c.Raw)
	parts := make([]string, len(sum))
	for i, b := range sum {
		parts[i] = fmt.Sprintf("%02X", b)
	}
	return strings.Join(parts, ":")
}

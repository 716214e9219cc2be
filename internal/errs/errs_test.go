package errs

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestExitCodesAndHints(t *testing.T) {
	nsGone := apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, "dev")
	dial := &url.Error{Op: "Get", URL: "https://127.0.0.1:1/api", Err: &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}}
	tlsErr := &url.Error{Op: "Get", URL: "https://127.0.0.1:1/api", Err: x509.UnknownAuthorityError{}}
	cases := []struct {
		name     string
		err      error
		code     int
		wantHint string
	}{
		{"nil", nil, ExitOK, ""},
		{"plain", errors.New("boom"), ExitError, ""},
		{"usage", FlagErrorf("--timeout must be positive"), ExitUsage, ""},
		{"wrapped usage", fmt.Errorf("deploy: %w", FlagErrorf("bad")), ExitUsage, ""},
		{"cancelled", context.Canceled, ExitCancelled, ""},
		{"wrapped cancelled", fmt.Errorf("deploying x: %w", context.Canceled), ExitCancelled, ""},
		{"auth error", &AuthError{Err: errors.New("token expired"), Hint: "log in"}, ExitAuth, "log in"},
		{"401", apierrors.NewUnauthorized("no"), ExitAuth, "401"},
		{"403", apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "x", errors.New("no")), ExitError, "403"},
		{"missing namespace", fmt.Errorf("deploy lock: %w", nsGone), ExitError, "namespace does not exist"},
		{"transport", fmt.Errorf("listing: %w", dial), ExitError, "cannot be reached"},
		{"x509", tlsErr, ExitError, "TLS certificate"},
		{"user hint", WithHint(errors.New("no context"), "run devtool context use"), ExitError, "context use"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := ExitCode(c.err); got != c.code {
				t.Errorf("ExitCode = %d, want %d", got, c.code)
			}
			h := Hint(c.err)
			if c.wantHint == "" && h != "" {
				t.Errorf("unexpected hint %q", h)
			}
			if c.wantHint != "" && !strings.Contains(h, c.wantHint) {
				t.Errorf("hint %q does not mention %q", h, c.wantHint)
			}
		})
	}
}

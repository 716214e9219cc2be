package server

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/devtool/devtool/internal/platform/api"
	"github.com/devtool/devtool/internal/platform/pki"
)

func TestBuilderCredentials(t *testing.T) {
	// Without a build service: 404, whatever the body.
	ts, tok := newTestServer(t)
	if a := call(t, ts, http.MethodPost, "/api/v1/builder/credentials", tok, api.BuilderCredentialsRequest{}); a.status != http.StatusNotFound || a.err.Code != "not_found" {
		t.Fatalf("no build service: %d %+v", a.status, a.err)
	}

	ca, _, err := pki.NewCA("builder CA", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	ts, tok, _ = newTestServerOptions(t, func(o *Options) {
		o.BuilderCA, o.Info.Builder, o.Info.Registry = ca, "tcp://127.0.0.1:31234", "127.0.0.1:31500"
	})
	_, csr, err := pki.NewClientKey("whoever")
	if err != nil {
		t.Fatal(err)
	}
	if a := call(t, ts, http.MethodPost, "/api/v1/builder/credentials", "", api.BuilderCredentialsRequest{CSR: string(csr)}); a.status != http.StatusUnauthorized {
		t.Fatalf("no token: %d", a.status)
	}
	a := call(t, ts, http.MethodPost, "/api/v1/builder/credentials", tok, api.BuilderCredentialsRequest{CSR: string(csr), ExpirationSeconds: 1800})
	if a.status != http.StatusOK {
		t.Fatalf("%d %+v", a.status, a.err)
	}
	var bc api.BuilderCredentials
	if err := json.Unmarshal(a.body, &bc); err != nil {
		t.Fatal(err)
	}
	cert, err := pki.ParseCertificate([]byte(bc.Certificate))
	if err != nil {
		t.Fatal(err)
	}
	left := time.Until(cert.NotAfter)
	if cert.Subject.CommonName != "admin" || left > 30*time.Minute || left < 29*time.Minute || !bc.Expires.Equal(cert.NotAfter) ||
		bc.CA != string(ca.CertPEM) || bc.Builder != "tcp://127.0.0.1:31234" || bc.Registry != "127.0.0.1:31500" {
		t.Fatalf("answer: CN %q, %v left, %+v", cert.Subject.CommonName, left, bc)
	}
	for _, tc := range []struct {
		body  any
		field string
	}{
		{api.BuilderCredentialsRequest{CSR: "not a request"}, "csr"},
		{api.BuilderCredentialsRequest{CSR: string(csr), ExpirationSeconds: 60}, "expirationSeconds"},
		{api.BuilderCredentialsRequest{CSR: string(csr), ExpirationSeconds: 7 * 86400}, "expirationSeconds"},
		{`{"csr": 1}`, "csr"},
	} {
		if a := call(t, ts, http.MethodPost, "/api/v1/builder/credentials", tok, tc.body); a.status != http.StatusBadRequest || a.err.Field != tc.field {
			t.Errorf("%v: %d field %q, want 400 field %q", tc.body, a.status, a.err.Field, tc.field)
		}
	}
}

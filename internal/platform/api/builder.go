package api

import "time"

// BuilderCredentialsRequest is POST /api/v1/builder/credentials: a client certificate for the
// hosted BuildKit (mTLS). The client makes its own key and sends a certificate request for it; the
// key never leaves the client. The platform ignores the names the request asks for: the certificate
// names the caller and can only authenticate a client. 404 (not_found) when the platform has no
// build service.
type BuilderCredentialsRequest struct {
	// CSR is a PEM "CERTIFICATE REQUEST" (ECDSA P-256/P-384, Ed25519 or RSA ≥ 2048), at most 16 KiB.
	CSR string `json:"csr"`
	// ExpirationSeconds: 0 means 3600; between 600 and 86400.
	ExpirationSeconds int64 `json:"expirationSeconds,omitempty"`
}

// BuilderCredentials answers POST /api/v1/builder/credentials.
type BuilderCredentials struct {
	Certificate string    `json:"certificate"` // PEM client certificate, signed by the builder CA
	CA          string    `json:"ca"`          // PEM CA of BuildKit's serving certificate (the builder CA)
	Expires     time.Time `json:"expires"`     // the certificate's NotAfter
	Builder     string    `json:"builder"`     // BuildKit's address, as in Info
	Registry    string    `json:"registry"`    // the hosted registry, as in Info
}

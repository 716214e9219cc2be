package server

import (
	"fmt"
	"net/http"
	"time"

	"github.com/devtool/devtool/internal/platform/api"
	"github.com/devtool/devtool/internal/platform/pki"
	"github.com/devtool/devtool/internal/platform/store"
)

// builderCredentials signs a client certificate for the hosted BuildKit
// (POST /api/v1/builder/credentials). BuildKit itself authorizes nothing beyond "holds a
// certificate of the builder CA": pushes are checked by the registry with the user's own
// Kubernetes token, so the certificate lets a user build, and only push where they may.
func (s *Server) builderCredentials(w http.ResponseWriter, r *http.Request, c caller) {
	if s.o.BuilderCA == nil || s.o.Info.Builder == "" {
		writeError(w, http.StatusNotFound, "not_found", "this platform has no hosted build service", "")
		return
	}
	var req api.BuilderCredentialsRequest
	if !s.read(w, r, &req) {
		return
	}
	lifetime := time.Duration(req.ExpirationSeconds) * time.Second
	if req.ExpirationSeconds != 0 && (lifetime < pki.MinClientLifetime || lifetime > pki.MaxClientLifetime) {
		writeError(w, http.StatusBadRequest, "bad_request", fmt.Sprintf("expirationSeconds: between %d and %d (0: %d)",
			int(pki.MinClientLifetime/time.Second), int(pki.MaxClientLifetime/time.Second), int(pki.DefaultClientLifetime/time.Second)), "expirationSeconds")
		return
	}
	cert, exp, err := s.o.BuilderCA.SignClient([]byte(req.CSR), c.user.Name, s.o.Now(), lifetime)
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", err.Error(), "csr")
		return
	}
	s.audit(r, c, store.Audit{Action: "issue", Kind: "BuilderCertificate", Name: c.user.Name, Detail: "until " + exp.UTC().Format(time.RFC3339)})
	writeJSON(w, http.StatusOK, api.BuilderCredentials{Certificate: string(cert), CA: string(s.o.BuilderCA.CertPEM),
		Expires: exp.UTC(), Builder: s.o.Info.Builder, Registry: s.o.Info.Registry})
}

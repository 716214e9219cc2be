// Package clienttest is a unit fake of the platform API for the CLI's tests: an httptest TLS
// server implementing, in memory, the routes the CLI uses (info, me, namespaces and their members,
// kubetoken, tokens), with the contract's status codes and error bodies. It proves units only; the
// integration tests run the real platform.
package clienttest

import (
	"crypto/sha256"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/devtool/devtool/internal/platform/api"
	"github.com/devtool/devtool/internal/platform/pki"
)

// Fake is a platform API in memory.
type Fake struct {
	Server *httptest.Server
	// CAPEM is the PEM of the server's certificate (its own issuer: httptest's is self-signed).
	CAPEM []byte

	mu         sync.Mutex
	Info       api.Info
	tokens     map[string]string // token -> user
	users      map[string]bool   // user -> admin
	namespaces map[string]*api.Namespace
	// KubeTokenTTL is the life of the kube tokens it issues (default 1h).
	KubeTokenTTL time.Duration
	// KubeTokens counts POST /api/v1/kubetoken.
	KubeTokens int
	// Requests records "METHOD path" of every request.
	Requests []string
	// Secrets are the resolved stored secrets GET /api/v1/secrets/values answers, by user (the
	// namespace asked for is recorded in Requests' query, SecretsNamespaces).
	Secrets           map[string]map[string]string
	SecretsNamespaces []string
	// AnalyticsEvents are the bodies of POST /api/v1/analytics, as sent (accepted only while
	// Info.Analytics is true; 403 otherwise, as the platform answers).
	AnalyticsEvents []json.RawMessage
	// BuilderCA, when set, makes POST /api/v1/builder/credentials sign client certificates (as the
	// platform does, for Info.Builder); without it the route answers 404 (no build service).
	BuilderCA *pki.CA
	// BuilderCerts counts the certificates signed.
	BuilderCerts int
	// Now is the clock certificates are signed at (nil: time.Now).
	Now func() time.Time
}

// SetBuilderCA gives the fake a build service at builder whose client certificates ca signs.
func (f *Fake) SetBuilderCA(ca *pki.CA, builder, registry string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.BuilderCA, f.Info.Builder, f.Info.Registry = ca, builder, registry
}

// BuilderCertsSigned returns BuilderCerts.
func (f *Fake) BuilderCertsSigned() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.BuilderCerts
}

// SetSecrets sets the stored secrets user's commands resolve.
func (f *Fake) SetSecrets(user string, values map[string]string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.Secrets == nil {
		f.Secrets = map[string]map[string]string{}
	}
	f.Secrets[user] = values
}

// SetAnalytics says whether the fake platform's admin allows analytics.
func (f *Fake) SetAnalytics(allowed bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Info.Analytics = allowed
}

// Events returns a copy of the analytics events received.
func (f *Fake) Events() []json.RawMessage {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]json.RawMessage(nil), f.AnalyticsEvents...)
}

// RequestsSeen returns a copy of Requests.
func (f *Fake) RequestsSeen() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.Requests...)
}

// New starts a fake with one admin user "admin" whose token is AdminToken.
func New(t testing.TB) *Fake {
	f := &Fake{
		tokens: map[string]string{}, users: map[string]bool{}, namespaces: map[string]*api.Namespace{},
		KubeTokenTTL: time.Hour,
	}
	f.Server = httptest.NewTLSServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Server.Close)
	f.CAPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: f.Server.Certificate().Raw})
	f.Info = api.Info{Version: "0.1.0", APIServer: "https://127.0.0.1:1", APIServerCA: string(f.CAPEM),
		Registry: "registry.example:5000", Domain: "apps.example"}
	f.AddUser("admin", true)
	return f
}

// URL is the server's address.
func (f *Fake) URL() string { return f.Server.URL }

// AdminToken is the admin's token.
const AdminToken = "dvt_00000000000000ad_adminsecretadminsecretadminsecretadminsec"

// AddUser creates a user with a personal namespace and returns its token.
func (f *Fake) AddUser(name string, admin bool) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.users[name] = admin
	tok := "dvt_" + fmt.Sprintf("%x", sha256.Sum256([]byte(name)))[:16] + "_" + strings.Repeat("s", 43)
	if admin && name == "admin" {
		tok = AdminToken
	}
	f.tokens[tok] = name
	f.namespaces[name] = &api.Namespace{Name: name, Status: "Active", Personal: true, Members: []api.Member{{User: name, Role: api.RoleOwner}}}
	return tok
}

// Revoke forgets a token: it answers 401 from now on.
func (f *Fake) Revoke(token string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.tokens, token)
}

// Namespace returns a copy of a namespace, or nil.
func (f *Fake) Namespace(name string) *api.Namespace {
	f.mu.Lock()
	defer f.mu.Unlock()
	if ns := f.namespaces[name]; ns != nil {
		cp := *ns
		cp.Members = append([]api.Member(nil), ns.Members...)
		return &cp
	}
	return nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func fail(w http.ResponseWriter, status int, code, msg, field string) {
	writeJSON(w, status, api.Error{Error: api.ErrorBody{Code: code, Message: msg, Field: field}})
}

func roleOf(ns *api.Namespace, user string) string {
	for _, m := range ns.Members {
		if m.User == user {
			return m.Role
		}
	}
	return ""
}

func (f *Fake) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Requests = append(f.Requests, r.Method+" "+r.URL.Path)
	path, ok := strings.CutPrefix(r.URL.Path, api.Prefix+"/")
	if !ok {
		fail(w, 404, "not_found", "no such route", "")
		return
	}
	if path == "info" && r.Method == http.MethodGet {
		writeJSON(w, 200, f.Info)
		return
	}
	tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	user, ok := f.tokens[tok]
	if !ok {
		fail(w, 401, "unauthorized", "the token is not valid", "")
		return
	}
	parts := strings.Split(path, "/")
	switch {
	case path == "me" && r.Method == http.MethodGet:
		writeJSON(w, 200, api.User{Name: user, Admin: f.users[user], Namespace: user})
	case path == "secrets/values" && r.Method == http.MethodGet:
		f.SecretsNamespaces = append(f.SecretsNamespaces, r.URL.Query().Get("namespace"))
		vals := f.Secrets[user]
		if vals == nil {
			vals = map[string]string{}
		}
		writeJSON(w, 200, api.ResolvedSecrets{Values: vals})
	case path == "analytics" && r.Method == http.MethodPost:
		if !f.Info.Analytics {
			fail(w, 403, "forbidden", "this platform does not accept analytics", "")
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			fail(w, 400, "bad_request", err.Error(), "")
			return
		}
		f.AnalyticsEvents = append(f.AnalyticsEvents, json.RawMessage(body))
		w.WriteHeader(204)
	case path == "builder/credentials" && r.Method == http.MethodPost:
		if f.BuilderCA == nil {
			fail(w, 404, "not_found", "this platform has no hosted build service", "")
			return
		}
		var req api.BuilderCredentialsRequest
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req); err != nil {
			fail(w, 400, "bad_request", err.Error(), "")
			return
		}
		now := time.Now()
		if f.Now != nil {
			now = f.Now()
		}
		cert, exp, err := f.BuilderCA.SignClient([]byte(req.CSR), user, now, time.Duration(req.ExpirationSeconds)*time.Second)
		if err != nil {
			fail(w, 400, "bad_request", err.Error(), "csr")
			return
		}
		f.BuilderCerts++
		writeJSON(w, 200, api.BuilderCredentials{Certificate: string(cert), CA: string(f.BuilderCA.CertPEM), Expires: exp.UTC(),
			Builder: f.Info.Builder, Registry: f.Info.Registry})
	case path == "kubetoken" && r.Method == http.MethodPost:
		f.KubeTokens++
		writeJSON(w, 200, api.KubeToken{Token: fmt.Sprintf("kube-%s-%d", user, f.KubeTokens),
			ExpirationTimestamp: time.Now().Add(f.KubeTokenTTL).UTC().Truncate(time.Second),
			APIServer:           f.Info.APIServer, APIServerCA: f.Info.APIServerCA})
	case path == "namespaces" && r.Method == http.MethodGet:
		var l api.NamespaceList
		for _, ns := range f.namespaces {
			if role := roleOf(ns, user); role != "" {
				cp := *ns
				cp.Role = role
				l.Items = append(l.Items, cp)
			}
		}
		sort.Slice(l.Items, func(i, j int) bool { return l.Items[i].Name < l.Items[j].Name })
		writeJSON(w, 200, l)
	case path == "namespaces" && r.Method == http.MethodPost:
		var req api.CreateNamespaceRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Name == "" {
			fail(w, 400, "bad_request", "name is required", "name")
			return
		}
		if strings.ToLower(req.Name) != req.Name || strings.ContainsAny(req.Name, "_. ") {
			fail(w, 400, "bad_request", "must be a DNS label", "name")
			return
		}
		if ns := f.namespaces[req.Name]; ns != nil {
			if roleOf(ns, user) != api.RoleOwner {
				fail(w, 409, "conflict", "namespace "+req.Name+" exists", "name")
				return
			}
			writeJSON(w, 200, ns)
			return
		}
		ns := &api.Namespace{Name: req.Name, Status: "Active", Role: api.RoleOwner, Members: []api.Member{{User: user, Role: api.RoleOwner}}}
		f.namespaces[req.Name] = ns
		writeJSON(w, 201, ns)
	case len(parts) == 2 && parts[0] == "namespaces":
		ns := f.namespaces[parts[1]]
		if ns == nil || roleOf(ns, user) == "" {
			fail(w, 404, "not_found", "namespace "+parts[1]+" not found", "")
			return
		}
		switch r.Method {
		case http.MethodGet:
			cp := *ns
			cp.Role = roleOf(ns, user)
			writeJSON(w, 200, cp)
		case http.MethodDelete:
			if roleOf(ns, user) != api.RoleOwner {
				fail(w, 403, "forbidden", "only an owner may delete the namespace", "")
				return
			}
			delete(f.namespaces, parts[1])
			w.WriteHeader(202)
		default:
			fail(w, 405, "bad_request", "method not allowed", "")
		}
	case len(parts) == 4 && parts[0] == "namespaces" && parts[2] == "members":
		ns := f.namespaces[parts[1]]
		if ns == nil || roleOf(ns, user) == "" {
			fail(w, 404, "not_found", "namespace "+parts[1]+" not found", "")
			return
		}
		if roleOf(ns, user) != api.RoleOwner {
			fail(w, 403, "forbidden", "only an owner may share the namespace", "")
			return
		}
		if _, ok := f.users[parts[3]]; !ok {
			fail(w, 404, "not_found", "user "+parts[3]+" not found", "")
			return
		}
		var kept []api.Member
		for _, m := range ns.Members {
			if m.User != parts[3] {
				kept = append(kept, m)
			}
		}
		switch r.Method {
		case http.MethodPut:
			var req api.ShareRequest
			if err := json.NewDecoder(r.Body).Decode(&req); err != nil || (req.Role != api.RoleOwner && req.Role != api.RoleEditor && req.Role != api.RoleViewer) {
				fail(w, 400, "bad_request", "role must be owner, editor or viewer", "role")
				return
			}
			ns.Members = append(kept, api.Member{User: parts[3], Role: req.Role})
			w.WriteHeader(204)
		case http.MethodDelete:
			ns.Members = kept
			w.WriteHeader(204)
		}
	default:
		fail(w, 404, "not_found", "no such route", "")
	}
}

// Package api holds the types of the platform's JSON API (/api/v1), shared by the server
// (cmd/devtool-platform, internal/platform/server) and the CLI's client (internal/platform/client).
// docs/platform-api.yaml describes the same routes as OpenAPI. Changes are additive only: a field is
// never renamed or removed, so an older CLI keeps working with a newer server and the other way round.
//
// Authentication: every route except GET /api/v1/info, POST /api/v1/login and the OAuth endpoints takes "Authorization: Bearer <token>", where the
// token is an API token "dvt_<id>_<secret>" (id: 16 lowercase hex chars; secret: 43 base64url chars,
// 256 random bits). The server stores only SHA-256(secret) and compares in constant time.
//
// Errors: any non-2xx answer has the body Error, with the HTTP status telling the class: 400 bad input
// (Field names the JSON field), 401 no or bad token (revoked, expired, unknown), 403 not allowed, 404 not
// found or not visible to the caller (never 403 for another user's namespace, so names do not leak),
// 409 conflict, 413 body too large, 429 rate limited (Retry-After header), 5xx server.
package api

import "time"

// Prefix is the path every route starts with.
const Prefix = "/api/v1"

// TokenPrefix starts every API token.
const TokenPrefix = "dvt_"

// Environment variables that let CI use the platform with no saved context.
const (
	EnvURL       = "DEVTOOL_URL"
	EnvToken     = "DEVTOOL_TOKEN"
	EnvNamespace = "DEVTOOL_NAMESPACE"
	EnvCACert    = "DEVTOOL_CA_CERT"
)

// Error is the body of every non-2xx answer.
type Error struct {
	Error ErrorBody `json:"error"`
}

// ErrorBody says what went wrong.
type ErrorBody struct {
	// Code is a stable machine-readable word: bad_request, unauthorized, forbidden, not_found,
	// conflict, too_large, rate_limited, internal.
	Code    string `json:"code"`
	Message string `json:"message"`
	// Field is the JSON field at fault, for bad_request.
	Field string `json:"field,omitempty"`
}

// Info is GET /api/v1/info (no authentication).
type Info struct {
	Version       string `json:"version"`       // the server's version
	MinCLIVersion string `json:"minCliVersion"` // the lowest CLI version it serves ("" = any)
	APIServer     string `json:"apiServer"`     // the Kubernetes API address users' kubeconfigs get
	APIServerCA   string `json:"apiServerCA"`   // PEM of the Kubernetes API's CA
	Builder       string `json:"builder"`       // the hosted BuildKit's address (tcp://host:port, mTLS: POST /builder/credentials); "" when the platform has none
	Registry      string `json:"registry"`      // registry host[:port] users push to (<registry>/<namespace>/...); "" when none
	Domain        string `json:"domain"`        // endpoints are served under *.<domain>
	// IngressClass is the ingressClassName of users' Ingresses ("" = the cluster's default class).
	IngressClass string `json:"ingressClass,omitempty"`
	// EndpointPort is the HTTPS port endpoints answer on (0 = 443): https://<name>-<namespace>.<domain>:<port>/.
	EndpointPort int  `json:"endpointPort,omitempty"`
	Analytics    bool `json:"analytics"` // the admin allows analytics
	// Pipelines says the platform runs pipelines and previews (it has a runner image); previews
	// idle PreviewSleepSeconds are scaled to zero (0: never), idle PreviewTTLSeconds destroyed.
	Pipelines           bool  `json:"pipelines,omitempty"`
	PreviewSleepSeconds int64 `json:"previewSleepSeconds,omitempty"`
	PreviewTTLSeconds   int64 `json:"previewTtlSeconds,omitempty"`
	// Login says how users sign in (absent from servers older than the password login).
	Login *LoginMethods `json:"login,omitempty"`
}

// LoginMethods are the ways to sign in that the platform offers.
type LoginMethods struct {
	Password bool `json:"password"` // POST /api/v1/login
	// Browser: OAuth 2.0 authorization code with PKCE (S256) for the CLI (client_id CLIClientID) at
	// AuthorizePath, a loopback redirect address (http://127.0.0.1:<port>/..., RFC 8252), the token
	// at TokenPath.
	Browser bool `json:"browser"`
	// Device: device authorization (RFC 8628) at DeviceAuthPath, the token at TokenPath.
	Device    bool            `json:"device"`
	Providers []LoginProvider `json:"providers,omitempty"` // OpenID Connect providers
}

// LoginProvider is an OpenID Connect provider users may sign in with.
type LoginProvider struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// OAuth 2.0 endpoints and the CLI's client id. AuthorizePath (the consent page) and DevicePagePath
// (where the device login's code is entered) are pages of the platform's web UI, behind its sign-in
// page and session. The token endpoint follows RFC 6749: a form-encoded request, and a JSON answer
// {access_token, token_type "Bearer", expires_in} whose access_token is an API token, or {error,
// error_description} with status 400.
const (
	AuthorizePath  = "/login/authorize"
	DevicePagePath = "/login/device"
	TokenPath      = Prefix + "/oauth/token"
	DeviceAuthPath = Prefix + "/oauth/device"
	CLIClientID    = "devtool-cli"
)

// LoginRequest is POST /api/v1/login (no authentication): a user name and password for a new API
// token, answered with a Token (its secret set). Every refusal is the same 401; 429 when the
// platform checks too many logins at once or the address or account is rate-limited. Repeated
// failures lock the account for a while (for every replica).
type LoginRequest struct {
	User      string `json:"user"`
	Password  string `json:"password"`
	TokenName string `json:"tokenName,omitempty"`
	// ExpiresInSeconds: 0 means the server's default (90 days); at most one year.
	ExpiresInSeconds int64 `json:"expiresInSeconds,omitempty"`
}

// PasswordChange is PUT /api/v1/me/password: the caller's new password (Current is required when
// the account has one). 204.
type PasswordChange struct {
	Current string `json:"current,omitempty"`
	New     string `json:"new"`
}

// PasswordReset is PUT /api/v1/users/{name}/password (admin only): set a user's password ("" turns
// password login off) and clear its lockout. 204. POST /api/v1/users/{name}/unlock (admin only)
// clears the lockout alone. 204.
type PasswordReset struct {
	Password string `json:"password"`
}

// User is a platform account. GET /api/v1/me answers the caller's.
type User struct {
	Name      string    `json:"name"`
	Admin     bool      `json:"admin"`
	Namespace string    `json:"namespace,omitempty"` // the personal namespace
	Created   time.Time `json:"created"`
	// Set in admins' answers (GET /api/v1/users) and the caller's own.
	Password     bool       `json:"password,omitempty"`     // password login is on
	FailedLogins int        `json:"failedLogins,omitempty"` // failed password logins in a row
	LockedUntil  *time.Time `json:"lockedUntil,omitempty"`  // password login refused until then
	OIDC         bool       `json:"oidc,omitempty"`         // made for an OpenID Connect identity
}

// CreateUserRequest is POST /api/v1/users (admin only).
type CreateUserRequest struct {
	Name     string `json:"name"` // DNS label, 1-40 chars: it names the personal namespace
	Admin    bool   `json:"admin"`
	Password string `json:"password,omitempty"` // optional: enables password login
}

// CreateUserResponse answers POST /api/v1/users: the new user's first token, shown once.
type CreateUserResponse struct {
	Name  string `json:"name"`
	Token string `json:"token"`
}

// UserList is GET /api/v1/users (admin only). DELETE /api/v1/users/{name} removes one (its tokens,
// ServiceAccount and RoleBindings go with it; 204).

type UserList struct {
	Items []User `json:"items"`
}

// CreateTokenRequest is POST /api/v1/tokens: a new token of the caller.
type CreateTokenRequest struct {
	Name string `json:"name"`
	// ExpiresInSeconds: 0 means the server's default (90 days); at most one year.
	ExpiresInSeconds int64 `json:"expiresInSeconds,omitempty"`
}

// Token describes an API token; Token (the secret) is set only in the answer that creates it.
// GET /api/v1/tokens lists the caller's; DELETE /api/v1/tokens/{id} revokes one (204).
type Token struct {
	ID       string     `json:"id"`
	Name     string     `json:"name"`
	Owner    string     `json:"owner"`
	Created  time.Time  `json:"created"`
	Expires  time.Time  `json:"expires"`
	LastUsed *time.Time `json:"lastUsed,omitempty"`
	Token    string     `json:"token,omitempty"`
}

// TokenList is GET /api/v1/tokens.
type TokenList struct {
	Items []Token `json:"items"`
}

// Roles a user can hold in a namespace (a RoleBinding of the platform's ClusterRole of that name).
const (
	RoleOwner  = "owner"
	RoleEditor = "editor"
	RoleViewer = "viewer"
)

// Namespace is one namespace the caller may see. GET /api/v1/namespaces lists them;
// GET /api/v1/namespaces/{name} answers one (404 when the caller is not a member).
type Namespace struct {
	Name     string   `json:"name"`
	Status   string   `json:"status"` // Active, Deleting
	Role     string   `json:"role"`   // the caller's role
	Personal bool     `json:"personal"`
	Members  []Member `json:"members,omitempty"`
}

// Member is a user's role in a namespace.
type Member struct {
	User string `json:"user"`
	Role string `json:"role"`
}

// NamespaceList is GET /api/v1/namespaces.
type NamespaceList struct {
	Items []Namespace `json:"items"`
}

// CreateNamespaceRequest is POST /api/v1/namespaces. Idempotent: 201 when created, 200 when the caller
// already owns it, 409 when it exists and the caller does not own it. The namespace gets a
// ResourceQuota and a LimitRange with the platform's defaults, and the caller the owner role.
// DELETE /api/v1/namespaces/{name} (owner only) deletes it: 202; the CLI runs the destroy of its
// environments first, with the user's own credentials.
type CreateNamespaceRequest struct {
	Name string `json:"name"`
}

// ShareRequest is PUT /api/v1/namespaces/{name}/members/{user} (owner only): give user a role.
// DELETE /api/v1/namespaces/{name}/members/{user} removes it (204).
type ShareRequest struct {
	Role string `json:"role"`
}

// KubeTokenRequest is POST /api/v1/kubetoken: a short-lived token of the caller's ServiceAccount
// (TokenRequest), for the kubeconfig credential plugin.
type KubeTokenRequest struct {
	// ExpirationSeconds: 0 means 3600; the API server's minimum is 600.
	ExpirationSeconds int64 `json:"expirationSeconds,omitempty"`
}

// KubeToken answers POST /api/v1/kubetoken.
type KubeToken struct {
	Token               string    `json:"token"`
	ExpirationTimestamp time.Time `json:"expirationTimestamp"`
	APIServer           string    `json:"apiServer"`
	APIServerCA         string    `json:"apiServerCA"`
}

// Secret scopes.
const (
	ScopeUser      = "user"
	ScopeNamespace = "namespace"
	ScopeAdmin     = "admin"
)

// SecretValue is the body of PUT /api/v1/secrets/{name} (the caller's own). GET /api/v1/secrets lists
// names only; DELETE /api/v1/secrets/{name} removes one (204).
type SecretValue struct {
	Value string `json:"value"`
}

// SecretInfo names a stored secret, never its value.
type SecretInfo struct {
	Name  string `json:"name"`
	Scope string `json:"scope"`
}

// SecretList is GET /api/v1/secrets.
type SecretList struct {
	Items []SecretInfo `json:"items"`
}

// ResolvedSecrets is GET /api/v1/secrets/values?namespace=NS: the values the caller's commands use for
// ${NAME} (after shell and .env), merged with namespace over user over admin. Never printed by the CLI.
type ResolvedSecrets struct {
	Values map[string]string `json:"values"`
}

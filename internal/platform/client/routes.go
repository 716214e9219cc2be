package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"

	"github.com/devtool/devtool/internal/platform/api"
)

func route(parts ...string) string {
	p := api.Prefix
	for _, s := range parts {
		p += "/" + url.PathEscape(s)
	}
	return p
}

// Info is GET /api/v1/info (no token needed).
func (c *Client) Info(ctx context.Context) (*api.Info, error) {
	var info api.Info
	if _, err := c.do(ctx, http.MethodGet, route("info"), nil, &info); err != nil {
		return nil, err
	}
	return &info, nil
}

// Me is GET /api/v1/me: the token's user.
func (c *Client) Me(ctx context.Context) (*api.User, error) {
	var u api.User
	if _, err := c.do(ctx, http.MethodGet, route("me"), nil, &u); err != nil {
		return nil, err
	}
	return &u, nil
}

// Namespaces is GET /api/v1/namespaces: the namespaces the caller may see.
func (c *Client) Namespaces(ctx context.Context) ([]api.Namespace, error) {
	var l api.NamespaceList
	if _, err := c.do(ctx, http.MethodGet, route("namespaces"), nil, &l); err != nil {
		return nil, err
	}
	return l.Items, nil
}

// Namespace is GET /api/v1/namespaces/{name} (404 when the caller is not a member).
func (c *Client) Namespace(ctx context.Context, name string) (*api.Namespace, error) {
	var ns api.Namespace
	if _, err := c.do(ctx, http.MethodGet, route("namespaces", name), nil, &ns); err != nil {
		return nil, err
	}
	return &ns, nil
}

// CreateNamespace is POST /api/v1/namespaces; created is false when the caller already owned it.
func (c *Client) CreateNamespace(ctx context.Context, name string) (ns *api.Namespace, created bool, err error) {
	ns = &api.Namespace{Name: name}
	status, err := c.do(ctx, http.MethodPost, route("namespaces"), api.CreateNamespaceRequest{Name: name}, ns)
	if err != nil {
		return nil, false, err
	}
	return ns, status == http.StatusCreated, nil
}

// DeleteNamespace is DELETE /api/v1/namespaces/{name} (owner only; the deletion goes on in the background).
func (c *Client) DeleteNamespace(ctx context.Context, name string) error {
	_, err := c.do(ctx, http.MethodDelete, route("namespaces", name), nil, nil)
	return err
}

// Share is PUT /api/v1/namespaces/{name}/members/{user}.
func (c *Client) Share(ctx context.Context, namespace, user, role string) error {
	_, err := c.do(ctx, http.MethodPut, route("namespaces", namespace, "members", user), api.ShareRequest{Role: role}, nil)
	return err
}

// Unshare is DELETE /api/v1/namespaces/{name}/members/{user}.
func (c *Client) Unshare(ctx context.Context, namespace, user string) error {
	_, err := c.do(ctx, http.MethodDelete, route("namespaces", namespace, "members", user), nil, nil)
	return err
}

// KubeToken is POST /api/v1/kubetoken: a short-lived token of the caller's ServiceAccount.
func (c *Client) KubeToken(ctx context.Context, expirationSeconds int64) (*api.KubeToken, error) {
	var t api.KubeToken
	if _, err := c.do(ctx, http.MethodPost, route("kubetoken"), api.KubeTokenRequest{ExpirationSeconds: expirationSeconds}, &t); err != nil {
		return nil, err
	}
	if t.Token == "" || t.APIServer == "" {
		return nil, fmt.Errorf("platform %s answered POST %s without a token or API server address", c.urlString, route("kubetoken"))
	}
	return &t, nil
}

// CreateUser is POST /api/v1/users (admin only): the answer holds the new user's first token.
func (c *Client) CreateUser(ctx context.Context, req api.CreateUserRequest) (*api.CreateUserResponse, error) {
	var r api.CreateUserResponse
	if _, err := c.do(ctx, http.MethodPost, route("users"), req, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// DeleteUser is DELETE /api/v1/users/{name} (admin only).
func (c *Client) DeleteUser(ctx context.Context, name string) error {
	_, err := c.do(ctx, http.MethodDelete, route("users", name), nil, nil)
	return err
}

// Tokens is GET /api/v1/tokens: the caller's API tokens (without their secrets).
func (c *Client) Tokens(ctx context.Context) ([]api.Token, error) {
	var l api.TokenList
	if _, err := c.do(ctx, http.MethodGet, route("tokens"), nil, &l); err != nil {
		return nil, err
	}
	return l.Items, nil
}

// RevokeToken is DELETE /api/v1/tokens/{id}.
func (c *Client) RevokeToken(ctx context.Context, id string) error {
	_, err := c.do(ctx, http.MethodDelete, route("tokens", id), nil, nil)
	return err
}

// Users lists every user (admin only).
func (c *Client) Users(ctx context.Context) ([]api.User, error) {
	var out api.UserList
	if _, err := c.do(ctx, http.MethodGet, api.Prefix+"/users", nil, &out); err != nil {
		return nil, err
	}
	return out.Items, nil
}

// BuilderCredentials is POST /api/v1/builder/credentials: a client certificate for the hosted
// BuildKit, signed for the key of csrPEM (404 when the platform has no build service).
func (c *Client) BuilderCredentials(ctx context.Context, csrPEM []byte, expirationSeconds int64) (*api.BuilderCredentials, error) {
	var bc api.BuilderCredentials
	if _, err := c.do(ctx, http.MethodPost, route("builder", "credentials"),
		api.BuilderCredentialsRequest{CSR: string(csrPEM), ExpirationSeconds: expirationSeconds}, &bc); err != nil {
		return nil, err
	}
	return &bc, nil
}

package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/devtool/devtool/internal/platform/api"
)

// The stored secrets and analytics routes.

// scopeQuery is "?scope=S&namespace=NS" for a secret scope ("" and "user": the caller's own).
func scopeQuery(scope, namespace string) string {
	q := url.Values{}
	if scope != "" && scope != api.ScopeUser {
		q.Set("scope", scope)
	}
	if namespace != "" {
		q.Set("namespace", namespace)
	}
	if len(q) == 0 {
		return ""
	}
	return "?" + q.Encode()
}

// SetSecret is PUT /api/v1/secrets/{name}: store a secret in scope (api.ScopeUser, ScopeNamespace
// with namespace, ScopeAdmin).
func (c *Client) SetSecret(ctx context.Context, scope, namespace, name, value string) error {
	_, err := c.do(ctx, http.MethodPut, route("secrets", name)+scopeQuery(scope, namespace), api.SecretValue{Value: value}, nil)
	return err
}

// DeleteSecret is DELETE /api/v1/secrets/{name}.
func (c *Client) DeleteSecret(ctx context.Context, scope, namespace, name string) error {
	_, err := c.do(ctx, http.MethodDelete, route("secrets", name)+scopeQuery(scope, namespace), nil, nil)
	return err
}

// Secrets is GET /api/v1/secrets: the names (never the values) the caller sees, namespace's too when given.
func (c *Client) Secrets(ctx context.Context, namespace string) ([]api.SecretInfo, error) {
	var l api.SecretList
	if _, err := c.do(ctx, http.MethodGet, route("secrets")+scopeQuery("", namespace), nil, &l); err != nil {
		return nil, err
	}
	return l.Items, nil
}

// ResolvedSecrets is GET /api/v1/secrets/values?namespace=NS: the values a command of the caller uses
// for ${NAME} after the shell and .env (namespace over user over admin). Never print them.
func (c *Client) ResolvedSecrets(ctx context.Context, namespace string) (map[string]string, error) {
	var r api.ResolvedSecrets
	if _, err := c.do(ctx, http.MethodGet, route("secrets", "values")+scopeQuery("", namespace), nil, &r); err != nil {
		return nil, err
	}
	if r.Values == nil {
		r.Values = map[string]string{}
	}
	return r.Values, nil
}

// SendAnalytics is POST /api/v1/analytics: one event (403 when the platform does not accept them).
func (c *Client) SendAnalytics(ctx context.Context, ev api.AnalyticsEvent) error {
	_, err := c.do(ctx, http.MethodPost, route("analytics"), ev, nil)
	return err
}

// AnalyticsReport is GET /api/v1/analytics?days=N (admin only).
func (c *Client) AnalyticsReport(ctx context.Context, days int) (*api.AnalyticsReport, error) {
	var r api.AnalyticsReport
	q := url.Values{"days": {strconv.Itoa(days)}}
	if _, err := c.do(ctx, http.MethodGet, route("analytics")+"?"+q.Encode(), nil, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// SetAnalyticsSettings is PUT /api/v1/analytics/settings (admin only).
func (c *Client) SetAnalyticsSettings(ctx context.Context, enabled bool) error {
	_, err := c.do(ctx, http.MethodPut, route("analytics", "settings"), api.AnalyticsSettings{Enabled: enabled}, nil)
	return err
}

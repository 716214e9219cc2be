package server

import (
	"net/http"
	"testing"

	"github.com/devtool/devtool/internal/platform/api"
)

// Without a pipeline or preview manager, every pipeline, preview and webhook route answers 503.
func TestPipelineAndPreviewRoutesUnconfigured(t *testing.T) {
	ts, tok := newTestServer(t)
	for _, c := range []struct{ method, path, token string }{
		{"POST", api.Prefix + "/namespaces/admin/pipelines", tok},
		{"GET", api.Prefix + "/namespaces/admin/pipelines", tok},
		{"GET", api.Prefix + "/namespaces/admin/pipelines/shop", tok},
		{"GET", api.Prefix + "/namespaces/admin/pipelines/shop/runs/1", tok},
		{"GET", api.Prefix + "/namespaces/admin/pipelines/shop/runs/1/log", tok},
		{"POST", api.Prefix + "/previews", tok},
		{"GET", api.Prefix + "/previews", tok},
		{"GET", api.Prefix + "/previews/pr-1", tok},
		{"DELETE", api.Prefix + "/previews/pr-1", tok},
		{"GET", api.Prefix + "/previews/pr-1/endpoints", tok},
		{"POST", api.Prefix + "/previews/pr-1/wake", tok},
		{"POST", api.Prefix + "/webhooks/github", ""},
	} {
		a := call(t, ts, c.method, c.path, c.token, "{}")
		if a.status != http.StatusServiceUnavailable || a.err.Code != "unavailable" {
			t.Errorf("%s %s: %d %s, want 503 unavailable", c.method, c.path, a.status, a.body)
		}
	}
}

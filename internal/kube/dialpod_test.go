package kube

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

// TestDialPodStalledAPIServer: an API server that takes the port-forward request and never
// answers makes DialPod fail after DialPodTimeout, naming the pod, instead of hanging.
func TestDialPodStalledAPIServer(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)

	old := DialPodTimeout
	DialPodTimeout = 300 * time.Millisecond
	defer func() { DialPodTimeout = old }()

	c := &Client{Config: &rest.Config{Host: srv.URL}}
	_, err := c.DialPod(context.Background(), "ns", "web-0", 2222)
	if err == nil || !strings.Contains(err.Error(), "ns/web-0:2222") || !strings.Contains(err.Error(), "not open after") {
		t.Fatalf("want a timeout naming the pod, got %v", err)
	}
}

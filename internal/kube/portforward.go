package kube

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
)

// ForwardedPort is one local port bound on loopback and the pod port behind it.
type ForwardedPort struct {
	Local, Remote uint16
}

// PortForward forwards local loopback ports to a pod until ctx ends. ports use kubectl's notation
// ("8080", "18080:8080", ":8080" for a free local port). It returns once the ports listen.
// The returned channel is closed when forwarding stops; it carries the error that stopped it, if any.
func (c *Client) PortForward(ctx context.Context, ns, pod string, ports []string) ([]ForwardedPort, <-chan error, error) {
	transport, upgrader, err := spdy.RoundTripperFor(c.Config)
	if err != nil {
		return nil, nil, err
	}
	u, err := url.Parse(c.Config.Host)
	if err != nil {
		return nil, nil, fmt.Errorf("bad API server address %q: %w", c.Config.Host, err)
	}
	u.Path, _ = url.JoinPath(u.Path, "api/v1/namespaces", ns, "pods", pod, "portforward")
	dialer := spdy.NewDialer(upgrader, &http.Client{Transport: transport}, "POST", u)

	stop, ready := make(chan struct{}), make(chan struct{})
	// Loopback only: a forwarded port is never reachable from other machines.
	fw, err := portforward.NewOnAddresses(dialer, []string{"127.0.0.1"}, ports, stop, ready, io.Discard, io.Discard)
	if err != nil {
		return nil, nil, fmt.Errorf("port-forward to %s/%s: %w", ns, pod, err)
	}
	done := make(chan error, 1)
	go func() { done <- fw.ForwardPorts(); close(done) }()
	go func() { <-ctx.Done(); close(stop) }()
	select {
	case <-ready:
	case err := <-done:
		return nil, nil, fmt.Errorf("port-forward to %s/%s: %w", ns, pod, err)
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
	got, err := fw.GetPorts()
	if err != nil {
		return nil, nil, err
	}
	out := make([]ForwardedPort, len(got))
	for i, p := range got {
		out[i] = ForwardedPort{Local: p.Local, Remote: p.Remote}
	}
	return out, done, nil
}

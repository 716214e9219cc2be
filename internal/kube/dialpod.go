package kube

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
)

// DialPodTimeout bounds the opening of one port-forward stream (DialPod); a variable for tests.
var DialPodTimeout = 20 * time.Second

// DialPod opens one port-forward data stream to a port of a pod (its loopback included) and
// returns it as a net.Conn; no local listener is opened. The stream goes over a WebSocket
// tunnel, falling back to SPDY for API servers without it. ctx and DialPodTimeout bound the
// opening only; Close
// ends the stream and its connection. Deadlines are not supported (the Set*Deadline methods
// return an error).
func (c *Client) DialPod(ctx context.Context, ns, pod string, port int) (net.Conn, error) {
	u, err := url.Parse(c.Config.Host)
	if err != nil {
		return nil, fmt.Errorf("bad API server address %q: %w", c.Config.Host, err)
	}
	u.Path, _ = url.JoinPath(u.Path, "api/v1/namespaces", ns, "pods", pod, "portforward")
	transport, upgrader, err := spdy.RoundTripperFor(c.Config)
	if err != nil {
		return nil, err
	}
	var dialer httpstream.Dialer = spdy.NewDialer(upgrader, &http.Client{Transport: transport}, "POST", u)
	if ws, err := portforward.NewSPDYOverWebsocketDialer(u, c.Config); err == nil {
		dialer = portforward.NewFallbackDialer(ws, dialer, func(err error) bool {
			return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
		})
	}

	// The upgrade and both stream creations run apart from the caller, bounded by ctx and by
	// DialPodTimeout: a port-forward that stalls (an API server or kubelet that accepts the
	// upgrade but never answers the stream creation, seen once in CI) is abandoned so the
	// caller can dial again, instead of holding a dev session's first connection for ever.
	ctx, cancel := context.WithTimeout(ctx, DialPodTimeout)
	defer cancel()
	type dialed struct {
		conn          httpstream.Connection
		data, errData httpstream.Stream
		err           error
	}
	ch := make(chan dialed, 1)
	go func() {
		conn, _, err := dialer.Dial(portforward.PortForwardProtocolV1Name)
		if err != nil {
			ch <- dialed{err: fmt.Errorf("port-forward to %s/%s: %w", ns, pod, err)}
			return
		}
		headers := http.Header{}
		headers.Set(corev1.StreamType, corev1.StreamTypeError)
		headers.Set(corev1.PortHeader, strconv.Itoa(port))
		headers.Set(corev1.PortForwardRequestIDHeader, "0")
		errStream, err := conn.CreateStream(headers)
		if err != nil {
			conn.Close()
			ch <- dialed{err: fmt.Errorf("port-forward to %s/%s:%d: %w", ns, pod, port, err)}
			return
		}
		errStream.Close() // nothing to write on it
		headers.Set(corev1.StreamType, corev1.StreamTypeData)
		data, err := conn.CreateStream(headers)
		if err != nil {
			conn.Close()
			ch <- dialed{err: fmt.Errorf("port-forward to %s/%s:%d: %w", ns, pod, port, err)}
			return
		}
		ch <- dialed{conn: conn, data: data, errData: errStream}
	}()
	var d dialed
	select {
	case d = <-ch:
		if d.err != nil {
			return nil, d.err
		}
	case <-ctx.Done():
		go func() {
			if d := <-ch; d.conn != nil {
				d.conn.Close()
			}
		}()
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, fmt.Errorf("port-forward to %s/%s:%d: not open after %s", ns, pod, port, DialPodTimeout)
		}
		return nil, ctx.Err()
	}
	conn, data, errStream := d.conn, d.data, d.errData
	pc := &podConn{conn: conn, data: data, errc: make(chan error, 1),
		addr: podAddr(fmt.Sprintf("%s/%s:%d", ns, pod, port))}
	go func() {
		msg, err := io.ReadAll(errStream)
		switch {
		case len(msg) > 0:
			pc.errc <- fmt.Errorf("port-forward to %s/%s:%d: %s", ns, pod, port, msg)
			// The pod side failed (nothing listens on the port, the pod is gone). Not every
			// path through the API server closes the data stream after that, and a reader
			// (an SSH handshake) would wait for its own timeout: end the stream now, so
			// that Read returns the error at once.
			_ = data.Reset()
		case err != nil:
			pc.errc <- fmt.Errorf("port-forward to %s/%s:%d: %w", ns, pod, port, err)
		}
		close(pc.errc)
	}()
	return pc, nil
}

type podAddr string

func (a podAddr) Network() string { return "portforward" }
func (a podAddr) String() string  { return string(a) }

// podConn is one port-forward data stream on its own connection.
type podConn struct {
	conn      httpstream.Connection
	data      httpstream.Stream
	errc      chan error
	addr      podAddr
	closeOnce sync.Once
}

func (p *podConn) Read(b []byte) (int, error) {
	n, err := p.data.Read(b)
	if err != nil {
		// The pod side closed: if it did so because of an error (nothing listens on the
		// port, the pod is gone), say so instead of a bare EOF.
		select {
		case e, ok := <-p.errc:
			if ok && e != nil {
				return n, e
			}
		case <-time.After(time.Second):
		}
	}
	return n, err
}

func (p *podConn) Write(b []byte) (int, error) { return p.data.Write(b) }

func (p *podConn) Close() error {
	p.closeOnce.Do(func() {
		_ = p.data.Reset()
		_ = p.conn.Close()
	})
	return nil
}

func (p *podConn) LocalAddr() net.Addr  { return podAddr("local") }
func (p *podConn) RemoteAddr() net.Addr { return p.addr }

var errNoDeadline = errors.New("port-forward streams have no deadlines")

func (p *podConn) SetDeadline(time.Time) error      { return errNoDeadline }
func (p *podConn) SetReadDeadline(time.Time) error  { return errNoDeadline }
func (p *podConn) SetWriteDeadline(time.Time) error { return errNoDeadline }

// Package forward relays TCP connections from a local address to another. The platform uses it
// where an address must mean the same thing inside a pod as on the machine: the hosted registry is
// named 127.0.0.1:<node port> (what the kubelet pulls from), and in the BuildKit pod (and a
// pipeline's pod) a forwarder on that loopback address reaches the registry's Service.
package forward

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"
)

// Rule relays connections to Listen on to To.
type Rule struct{ Listen, To string }

// ParseRule reads LISTEN=TO (each HOST:PORT).
func ParseRule(s string) (Rule, error) {
	l, t, ok := cutLast(s, "=")
	if !ok {
		return Rule{}, fmt.Errorf("forward %q: expected LISTEN=TO, as 127.0.0.1:30500=devtool-registry.devtool-system.svc:5000", s)
	}
	for _, a := range []string{l, t} {
		if _, _, err := net.SplitHostPort(a); err != nil {
			return Rule{}, fmt.Errorf("forward %q: %q is not HOST:PORT", s, a)
		}
	}
	return Rule{Listen: l, To: t}, nil
}

func cutLast(s, sep string) (string, string, bool) {
	for i := len(s) - len(sep); i >= 0; i-- {
		if s[i:i+len(sep)] == sep {
			return s[:i], s[i+len(sep):], true
		}
	}
	return "", "", false
}

// Forwarder relays until its context ends.
type Forwarder struct {
	Log         *slog.Logger
	DialTimeout time.Duration // default 10 s
}

// Run listens on every rule's address and relays until ctx ends; it returns when every listener and
// connection has stopped. A listener that cannot be opened is an error before anything is relayed.
func (f *Forwarder) Run(ctx context.Context, rules []Rule) error {
	if f.Log == nil {
		f.Log = slog.New(slog.DiscardHandler)
	}
	if f.DialTimeout == 0 {
		f.DialTimeout = 10 * time.Second
	}
	var lns []net.Listener
	for _, r := range rules {
		ln, err := net.Listen("tcp", r.Listen)
		if err != nil {
			for _, l := range lns {
				l.Close()
			}
			return err
		}
		lns = append(lns, ln)
	}
	return f.Serve(ctx, lns, rules)
}

// Serve relays connections accepted on lns[i] to rules[i].To until ctx ends, then closes the
// listeners and every open connection and waits for them.
func (f *Forwarder) Serve(ctx context.Context, lns []net.Listener, rules []Rule) error {
	if f.Log == nil {
		f.Log = slog.New(slog.DiscardHandler)
	}
	if f.DialTimeout == 0 {
		f.DialTimeout = 10 * time.Second
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errc := make(chan error, len(lns))
	for i, ln := range lns {
		to := rules[i].To
		f.Log.Info("forwarding", "listen", ln.Addr().String(), "to", to)
		wg.Add(2)
		go func() {
			defer wg.Done()
			<-ctx.Done()
			ln.Close()
		}()
		go func() {
			defer wg.Done()
			for {
				c, err := ln.Accept()
				if err != nil {
					if ctx.Err() == nil && !errors.Is(err, net.ErrClosed) {
						errc <- err
						cancel()
					}
					return
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					f.relay(ctx, c, to)
				}()
			}
		}()
	}
	<-ctx.Done()
	wg.Wait()
	select {
	case err := <-errc:
		return err
	default:
		return nil
	}
}

func (f *Forwarder) relay(ctx context.Context, in net.Conn, to string) {
	defer in.Close()
	d := net.Dialer{Timeout: f.DialTimeout}
	out, err := d.DialContext(ctx, "tcp", to)
	if err != nil {
		f.Log.Warn("dial failed", "to", to, "err", err)
		return
	}
	defer out.Close()
	stop := context.AfterFunc(ctx, func() { in.Close(); out.Close() })
	defer stop()
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		} else {
			dst.Close()
		}
		done <- struct{}{}
	}
	go pipe(out, in)
	go pipe(in, out)
	<-done
	<-done
}

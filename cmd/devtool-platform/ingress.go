package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/devtool/devtool/internal/buildinfo"
	"github.com/devtool/devtool/internal/platform/client"
	"github.com/devtool/devtool/internal/platform/ingress"
	"github.com/devtool/devtool/internal/platform/preview"
	"github.com/devtool/devtool/internal/platform/store"
)

// ingressCmd runs one replica of the platform's ingress (internal/platform/ingress): HTTPS on
// --listen, /healthz and /readyz on --health-listen. On SIGTERM it first fails /readyz and stops
// keeping connections alive for --shutdown-delay, still serving, so kube-proxy and clients move to
// the other replicas before it stops; then it finishes the requests in flight.
func ingressCmd(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("ingress", flag.ContinueOnError)
	fs.SetOutput(stderr)
	ns := fs.String("namespace", store.DefaultNamespace, "the platform's namespace (it holds the TLS Secret)")
	class := fs.String("class", "devtool", "the IngressClass served")
	domain := fs.String("domain", "", "the endpoints' domain (hosts <name>-<namespace>.<domain>)")
	strict := fs.Bool("strict", true, "a shared cluster's rules: named hosts only, hosts under --domain only of their namespace, default backends only of the platform's namespace")
	listen := fs.String("listen", ":8443", "HTTPS address")
	healthListen := fs.String("health-listen", ":8081", "address of /healthz and /readyz (plain HTTP; the pod's network only)")
	tlsSecret := fs.String("tls-secret", "devtool-ingress-tls", "the kubernetes.io/tls Secret served (in --namespace; reloaded when it changes)")
	platformURL := fs.String("platform-url", "", "the platform's URL (private endpoints send visitors to its sign-in)")
	ticketPub := fs.String("ticket-public-key", "", "the Ed25519 public key of sign-in tickets (raw 32 bytes)")
	cookieKey := fs.String("cookie-key", "", "the key of the endpoints' login cookies (raw, 32 bytes or more)")
	shutdownDelay := fs.Duration("shutdown-delay", 5*time.Second, "how long to keep serving after SIGTERM with /readyz failing")
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig (default: in-cluster, else KUBECONFIG)")
	wakeURL := fs.String("wake-url", "", "the platform's in-cluster address, asked to wake sleeping previews (none: a sleeping backend is 503)")
	wakeKey := fs.String("wake-key", "", "the key wake requests are signed with")
	wakeCA := fs.String("wake-ca", "", "the platform's CA (PEM), for --wake-url")
	if err := fs.Parse(args); err != nil {
		return usageError{err.Error()}
	}
	if (*wakeURL == "") != (*wakeKey == "") {
		return usageError{"ingress: --wake-url and --wake-key go together"}
	}
	if (*ticketPub == "") != (*cookieKey == "") || *ticketPub != "" && *platformURL == "" {
		return usageError{"ingress: --ticket-public-key, --cookie-key and --platform-url go together (private endpoints)"}
	}
	if *shutdownDelay < 0 {
		return usageError{"ingress: --shutdown-delay: not negative"}
	}
	log := slog.New(slog.NewJSONHandler(stderr, nil)).With("pod", os.Getenv("POD_NAME"), "component", "ingress")
	cfg, err := restConfig(*kubeconfig)
	if err != nil {
		return err
	}
	cfg.UserAgent = "devtool-ingress/" + buildinfo.Version
	cfg.QPS, cfg.Burst = 50, 100 // access reviews of private endpoints
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	var keys *ingress.Keys
	if *ticketPub != "" {
		pub, err := readKey(*ticketPub, ed25519.PublicKeySize)
		if err != nil {
			return err
		}
		ck, err := os.ReadFile(*cookieKey)
		if err != nil {
			return fmt.Errorf("reading key %s: %w", *cookieKey, err)
		}
		if len(ck) < 32 {
			return fmt.Errorf("key %s: %d bytes, want at least 32", *cookieKey, len(ck))
		}
		keys = &ingress.Keys{TicketPublic: ed25519.PublicKey(pub), CookieKey: ck}
	}
	var waker ingress.Waker
	if *wakeURL != "" {
		if waker, err = remoteWaker(*wakeURL, *wakeKey, *wakeCA); err != nil {
			return err
		}
	}
	c, err := ingress.New(ingress.Options{Client: cs, Class: *class, Namespace: *ns, TLSSecret: *tlsSecret, Domain: *domain, Strict: *strict,
		Keys: keys, PlatformURL: *platformURL, Log: log, Waker: waker})
	if err != nil {
		return err
	}

	var draining atomic.Bool
	health := http.NewServeMux()
	health.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	health.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !c.Ready() || draining.Load() {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	hln, err := net.Listen("tcp", *healthListen)
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: health, ReadHeaderTimeout: 5 * time.Second}
	hdone := make(chan error, 1)
	go func() { hdone <- hs.Serve(hln) }()
	defer func() {
		hs.Close()
		<-hdone
	}()

	// The informers outlive ctx (SIGTERM) until the last request is done.
	ictx, icancel := context.WithCancel(context.Background())
	defer icancel()
	startErr := make(chan error, 1)
	go func() { startErr <- c.Start(ictx) }()
	select {
	case err := <-startErr:
		if err != nil {
			return err
		}
	case <-ctx.Done():
		icancel()
		<-startErr
		return ctx.Err()
	}

	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler:           c.Handler(),
		TLSConfig:         c.TLSConfig(),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug), // TLS handshake noise of port scans and probes
	}
	log.Info("serving", "addr", ln.Addr().String(), "class", *class, "version", buildinfo.Version, "private_endpoints", keys != nil)
	done := make(chan error, 1)
	go func() { done <- srv.ServeTLS(ln, "", "") }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	draining.Store(true)
	srv.SetKeepAlivesEnabled(false)
	log.Info("draining", "delay", shutdownDelay.String())
	time.Sleep(*shutdownDelay)
	sctx, scancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer scancel()
	err = srv.Shutdown(sctx)
	<-done
	c.CloseIdleConnections()
	log.Info("stopped")
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("requests still running after 20s: %w", err)
	}
	return err
}

// remoteWaker asks the platform at url to wake sleeping previews (preview.RemoteWaker).
func remoteWaker(url, keyFile, caFile string) (ingress.Waker, error) {
	key, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, fmt.Errorf("reading the wake key: %w", err)
	}
	var ca []byte
	if caFile != "" {
		if ca, err = os.ReadFile(caFile); err != nil {
			return nil, fmt.Errorf("reading the platform's CA: %w", err)
		}
	}
	tlsCfg, err := client.TLSConfig(ca)
	if err != nil {
		return nil, err
	}
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsCfg, ForceAttemptHTTP2: true}}
	return &preview.RemoteWaker{URL: url, Key: bytes.TrimSpace(key), Client: hc}, nil
}

// Command devtool-platform is the platform server (docs/platform.md): `serve` runs the API and the
// web UI in the cluster, `ingress` runs the platform's ingress proxy, `install` puts the platform into
// a cluster (run by deploy/platform/devtool.yml), `registry-proxy` is the access check in front of
// the hosted registry, `forward` relays a loopback address to a Service (the hosted registry's name
// inside a pod).
package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/devtool/devtool/internal/buildinfo"
	"github.com/devtool/devtool/internal/platform/analytics"
	"github.com/devtool/devtool/internal/platform/api"
	"github.com/devtool/devtool/internal/platform/forward"
	"github.com/devtool/devtool/internal/platform/ingress"
	"github.com/devtool/devtool/internal/platform/install"
	"github.com/devtool/devtool/internal/platform/leader"
	"github.com/devtool/devtool/internal/platform/pipeline"
	"github.com/devtool/devtool/internal/platform/pki"
	"github.com/devtool/devtool/internal/platform/preview"
	"github.com/devtool/devtool/internal/platform/registryproxy"
	"github.com/devtool/devtool/internal/platform/server"
	"github.com/devtool/devtool/internal/platform/sso"
	"github.com/devtool/devtool/internal/platform/store"
	"github.com/devtool/devtool/internal/platform/web"
)

const usage = `usage: devtool-platform serve|ingress|install|registry-proxy|forward [flags]   (devtool-platform <command> -h lists the flags)`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, usage)
		return 2
	}
	var err error
	switch args[0] {
	case "serve":
		err = serve(ctx, args[1:], stderr)
	case "ingress":
		err = ingressCmd(ctx, args[1:], stderr)
	case "install":
		err = installCmd(ctx, args[1:], stderr)
	case "registry-proxy":
		err = registryProxy(ctx, args[1:], stderr)
	case "forward":
		err = forwardCmd(ctx, args[1:], stderr)
	case "version":
		fmt.Println(buildinfo.Version)
	default:
		fmt.Fprintf(stderr, "devtool-platform: unknown command %q\n%s\n", args[0], usage)
		return 2
	}
	var ue usageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ue), errors.Is(err, flag.ErrHelp):
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(stderr, "devtool-platform:", err)
		}
		return 2
	case errors.Is(err, context.Canceled):
		return 130
	}
	fmt.Fprintln(stderr, "devtool-platform:", err)
	return 1
}

type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig == "" {
		if cfg, err := rest.InClusterConfig(); err == nil {
			return cfg, nil
		}
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if kubeconfig != "" {
		rules.ExplicitPath = kubeconfig
	}
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, nil).ClientConfig()
}

func serve(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	ns := fs.String("namespace", store.DefaultNamespace, "the platform's namespace (its users, tokens, ServiceAccounts)")
	listen := fs.String("listen", ":8443", "address to serve HTTPS on (in a pod: its own network only)")
	certFile := fs.String("tls-cert", "", "serving certificate (PEM)")
	keyFile := fs.String("tls-key", "", "serving key (PEM)")
	apiServer := fs.String("api-server", "", "the Kubernetes API address users' kubeconfigs get")
	caFile := fs.String("api-server-ca-file", "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt", "the Kubernetes API's CA (PEM), given to users")
	domain := fs.String("domain", "", "the platform's domain")
	registry := fs.String("registry", "", "the registry users push to (host[:port])")
	ingressClass := fs.String("ingress-class", "", "the ingressClassName of users' Ingresses (told to the CLI)")
	endpointPort := fs.Int("endpoint-port", 0, "the HTTPS port endpoints answer on (told to the CLI; 0: 443)")
	ticketKey := fs.String("ticket-key", "", "the Ed25519 key signing private endpoints' sign-in tickets (raw 64 bytes; none: no endpoint sign-in)")
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig (default: in-cluster, else KUBECONFIG)")
	allowAnalytics := fs.Bool("analytics", false, "accept the CLI's analytics events (daily counts only; docs/analytics.md) until an admin sets otherwise through the API")
	externalURL := fs.String("external-url", "", "the platform's address as users reach it, https://host[:port] (default: the request's host)")
	minCLI := fs.String("min-cli-version", "", "the lowest devtool version this platform serves (\"\": any)")
	hashes := fs.Int("max-password-hashes", 4, "password hashes (argon2id, 19 MiB each) run at once by this replica")
	hashWait := fs.Duration("password-hash-wait", 10*time.Second, "how long a login waits for a hash slot before 429")
	kubeQPS := fs.Float64("kube-qps", 100, "requests per second to the Kubernetes API (client-go's default of 5 throttles logins)")
	kubeBurst := fs.Int("kube-burst", 200, "burst of requests to the Kubernetes API")
	sweep := fs.Duration("sweep-interval", time.Minute, "how often the leader sweeps expired tokens, web sessions and logins and stale failed-login counts")
	withWeb := fs.Bool("web", true, "serve the web UI beside the API: its pages are where people sign in (browser and device logins of the CLI, single sign-on); docs/platform.md")
	builder := fs.String("builder", "", "the hosted BuildKit's address users get (tcp://host:port); needs --builder-ca-dir")
	builderCADir := fs.String("builder-ca-dir", "", "folder holding ca.crt and ca.key of the builder CA (signs users' BuildKit client certificates)")
	runnerImage := fs.String("runner-image", "", "the pipeline runner's image (none: no pipelines, no previews)")
	forwardImage := fs.String("forward-image", "", "the platform's image: runs `forward` beside a pipeline's runner when the builder or registry is on the node's loopback")
	runnerCA := fs.String("runner-ca-file", "", "a CA (PEM) the runner trusts for https clones besides the system's roots")
	keepRuns := fs.Int("pipeline-keep-runs", pipeline.DefaultKeepRuns, "runs kept per pipeline, with their logs")
	logKiB := fs.Int("pipeline-log-kib", pipeline.DefaultLogBytes>>10, "what is kept of a finished run's log: its last KiB")
	webhookFile := fs.String("webhook-secret-file", "", "the secret pull-request webhooks are signed with (none: webhooks answer 503)")
	wakeKeyFile := fs.String("wake-key-file", "", "the key the ingress signs its requests to wake sleeping previews with (none: no wake requests)")
	previewTTL := fs.Duration("preview-ttl", preview.DefaultTTL, "destroy a preview idle this long")
	previewSleep := fs.Duration("preview-sleep-after", preview.DefaultSleepAfter, "scale a preview to zero when idle this long (0: never)")
	if err := fs.Parse(args); err != nil {
		return usageError{err.Error()}
	}
	if *endpointPort < 0 || *endpointPort > 65535 {
		return usageError{"serve: --endpoint-port: a port number"}
	}
	if *hashes < 1 || *hashes > 64 {
		return usageError{"serve: --max-password-hashes: between 1 and 64"}
	}
	if *kubeQPS <= 0 || *kubeBurst < 1 {
		return usageError{"serve: --kube-qps and --kube-burst must be positive"}
	}
	if *sweep < time.Second {
		return usageError{"serve: --sweep-interval: at least 1s"}
	}
	if (*builder == "") != (*builderCADir == "") {
		return usageError{"serve: --builder and --builder-ca-dir go together"}
	}
	if *previewTTL <= 0 || *previewSleep < 0 {
		return usageError{"serve: --preview-ttl must be positive and --preview-sleep-after not negative"}
	}
	if *keepRuns < 1 || *keepRuns > 100 || *logKiB < 1 || *logKiB > 64<<10 {
		return usageError{"serve: --pipeline-keep-runs between 1 and 100, --pipeline-log-kib between 1 and 65536"}
	}
	if *certFile == "" || *keyFile == "" {
		return usageError{"serve: --tls-cert and --tls-key are required (the platform serves HTTPS only)"}
	}
	log := slog.New(slog.NewJSONHandler(stderr, nil)).With("pod", os.Getenv("POD_NAME"))
	cfg, err := restConfig(*kubeconfig)
	if err != nil {
		return err
	}
	cfg.UserAgent = "devtool-platform/" + buildinfo.Version
	cfg.QPS, cfg.Burst = float32(*kubeQPS), *kubeBurst
	store.SetHashLimits(*hashes, *hashWait)
	st, err := store.New(cfg, *ns)
	if err != nil {
		return err
	}
	ca, err := os.ReadFile(*caFile)
	if err != nil {
		return fmt.Errorf("reading the API server's CA: %w", err)
	}
	var builderCA *pki.CA
	if *builderCADir != "" {
		crt, err := os.ReadFile(filepath.Join(*builderCADir, "ca.crt"))
		if err != nil {
			return fmt.Errorf("reading the builder CA: %w", err)
		}
		key, err := os.ReadFile(filepath.Join(*builderCADir, "ca.key"))
		if err != nil {
			return fmt.Errorf("reading the builder CA's key: %w", err)
		}
		if builderCA, err = pki.ParseCA(crt, key); err != nil {
			return fmt.Errorf("the builder CA in %s: %w", *builderCADir, err)
		}
	}
	agg := &analytics.Aggregator{Kube: st.Kube, Namespace: *ns, Default: *allowAnalytics, Log: log}
	instance := os.Getenv("POD_NAME")
	if instance == "" {
		instance, _ = os.Hostname()
	}
	var runnerCABytes []byte
	if *runnerCA != "" {
		if runnerCABytes, err = os.ReadFile(*runnerCA); err != nil {
			return fmt.Errorf("reading --runner-ca-file: %w", err)
		}
	}
	var webhookSecret []byte
	if *webhookFile != "" {
		if webhookSecret, err = os.ReadFile(*webhookFile); err != nil {
			return fmt.Errorf("reading --webhook-secret-file: %w", err)
		}
		webhookSecret = bytes.TrimSpace(webhookSecret)
	}
	var wakeKey []byte
	if *wakeKeyFile != "" {
		if wakeKey, err = os.ReadFile(*wakeKeyFile); err != nil {
			return fmt.Errorf("reading --wake-key-file: %w", err)
		}
		wakeKey = bytes.TrimSpace(wakeKey)
	}
	var previews *preview.Manager
	pipelines := pipeline.New(pipeline.Options{Store: st, RunnerImage: *runnerImage, KeepRuns: *keepRuns,
		LogBytes: int64(*logKiB) << 10, CA: runnerCABytes, Domain: *domain, Registry: *registry,
		IngressClass: *ingressClass, EndpointPort: *endpointPort, Log: log,
		Builder: *builder, BuilderCA: builderCA, ForwardImage: *forwardImage, Forwards: install.LoopbackForwards(*ns, *builder, *registry),
		OnFinish: func(ctx context.Context, r *pipeline.Run) { previews.OnRunFinished(ctx, r) }})
	previews = preview.New(preview.Options{Store: st, Pipelines: pipelines, TTL: *previewTTL, SleepAfter: *previewSleep,
		WebhookSecret: webhookSecret, Log: log, EndpointURL: func(host, path string) string {
			if *endpointPort != 0 && *endpointPort != 443 {
				host = net.JoinHostPort(host, strconv.Itoa(*endpointPort))
			}
			return "https://" + host + path
		}})
	info := api.Info{Version: buildinfo.Version, MinCLIVersion: *minCLI, APIServer: *apiServer, APIServerCA: string(ca), Domain: *domain,
		Registry: *registry, IngressClass: *ingressClass, EndpointPort: *endpointPort, Builder: *builder,
		Pipelines: *runnerImage != "", PreviewSleepSeconds: int64(*previewSleep / time.Second), PreviewTTLSeconds: int64(*previewTTL / time.Second)}
	var (
		srv *server.Server
		ui  *web.UI
	)
	providers := sso.New(st, log)
	so := server.Options{Store: st, Log: log, Instance: instance, ExternalURL: *externalURL, Analytics: agg, Info: info, SSO: providers,
		BuilderCA: builderCA, Pipelines: pipelines, Previews: previews, WakeKey: wakeKey}
	if *withWeb {
		// The UI shares the server's rate limits and password check (with its lockout and audit).
		ui, err = web.New(web.Options{Store: st, Info: info, Log: log, Instance: instance, Analytics: agg, SSO: providers, ExternalURL: *externalURL,
			CheckPassword: func(ctx context.Context, name, password, addr string) (*store.User, error) {
				return srv.CheckPassword(ctx, name, password, addr)
			},
			AllowAccount: func(user string) bool { return srv.AllowAccount(user) },
			AllowLogin:   func(addr, account string) bool { return srv.AllowLogin(addr, account) },
			NoteUser:     server.NoteUser})
		if err != nil {
			return err
		}
		so.Web = ui.Handler()
	}
	srv = server.New(so)
	handler := srv.Handler()
	if *ticketKey != "" {
		key, err := readKey(*ticketKey, ed25519.PrivateKeySize)
		if err != nil {
			return err
		}
		// Private endpoints' sign-in (internal/platform/ingress): the web UI's session when the
		// browser has one, else its sign-in page, which comes back here (the token form when the
		// UI is off).
		lo := ingress.LoginOptions{Key: ed25519.PrivateKey(key), Domain: *domain, Log: log,
			Authenticate: func(ctx context.Context, token string) (ingress.Identity, error) {
				u, _, err := st.Authenticate(ctx, token)
				if errors.Is(err, store.ErrBadToken) {
					return ingress.Identity{}, ingress.ErrBadCredentials
				} else if err != nil {
					return ingress.Identity{}, err
				}
				return ingress.Identity{User: u.Name, KubeUser: st.SAUsername(u.Name)}, nil
			}}
		if ui != nil {
			lo.Session = func(r *http.Request) (ingress.Identity, bool) {
				u, ok := ui.SessionUser(r)
				if !ok {
					return ingress.Identity{}, false
				}
				return ingress.Identity{User: u.Name, KubeUser: st.SAUsername(u.Name)}, true
			}
			lo.SignInURL = func(next string) string { return web.SignInURL("", next) }
		}
		mux := http.NewServeMux()
		mux.Handle(ingress.LoginPath, ingress.LoginHandler(lo))
		mux.Handle("/", handler)
		handler = mux
	}
	// The certificate file holds the chain (serving certificate, then its CA), all of it sent: a
	// client pins the CA, which outlives the serving certificate's renewals.
	cert, err := tls.LoadX509KeyPair(*certFile, *keyFile)
	if err != nil {
		return fmt.Errorf("loading the serving certificate: %w", err)
	}
	hs := &http.Server{
		Handler:           handler,
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	ictx, cancel := context.WithCancel(ctx)
	defer cancel()
	if err := st.Start(ictx); err != nil {
		ln.Close()
		return err
	}
	// The analytics counts are stored once a minute and when serve stops (after the last request).
	actx, acancel := context.WithCancel(context.WithoutCancel(ctx))
	defer func() { acancel(); agg.Wait() }()
	if err := agg.Start(actx); err != nil {
		ln.Close()
		return err
	}
	if ui != nil {
		// Long answers (the web UI's log streams) end when shutdown starts instead of holding it
		// until its deadline; other requests finish normally.
		hs.RegisterOnShutdown(ui.CloseStreams)
	}
	if err := pipelines.Start(ictx); err != nil {
		ln.Close()
		return err
	}
	if err := previews.Start(ictx); err != nil {
		ln.Close()
		return err
	}
	log.Info("serving", "addr", ln.Addr().String(), "version", buildinfo.Version)
	done := make(chan error, 1)
	go func() { done <- hs.ServeTLS(ln, "", "") }()
	// One replica, elected through a Lease, runs the background work: the store's sweep and the
	// pipeline and preview controllers. Any replica serves requests.
	elected := make(chan struct{})
	go func() {
		defer close(elected)
		leader.Run(ictx, leader.Options{Kube: st.Kube, Namespace: *ns, Identity: instance, Log: log,
			Lead: func(lctx context.Context) {
				var wg sync.WaitGroup
				defer wg.Wait()
				wg.Add(2)
				go func() { defer wg.Done(); previews.RunController(lctx) }()
				go func() {
					defer wg.Done()
					if err := pipelines.RunController(lctx); err != nil && lctx.Err() == nil {
						log.Error("pipeline controller stopped", "err", err)
					}
				}()
				leader.Every(lctx, *sweep, func(c context.Context) {
					n, err := st.Sweep(c)
					if err != nil && c.Err() == nil {
						log.Warn("sweep", "err", err)
					}
					if n != (store.Swept{}) {
						log.Info("swept", "tokens", n.Tokens, "failedLogins", n.Failures, "logins", n.Logins, "sessions", n.Sessions)
					}
				})
			}})
	}()
	select {
	case err = <-done:
	case <-ctx.Done():
		sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer scancel()
		err = hs.Shutdown(sctx)
		<-done
	}
	cancel() // the informers stop, and a held Lease is released for another replica
	<-elected
	log.Info("stopped")
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

func installCmd(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("install", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o := install.Options{}
	fs.StringVar(&o.Namespace, "namespace", store.DefaultNamespace, "the platform's namespace")
	fs.StringVar(&o.Image, "image", "", "the platform image to run (default: push this binary to --registry)")
	fs.StringVar(&o.Registry, "registry", "", "registry to push the image to (host[:port])")
	fs.StringVar(&o.Host, "host", "devtool.localhost", "the platform's host name")
	fs.StringVar(&o.APIServer, "api-server", "", "the Kubernetes API address users get (required)")
	fs.StringVar(&o.OutDir, "out-dir", "/tmp/devtool-cluster", "folder for platform-url, platform-ca.crt, platform-admin-token")
	replicas := fs.Int("replicas", 2, "replicas of the API")
	fs.StringVar(&o.Domain, "domain", "", "the endpoints' domain: https://<name>-<namespace>.<domain> (default: --host)")
	fs.StringVar(&o.IngressClass, "ingress-class", "", "the IngressClass of users' endpoints (default: devtool, or devtool-<namespace> beside another install; with --ingress=false: another controller's, \"\" its default)")
	withIngress := fs.Bool("ingress", true, "install the platform's own ingress (false: another controller serves the endpoints)")
	ingressReplicas := fs.Int("ingress-replicas", 2, "replicas of the ingress")
	endpointPort := fs.Int("endpoint-port", 0, "with --ingress=false: the HTTPS port endpoints answer on (default 443)")
	fs.DurationVar(&o.Timeout, "timeout", 3*time.Minute, "how long to wait for the rollout and the first answer")
	fs.BoolVar(&o.Analytics, "analytics", false, "the platform accepts the CLI's analytics events until an admin sets otherwise (docs/analytics.md)")
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig (default KUBECONFIG)")
	fs.StringVar(&o.ExternalURL, "external-url", "", "the platform's address as users reach it (default https://<host>:<node port>)")
	fs.StringVar(&o.MinCLIVersion, "min-cli-version", "", "the lowest devtool version the platform serves")
	oidc := map[string]*string{}
	for _, f := range []struct{ key, flag, usage string }{
		{"issuer", "oidc-issuer", "OpenID Connect provider's issuer URL (sign-in with it is off when empty)"},
		{"clientID", "oidc-client-id", "the platform's client id at the provider"},
		{"name", "oidc-name", "the provider's name on the sign-in button"},
		{"scopes", "oidc-scopes", "scopes to ask for (default \"openid profile email\")"},
		{"usernameClaim", "oidc-username-claim", "claim naming the account (default preferred_username, else the e-mail's local part)"},
		{"groupsClaim", "oidc-groups-claim", "claim listing the user's groups (default groups)"},
		{"adminGroups", "oidc-admin-groups", "comma-separated groups whose members are admins"},
		{"signUp", "oidc-signup", "\"false\": no account is made on first login"},
	} {
		oidc[f.key] = fs.String(f.flag, "", f.usage)
	}
	secretFile := fs.String("oidc-client-secret-file", "", "file holding the platform's client secret at the provider (or $DEVTOOL_OIDC_CLIENT_SECRET)")
	buildService := fs.Bool("build-service", true, "install the hosted build service (BuildKit and a registry; docs/build.md)")
	bs := install.BuildService{}
	fs.StringVar(&bs.BuildKitImage, "buildkit-image", "", "BuildKit image to run (default: made from --buildkitd and --runc, pushed to --registry)")
	fs.StringVar(&bs.RegistryImage, "registry-image", "", "registry image to run (default: made from --registry-bin, pushed to --registry)")
	fs.StringVar(&bs.BuildKitd, "buildkitd", install.DefaultBuildKitd(), "buildkitd binary for the BuildKit image (hack/buildkit/build.sh)")
	fs.StringVar(&bs.Runc, "runc", "/usr/sbin/runc", "runc binary for the BuildKit image (its shared libraries go with it)")
	fs.StringVar(&bs.RegistryBin, "registry-bin", "/usr/bin/docker-registry", "Distribution registry binary for the registry image (Debian's docker-registry)")
	fs.StringVar(&bs.CacheSize, "buildkit-cache-size", "20Gi", "size of BuildKit's cache claim")
	fs.StringVar(&bs.RegistrySize, "registry-size", "10Gi", "size of the registry's claim")
	fs.StringVar(&bs.RegistryAddress, "hosted-registry", "", "the hosted registry as users and the kubelet name it (default 127.0.0.1:<node port>)")
	fs.StringVar(&bs.BuilderAddress, "hosted-builder", "", "the hosted BuildKit as users reach it (default tcp://127.0.0.1:<node port>)")
	fs.StringVar(&o.Runner.Devtool, "runner-devtool", "", "static Linux devtool binary for the pipeline runner's image (none: no pipelines)")
	fs.StringVar(&o.Runner.Kubectl, "runner-kubectl", "", "static Linux kubectl for the runner image (default: kubectl on PATH)")
	fs.StringVar(&o.Runner.Helm, "runner-helm", "", "static Linux helm for the runner image (optional)")
	fs.StringVar(&o.Runner.Busybox, "runner-busybox", "/bin/busybox", "static busybox (Debian's busybox-static) for the runner image's shell and tools")
	fs.StringVar(&o.Runner.CACerts, "runner-ca-certs", "/etc/ssl/certs/ca-certificates.crt", "the CA bundle for the runner image (\"\" for none)")
	fs.StringVar(&o.PreviewTTL, "preview-ttl", "", "delete a preview idle this long (default: the server's, 72h)")
	fs.StringVar(&o.PreviewSleep, "preview-sleep-after", "", "scale a preview to zero when idle this long (default: the server's, 30m)")
	if err := fs.Parse(args); err != nil {
		return usageError{err.Error()}
	}
	for _, d := range []string{o.PreviewTTL, o.PreviewSleep} {
		if d == "" {
			continue
		}
		if v, err := time.ParseDuration(d); err != nil || v <= 0 {
			return usageError{fmt.Sprintf("install: --preview-ttl and --preview-sleep-after take a positive duration such as 72h, got %q", d)}
		}
	}
	if o.Runner.Devtool != "" {
		if o.Runner.Kubectl == "" {
			k, err := exec.LookPath("kubectl")
			if err != nil {
				return usageError{"install: --runner-kubectl: no kubectl on PATH (give a static Linux kubectl)"}
			}
			o.Runner.Kubectl = k
		}
		if o.Runner.CACerts != "" {
			if _, err := os.Stat(o.Runner.CACerts); err != nil {
				o.Runner.CACerts = ""
			}
		}
	}
	if *buildService {
		o.BuildService = &bs
	}
	o.OIDC = map[string]string{}
	for k, v := range oidc {
		o.OIDC[k] = *v
	}
	o.OIDC["clientSecret"] = os.Getenv("DEVTOOL_OIDC_CLIENT_SECRET")
	if *secretFile != "" {
		b, err := os.ReadFile(*secretFile)
		if err != nil {
			return usageError{"install: --oidc-client-secret-file: " + err.Error()}
		}
		o.OIDC["clientSecret"] = strings.TrimSpace(string(b))
	}
	if o.OIDC["issuer"] != "" && o.OIDC["clientID"] == "" {
		return usageError{"install: --oidc-issuer needs --oidc-client-id"}
	}
	if o.APIServer == "" {
		return usageError{"install: --api-server is required (the address users' kubeconfigs get, e.g. https://127.0.0.1:26443)"}
	}
	if *replicas < 1 || *replicas > 20 {
		return usageError{"install: --replicas: between 1 and 20"}
	}
	if *ingressReplicas < 1 || *ingressReplicas > 20 {
		return usageError{"install: --ingress-replicas: between 1 and 20"}
	}
	if *endpointPort < 0 || *endpointPort > 65535 || *endpointPort != 0 && *withIngress {
		return usageError{"install: --endpoint-port: a port number, only with --ingress=false (the ingress's node port is the endpoints' port)"}
	}
	o.Replicas = int32(*replicas)
	o.NoIngress, o.IngressReplicas, o.EndpointPort = !*withIngress, int32(*ingressReplicas), int32(*endpointPort)
	cfg, err := restConfig(*kubeconfig)
	if err != nil {
		return err
	}
	o.Config = cfg
	if o.Image == "" {
		if o.Binary, err = os.Executable(); err != nil {
			return err
		}
	}
	o.Progress = func(s string) { fmt.Fprintln(stderr, "platform:", s) }
	res, err := install.Install(ctx, o)
	if err != nil {
		return err
	}
	fmt.Fprintln(stderr, "platform: answering on", res.URL)
	return nil
}

// readKey reads a raw key file of n bytes (a mounted Secret key).
func readKey(path string, n int) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading key %s: %w", path, err)
	}
	if len(b) != n {
		return nil, fmt.Errorf("key %s: %d bytes, want %d", path, len(b), n)
	}
	return b, nil
}

func registryProxy(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("registry-proxy", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", ":5000", "address to serve the registry API on (in a pod: its own network only)")
	upstream := fs.String("upstream", "http://127.0.0.1:5001", "the registry behind the proxy")
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig (default: in-cluster, else KUBECONFIG)")
	if err := fs.Parse(args); err != nil {
		return usageError{err.Error()}
	}
	up, err := url.Parse(*upstream)
	if err != nil || up.Host == "" || (up.Scheme != "http" && up.Scheme != "https") {
		return usageError{fmt.Sprintf("registry-proxy: --upstream %q: expected http://HOST:PORT", *upstream)}
	}
	log := slog.New(slog.NewJSONHandler(stderr, nil)).With("pod", os.Getenv("POD_NAME"))
	cfg, err := restConfig(*kubeconfig)
	if err != nil {
		return err
	}
	cfg.UserAgent = "devtool-platform-registry-proxy/" + buildinfo.Version
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	hs := &http.Server{
		Handler: &registryproxy.Proxy{Upstream: up, Kube: kc, Log: log},
		// No read or write timeout: layers take the time they take. Headers must come quickly.
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	log.Info("serving", "addr", ln.Addr().String(), "upstream", up.String(), "version", buildinfo.Version)
	done := make(chan error, 1)
	go func() { done <- hs.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = hs.Shutdown(sctx)
	<-done
	return err
}

func forwardCmd(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("forward", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: devtool-platform forward LISTEN=TO...   (each HOST:PORT; e.g. 127.0.0.1:30500=devtool-registry.devtool-system.svc.cluster.local:5000)")
	}
	if err := fs.Parse(args); err != nil {
		return usageError{err.Error()}
	}
	if fs.NArg() == 0 {
		return usageError{"forward: give at least one LISTEN=TO"}
	}
	var rules []forward.Rule
	for _, a := range fs.Args() {
		r, err := forward.ParseRule(a)
		if err != nil {
			return usageError{err.Error()}
		}
		rules = append(rules, r)
	}
	log := slog.New(slog.NewJSONHandler(stderr, nil))
	return (&forward.Forwarder{Log: log}).Run(ctx, rules)
}

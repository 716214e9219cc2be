package kube

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/term"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/pkg/apis/clientauthentication"
	"k8s.io/client-go/pkg/apis/clientauthentication/install"
	"k8s.io/client-go/rest"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/transport/websocket"
)

// Credential plugins (kubeconfig users[].user.exec: aws, gke-gcloud-auth-plugin, kubelogin, ...)
// are run by client-go with exec.Command and no deadline, under a lock: a plugin that never
// answers hangs every request forever and Ctrl-C cannot stop it. BoundCredentialPlugin takes the
// plugin from client-go and runs it the way client-go does (same input in KUBERNETES_EXEC_INFO,
// same environment, same decoding of the ExecCredential, token cached until it expires or the API
// server answers 401), with a deadline and the request's context: when either ends, the plugin is
// killed and the error says what devtool was waiting for.

// CredentialPluginTimeoutEnv names the environment variable that sets how long devtool waits for
// a kubeconfig credential plugin: a Go duration ("45s", "2m"). "0" hands the plugin back to
// client-go, which waits for it without a deadline.
const CredentialPluginTimeoutEnv = "DEVTOOL_CREDENTIAL_PLUGIN_TIMEOUT"

// DefaultCredentialPluginTimeout is the deadline of a credential plugin that needs no person.
// One that talks to the user on the terminal (interactiveMode, stdin a terminal) gets
// InteractiveCredentialPluginTimeout at least.
const (
	DefaultCredentialPluginTimeout     = 30 * time.Second
	InteractiveCredentialPluginTimeout = 5 * time.Minute
)

// maxPluginOutput caps what devtool reads of a plugin's standard output.
const maxPluginOutput = 1 << 20

// ParseCredentialPluginTimeout reads the value of CredentialPluginTimeoutEnv: "" is the default,
// "0" means no deadline, returned as a negative duration so that it means the same to
// LoadOptions.CredentialPluginTimeout (where 0 is the default) and BoundCredentialPlugin.
func ParseCredentialPluginTimeout(s string) (time.Duration, error) {
	if strings.TrimSpace(s) == "" {
		return DefaultCredentialPluginTimeout, nil
	}
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%s=%q is not a duration (like 30s or 2m; 0 lets client-go wait without a deadline)", CredentialPluginTimeoutEnv, s)
	}
	if d == 0 {
		return -1, nil
	}
	return d, nil
}

// BoundCredentialPlugin replaces cfg's exec credential plugin, if it has one, by devtool's runner
// with a deadline of timeout (0 or negative leaves the plugin to client-go). user names the kubeconfig user
// for messages. Configurations whose plugin client-go would not run (a token, basic auth or a
// client certificate is already set) lose the plugin, as client-go ignores it then.
func BoundCredentialPlugin(cfg *rest.Config, user string, timeout time.Duration) error {
	ec := cfg.ExecProvider
	if ec == nil || timeout <= 0 {
		return nil
	}
	if cfg.AuthProvider != nil {
		return nil // client-go refuses the combination with its own error
	}
	cfg.ExecProvider = nil
	// client-go's own test (transport.Config HasTokenAuth, HasBasicAuth, HasCertAuth).
	hasCert := (cfg.CertFile != "" || len(cfg.CertData) > 0) && (cfg.KeyFile != "" || len(cfg.KeyData) > 0)
	if cfg.BearerToken != "" || cfg.BearerTokenFile != "" || cfg.Username != "" || hasCert {
		return nil
	}
	gv, ok := credentialVersions[ec.APIVersion]
	if !ok {
		return fmt.Errorf("the kubeconfig credential plugin %q (user %q): invalid apiVersion %q", pluginName(ec.Command), user, ec.APIVersion)
	}
	p := &credentialPlugin{conf: ec, user: user, timeout: timeout, group: gv, sem: make(chan struct{}, 1)}
	if ec.ProvideClusterInfo {
		tmp := rest.CopyConfig(cfg)
		tmp.ExecProvider = ec
		cluster, err := rest.ConfigToExecCluster(tmp)
		if err != nil {
			return err
		}
		p.cluster = cluster
	}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &credentialRoundTripper{p: p, base: rt} })
	return nil
}

var (
	credentialScheme   = runtime.NewScheme()
	credentialCodecs   = serializer.NewCodecFactory(credentialScheme)
	credentialVersions = map[string]schema.GroupVersion{
		"client.authentication.k8s.io/v1beta1": {Group: "client.authentication.k8s.io", Version: "v1beta1"},
		"client.authentication.k8s.io/v1":      {Group: "client.authentication.k8s.io", Version: "v1"},
	}
)

func init() { install.Install(credentialScheme) }

func pluginName(cmd string) string { return filepath.Base(cmd) }

// credentialPlugin runs one kubeconfig user's plugin and caches its token.
type credentialPlugin struct {
	conf    *clientcmdapi.ExecConfig
	cluster *clientauthentication.Cluster
	user    string
	timeout time.Duration
	group   schema.GroupVersion

	// stdin, stderr and environ default to the process's; tests set them.
	stdin   io.Reader
	stderr  io.Writer
	environ func() []string
	isTerm  func() bool

	sem  chan struct{} // one run at a time; waiting for it honours the request's context
	mu   sync.Mutex
	cred credential
	exp  time.Time
}

// credential is a plugin's answer: a bearer token, or a client certificate (with its key).
type credential struct {
	token string
	cert  *tls.Certificate
}

func (c credential) empty() bool { return c.token == "" && c.cert == nil }

// get returns the cached credential, or runs the plugin for a new one.
func (p *credentialPlugin) get(ctx context.Context) (credential, error) {
	select {
	case p.sem <- struct{}{}:
	case <-ctx.Done():
		return credential{}, fmt.Errorf("waiting for the kubeconfig credential plugin %q (user %q): %w", pluginName(p.conf.Command), p.user, ctx.Err())
	}
	defer func() { <-p.sem }()
	p.mu.Lock()
	cred, exp := p.cred, p.exp
	p.mu.Unlock()
	if !cred.empty() && (exp.IsZero() || time.Now().Before(exp)) {
		return cred, nil
	}
	cred, exp, err := p.run(ctx)
	if err != nil {
		return credential{}, err
	}
	p.mu.Lock()
	p.cred, p.exp = cred, exp
	p.mu.Unlock()
	return cred, nil
}

// invalidate forgets cred after the API server refused it (unless it was replaced already).
func (p *credentialPlugin) invalidate(cred credential) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cred == cred {
		p.cred, p.exp = credential{}, time.Time{}
	}
}

func (p *credentialPlugin) interactive() (bool, error) {
	isTerm := p.isTerm
	if isTerm == nil {
		isTerm = func() bool { return term.IsTerminal(int(os.Stdin.Fd())) }
	}
	switch p.conf.InteractiveMode {
	case clientcmdapi.NeverExecInteractiveMode:
		return false, nil
	case clientcmdapi.IfAvailableExecInteractiveMode, "":
		return !p.conf.StdinUnavailable && isTerm(), nil
	case clientcmdapi.AlwaysExecInteractiveMode:
		if !isTerm() {
			return false, errors.New("standard input is not a terminal")
		}
		if p.conf.StdinUnavailable {
			msg := ""
			if p.conf.StdinUnavailableMessage != "" {
				msg = ": " + p.conf.StdinUnavailableMessage
			}
			return false, fmt.Errorf("standard input is unavailable%s", msg)
		}
		return true, nil
	default:
		return false, fmt.Errorf("unknown interactiveMode: %q", p.conf.InteractiveMode)
	}
}

// run starts the plugin and decodes its answer, within the deadline and ctx.
func (p *credentialPlugin) run(ctx context.Context) (credential, time.Time, error) {
	name := pluginName(p.conf.Command)
	fail := func(format string, args ...any) (credential, time.Time, error) {
		return credential{}, time.Time{}, fmt.Errorf("the kubeconfig credential plugin %q (user %q): %s", name, p.user, fmt.Sprintf(format, args...))
	}
	interactive, err := p.interactive()
	if err != nil {
		return fail("cannot run interactively: %v", err)
	}
	timeout := p.timeout
	if interactive && timeout < InteractiveCredentialPluginTimeout {
		timeout = InteractiveCredentialPluginTimeout // a person answers it
	}
	cred := &clientauthentication.ExecCredential{Spec: clientauthentication.ExecCredentialSpec{Interactive: interactive}}
	if p.conf.ProvideClusterInfo {
		cred.Spec.Cluster = p.cluster
	}
	input, err := runtime.Encode(credentialCodecs.LegacyCodec(p.group), cred)
	if err != nil {
		return fail("encoding its input: %v", err)
	}
	environ := p.environ
	if environ == nil {
		environ = os.Environ
	}
	env := environ()
	for _, e := range p.conf.Env {
		env = append(env, e.Name+"="+e.Value)
	}
	env = append(env, "KUBERNETES_EXEC_INFO="+string(input))

	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(rctx, p.conf.Command, p.conf.Args...)
	cmd.Env = env
	cmd.WaitDelay = time.Second // a grandchild holding stdout does not keep us waiting
	stdout := &capped{max: maxPluginOutput}
	cmd.Stdout = stdout
	cmd.Stderr = p.stderr
	if cmd.Stderr == nil {
		cmd.Stderr = os.Stderr // the plugin's own messages (and prompts) reach the user, as with kubectl
	}
	if interactive {
		cmd.Stdin = p.stdin
		if cmd.Stdin == nil {
			cmd.Stdin = os.Stdin
		}
	} else {
		// Its own process group (not for an interactive plugin: a background group cannot read
		// the terminal), killed whole when the deadline passes.
		killProcessGroup(cmd)
	}
	err = cmd.Run()
	switch {
	case err != nil && ctx.Err() != nil: // the command was interrupted: no message about the plugin's fault
		return credential{}, time.Time{}, fmt.Errorf("waiting for the kubeconfig credential plugin %q (user %q): %w", name, p.user, ctx.Err())
	case err != nil && rctx.Err() != nil:
		return credential{}, time.Time{}, fmt.Errorf("waiting for the kubeconfig credential plugin %q (user %q) for %v: it did not answer "+
			"(set %s to wait longer): %w", name, p.user, timeout, CredentialPluginTimeoutEnv, rctx.Err())
	case errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist):
		msg := fmt.Sprintf("%s not found", p.conf.Command)
		if p.conf.InstallHint != "" {
			msg += "\n\n" + p.conf.InstallHint
		}
		return fail("%s", msg)
	case err != nil:
		return fail("%v", err)
	case stdout.over:
		return fail("wrote more than %d bytes", maxPluginOutput)
	}
	out := &clientauthentication.ExecCredential{}
	_, gvk, err := credentialCodecs.UniversalDecoder(p.group).Decode(stdout.buf.Bytes(), nil, out)
	if err != nil {
		return fail("decoding its output: %v", err)
	}
	if gvk.Group != p.group.Group || gvk.Version != p.group.Version {
		return fail("configured for API version %s, it answered with %s", p.group, schema.GroupVersion{Group: gvk.Group, Version: gvk.Version})
	}
	st := out.Status
	var got credential
	switch {
	case st == nil:
		return fail("its answer has no status field")
	case st.ClientCertificateData != "" || st.ClientKeyData != "":
		// As client-go: both or neither; a certificate wins over a token.
		if st.ClientCertificateData == "" || st.ClientKeyData == "" {
			return fail("its answer holds a client certificate without its key, or a key without its certificate")
		}
		cert, err := tls.X509KeyPair([]byte(st.ClientCertificateData), []byte(st.ClientKeyData))
		if err != nil {
			return fail("its client certificate and key: %v", err) // the error quotes neither
		}
		got.cert = &cert
	case st.Token == "":
		return fail("its answer holds no token")
	default:
		got.token = st.Token
	}
	var exp time.Time
	if st.ExpirationTimestamp != nil {
		exp = st.ExpirationTimestamp.Time
	}
	return got, exp, nil
}

// capped keeps at most max bytes and notes that there were more.
type capped struct {
	buf  bytes.Buffer
	max  int
	over bool
}

func (c *capped) Write(b []byte) (int, error) {
	if room := c.max - c.buf.Len(); len(b) > room {
		c.over = true
		c.buf.Write(b[:max(room, 0)])
		return len(b), nil
	}
	return c.buf.Write(b)
}

// credentialRoundTripper puts the plugin's token on requests that carry no Authorization, or,
// when the plugin answers with a client certificate, sends them through a copy of the base
// transport whose TLS handshakes present the plugin's current certificate (asked for again, with
// the handshake's context, once it has expired: the way client-go's exec authenticator does it
// through transport.Config's GetCert). Streaming upgrades (exec, port-forward over WebSocket or
// SPDY) get the certificate callback on their own TLS configuration.
type credentialRoundTripper struct {
	p    *credentialPlugin
	base http.RoundTripper

	mu       sync.Mutex
	certRT   http.RoundTripper // base presenting the plugin's certificate; built once
	lastCert *tls.Certificate
}

func (rt *credentialRoundTripper) WrappedRoundTripper() http.RoundTripper { return rt.base }

func (rt *credentialRoundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Header.Get("Authorization") != "" {
		return rt.base.RoundTrip(req)
	}
	cred, err := rt.p.get(req.Context())
	if err != nil {
		return nil, err
	}
	if cred.cert != nil {
		crt, err := rt.certTransport(cred.cert)
		if err != nil {
			return nil, err
		}
		res, err := crt.RoundTrip(req)
		if err == nil && res.StatusCode == http.StatusUnauthorized {
			rt.p.invalidate(cred)
		}
		return res, err
	}
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", "Bearer "+cred.token)
	res, err := rt.base.RoundTrip(req)
	if err == nil && res.StatusCode == http.StatusUnauthorized {
		rt.p.invalidate(cred) // the next request runs the plugin again
	}
	return res, err
}

// clientCertificate is the TLS callback: the plugin's current certificate, running the plugin
// again (within the handshake's context and the plugin's deadline) when it has expired.
func (rt *credentialRoundTripper) clientCertificate(cri *tls.CertificateRequestInfo) (*tls.Certificate, error) {
	cred, err := rt.p.get(cri.Context())
	if err != nil {
		return nil, err
	}
	if cred.cert == nil {
		return &tls.Certificate{}, nil // the plugin switched to a token: no certificate
	}
	return cred.cert, nil
}

// certTransport returns the base transport presenting the plugin's certificate. When the
// certificate changed since the last request, idle connections (made with the old one) are closed.
func (rt *credentialRoundTripper) certTransport(cert *tls.Certificate) (http.RoundTripper, error) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.certRT == nil {
		switch b := rt.base.(type) {
		case *http.Transport:
			// A copy with its own connections: Clone keeps TLSNextProto, whose HTTP/2 entry
			// (x/net/http2, set by client-go) pools connections in the original transport, so
			// connections made with the certificate would serve requests of other clients
			// sharing client-go's cached transport (seen: a token client became the certificate's
			// user). HTTP/2 is configured again on the copy.
			t := b.Clone()
			t.TLSNextProto = nil
			if t.TLSClientConfig == nil {
				t.TLSClientConfig = &tls.Config{}
			}
			t.TLSClientConfig.GetClientCertificate = rt.clientCertificate
			rt.certRT = utilnet.SetTransportDefaults(t)
		case *websocket.RoundTripper:
			// client-go's WebSocket upgrader (exec, attach, port-forward): its own TLS configuration.
			if b.TLSConfig == nil {
				b.TLSConfig = &tls.Config{}
			}
			if b.TLSConfig.GetClientCertificate == nil && len(b.TLSConfig.Certificates) == 0 {
				b.TLSConfig.GetClientCertificate = rt.clientCertificate
			}
			rt.certRT = rt.base
		case interface{ TLSClientConfig() *tls.Config }:
			// client-go's SPDY upgrader: its TLS configuration is its own (made for it by
			// rest.TLSConfigFor), so the callback is set on it in place.
			c := b.TLSClientConfig()
			if c == nil {
				return nil, fmt.Errorf("the kubeconfig credential plugin %q (user %q) answered with a client certificate, "+
					"which this connection (%T) cannot present: set %s=0 to let client-go run the plugin", pluginName(rt.p.conf.Command), rt.p.user, rt.base, CredentialPluginTimeoutEnv)
			}
			if c.GetClientCertificate == nil && len(c.Certificates) == 0 {
				c.GetClientCertificate = rt.clientCertificate
			}
			rt.certRT = rt.base
		default:
			return nil, fmt.Errorf("the kubeconfig credential plugin %q (user %q) answered with a client certificate, "+
				"which this connection (%T) cannot present: set %s=0 to let client-go run the plugin", pluginName(rt.p.conf.Command), rt.p.user, rt.base, CredentialPluginTimeoutEnv)
		}
	}
	if rt.lastCert != nil && rt.lastCert != cert {
		if c, ok := rt.certRT.(interface{ CloseIdleConnections() }); ok {
			c.CloseIdleConnections()
		}
	}
	rt.lastCert = cert
	return rt.certRT, nil
}

package contextcmd

import (
	"context"
	"encoding/pem"
	"errors"
	"fmt"

	"github.com/devtool/devtool/internal/buildinfo"
	"github.com/devtool/devtool/internal/cli/context/prompt"
	"github.com/devtool/devtool/internal/cmdutil"
	"github.com/devtool/devtool/internal/contexts"
	"github.com/devtool/devtool/internal/errs"
	"github.com/devtool/devtool/internal/platform/api"
	"github.com/devtool/devtool/internal/platform/client"
)

// loginPlatform logs in to the platform at opts.Name and saves the context: GET /api/v1/info once
// (versions, login methods, registry, builder, domain), a login when no token is given, then GET
// /api/v1/me to check the token. The platform's CA comes from --ca-cert, DEVTOOL_CA_CERT or the saved
// context; without one, the system's roots are tried, and a certificate they do not trust is shown
// (SHA-256 of its CA) for the user to confirm on a terminal.
//
// The token: --token or DEVTOOL_TOKEN (never a browser then); --user with a password (asked without
// echo on a terminal, or read from --password-stdin); --device (RFC 8628: a code to enter on any
// device); else the saved context's token when it is selected again; else, on a terminal, the
// browser login (authorization code with PKCE and a loopback redirect). Without a terminal, or with
// CI set, no browser is tried and no question asked: exit 4 saying what to do instead.
func loginPlatform(ctx context.Context, opts *Options) error {
	url, err := client.NormalizeURL(opts.Name)
	if err != nil {
		return cmdutil.FlagErrorf("%v", err)
	}
	store, err := contexts.StoreFromEnv(opts.Getenv)
	if err != nil {
		return err
	}
	cfg, err := store.Load()
	if err != nil {
		return err
	}
	saved := cfg.Contexts[url]
	token := firstNonEmpty(opts.Token, opts.Getenv(api.EnvToken))
	interactive := opts.User != "" || opts.Device
	fromSaved := false
	if token == "" && !interactive && saved != nil && saved.IsDevtool && saved.Token != "" {
		token, fromSaved = saved.Token, true // selecting a saved platform context checks it again
	}
	var ca []byte
	switch {
	case opts.CACert != "":
		if ca, err = contexts.ReadCAFile(opts.CACert, "--ca-cert"); err != nil {
			return cmdutil.FlagErrorf("%v", err)
		}
	case opts.Getenv(api.EnvCACert) != "":
		if ca, err = contexts.ReadCAFile(opts.Getenv(api.EnvCACert), api.EnvCACert); err != nil {
			return err
		}
	case saved != nil && saved.Certificate != "":
		ca = []byte(saved.Certificate)
	}
	if token == "" && !interactive {
		// Before anything is fetched: no terminal or CI means no browser, whatever the platform offers.
		if err := canBrowse(opts, url); err != nil {
			return err
		}
	}

	pc, info, ca, err := fetchInfo(ctx, opts, url, token, ca)
	if err != nil {
		return err
	}
	defer func() { pc.Close() }() // the client in use at the end (a login replaces it)
	if err := client.CheckVersions(info, buildinfo.Get().Version, url); err != nil {
		return err
	}
	if token == "" {
		if token, err = login(ctx, opts, pc, info, url); err != nil {
			return err
		}
		if pc, err = withToken(pc, url, token, ca); err != nil {
			return err
		}
	}
	me, err := pc.Me(ctx)
	if err != nil && fromSaved && client.IsUnauthorized(err) && canBrowse(opts, url) == nil {
		// The saved token was revoked or expired: log in again, as with no saved context.
		fmt.Fprintf(opts.IO.ErrOut, "The saved token for %s is no longer valid: logging in again.\n", url)
		if token, err = login(ctx, opts, pc, info, url); err != nil {
			return err
		}
		if pc, err = withToken(pc, url, token, ca); err != nil {
			return err
		}
		me, err = pc.Me(ctx)
	}
	if err != nil {
		return fmt.Errorf("checking the token: %w", err)
	}
	c := &contexts.Context{Name: url, Token: token, IsDevtool: true, Certificate: string(ca), Username: me.Name,
		Builder: info.Builder, BuildService: info.Builder, Registry: info.Registry, ClusterDomain: info.Domain,
		IngressClass: info.IngressClass, EndpointPort: info.EndpointPort}
	if saved != nil && saved.Username == me.Name {
		c.Namespace = saved.Namespace
	}
	c.Namespace = firstNonEmpty(opts.Namespace, c.Namespace, me.Namespace, me.Name)
	if opts.Builder != "" {
		c.Builder = opts.Builder
	}
	if err := contexts.SavePlatform(store, c); err != nil {
		return err
	}
	fmt.Fprintf(opts.IO.ErrOut, "Logged in to %s as %s; using namespace %s.\n", url, me.Name, c.Namespace)
	return nil
}

// withToken replaces old (closed) by a client with token; on an error old is kept (and still open).
func withToken(old *client.Client, url, token string, ca []byte) (*client.Client, error) {
	pc, err := client.New(client.Options{URL: url, Token: token, CA: ca, UserAgent: "devtool/" + buildinfo.Get().Version})
	if err != nil {
		return old, err
	}
	old.Close()
	return pc, nil
}

// fetchInfo calls GET /api/v1/info, settling trust in the platform's certificate on the way.
func fetchInfo(ctx context.Context, opts *Options, url, token string, ca []byte) (*client.Client, *api.Info, []byte, error) {
	pc, err := client.New(client.Options{URL: url, Token: token, CA: ca, UserAgent: "devtool/" + buildinfo.Get().Version})
	if err != nil {
		return nil, nil, nil, err
	}
	info, err := pc.Info(ctx)
	if err == nil {
		return pc, info, ca, nil
	}
	pc.Close()
	var te *client.TrustError
	if !errors.As(err, &te) || te.Pinned || te.CA() == nil {
		if te != nil && te.Pinned {
			return nil, nil, nil, errs.WithHint(err, "check the CA file, or ask the platform's administrator for its CA certificate")
		}
		return nil, nil, nil, err
	}
	cert := te.CA()
	fp := client.Fingerprint(cert)
	if !opts.IO.CanPrompt() {
		return nil, nil, nil, errs.WithHint(
			fmt.Errorf("platform %s presents a certificate of a CA this machine does not trust (%s, SHA-256 %s), and there is no terminal to confirm it on", url, cert.Subject, fp),
			fmt.Sprintf("give the platform's CA certificate with --ca-cert FILE or %s=FILE (the administrator has it; 'make platform-up' writes /tmp/devtool-cluster/platform-ca.crt)", api.EnvCACert))
	}
	what := "CA"
	if !cert.IsCA {
		// The server sent its own certificate without its CA: that certificate is what gets pinned
		// (until the platform renews it).
		what = "certificate"
	}
	fmt.Fprintf(opts.IO.ErrOut, "The platform %s presents a certificate this machine does not trust. Its %s:\n  subject: %s\n  SHA-256: %s\nCompare the fingerprint with the one your administrator gave you.\n", url, what, cert.Subject, fp)
	i, err := prompt.Select(ctx, opts.IO.In, opts.IO.ErrOut, "Trust this "+what+" for "+url+"?", []string{"yes, trust it and save it with the context", "no"}, 1)
	if err != nil {
		return nil, nil, nil, err
	}
	if i != 0 {
		return nil, nil, nil, errs.WithHint(fmt.Errorf("the platform's %s was not trusted; nothing was saved", what),
			fmt.Sprintf("give its CA certificate with --ca-cert FILE or %s=FILE", api.EnvCACert))
	}
	ca = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw})
	pc, err = client.New(client.Options{URL: url, Token: token, CA: ca, UserAgent: "devtool/" + buildinfo.Get().Version})
	if err != nil {
		return nil, nil, nil, err
	}
	if info, err = pc.Info(ctx); err != nil {
		pc.Close()
		return nil, nil, nil, err
	}
	return pc, info, ca, nil
}

func firstNonEmpty(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}

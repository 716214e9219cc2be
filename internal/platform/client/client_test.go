package client_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/devtool/devtool/internal/errs"
	"github.com/devtool/devtool/internal/platform/api"
	"github.com/devtool/devtool/internal/platform/client"
	"github.com/devtool/devtool/internal/platform/client/clienttest"
)

func newClient(t *testing.T, f *clienttest.Fake, token string) *client.Client {
	t.Helper()
	c, err := client.New(client.Options{URL: f.URL(), Token: token, CA: f.CAPEM})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func TestRoutesAgainstFake(t *testing.T) {
	f := clienttest.New(t)
	alice := f.AddUser("alice", false)
	f.AddUser("bob", false)
	ctx := context.Background()
	c := newClient(t, f, alice)

	info, err := c.Info(ctx)
	if err != nil || info.Registry != "registry.example:5000" {
		t.Fatalf("Info = %+v, %v", info, err)
	}
	me, err := c.Me(ctx)
	if err != nil || me.Name != "alice" {
		t.Fatalf("Me = %+v, %v", me, err)
	}
	ns, created, err := c.CreateNamespace(ctx, "shop")
	if err != nil || !created || ns.Name != "shop" {
		t.Fatalf("CreateNamespace = %+v, %v, %v", ns, created, err)
	}
	if _, created, err := c.CreateNamespace(ctx, "shop"); err != nil || created {
		t.Fatalf("second CreateNamespace: created=%v err=%v, want idempotent 200", created, err)
	}
	list, err := c.Namespaces(ctx)
	if err != nil || len(list) != 2 || list[0].Name != "alice" || list[1].Name != "shop" {
		t.Fatalf("Namespaces = %+v, %v", list, err)
	}
	if err := c.Share(ctx, "shop", "bob", api.RoleViewer); err != nil {
		t.Fatal(err)
	}
	if got := f.Namespace("shop").Members; len(got) != 2 || got[1] != (api.Member{User: "bob", Role: "viewer"}) {
		t.Fatalf("members after share = %+v", got)
	}
	if err := c.Unshare(ctx, "shop", "bob"); err != nil {
		t.Fatal(err)
	}
	kt, err := c.KubeToken(ctx, 0)
	if err != nil || kt.Token == "" || kt.APIServer == "" {
		t.Fatalf("KubeToken = %+v, %v", kt, err)
	}
	if err := c.DeleteNamespace(ctx, "shop"); err != nil {
		t.Fatal(err)
	}
	if f.Namespace("shop") != nil {
		t.Fatal("namespace shop still there after DeleteNamespace")
	}
}

func TestErrorsCarryStatusMessageAndField(t *testing.T) {
	f := clienttest.New(t)
	alice := f.AddUser("alice", false)
	bob := f.AddUser("bob", false)
	ctx := context.Background()
	c := newClient(t, f, alice)

	_, _, err := c.CreateNamespace(ctx, "Bad_Name")
	var ae *client.APIError
	if !errors.As(err, &ae) || ae.Status != 400 || ae.Field != "name" || !strings.Contains(err.Error(), `field "name"`) {
		t.Fatalf("bad name: %v", err)
	}
	if errs.ExitCode(err) != errs.ExitError {
		t.Fatalf("exit code of a 400 = %d", errs.ExitCode(err))
	}
	// bob's personal namespace is not visible to alice: 404, never 403.
	if _, err := c.Namespace(ctx, "bob"); !client.IsNotFound(err) {
		t.Fatalf("other user's namespace: %v, want 404", err)
	}
	if _, _, err := c.CreateNamespace(ctx, "bob"); client.StatusOf(err) != 409 || !strings.Contains(err.Error(), "exists") {
		t.Fatalf("create of another's namespace: %v, want 409", err)
	}
	_ = bob

	f.Revoke(alice)
	_, err = c.Me(ctx)
	var auth *errs.AuthError
	if !errors.As(err, &auth) || errs.ExitCode(err) != errs.ExitAuth || !client.IsUnauthorized(err) {
		t.Fatalf("revoked token: %v (exit %d), want an AuthError with exit 4", err, errs.ExitCode(err))
	}
	if h := errs.Hint(err); !strings.Contains(h, "--token") || !strings.Contains(h, api.EnvToken) {
		t.Fatalf("hint of a 401 = %q", h)
	}
}

func TestNonAPIErrorBodyIsBoundedAndPrintable(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(502)
		_, _ = w.Write([]byte("\x1b[31mbad gateway\x1b[0m" + strings.Repeat("x", 100000)))
	}))
	defer srv.Close()
	c, err := client.New(client.Options{URL: srv.URL, CA: certPEM(srv)})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Info(context.Background())
	if client.StatusOf(err) != 502 || strings.Contains(err.Error(), "\x1b") || len(err.Error()) > 600 {
		t.Fatalf("err = %q", err)
	}
}

func TestOversizedAnswerIsRefused(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`{"version":"` + strings.Repeat("9", client.MaxAnswerBytes) + `"}`))
	}))
	defer srv.Close()
	c, _ := client.New(client.Options{URL: srv.URL, CA: certPEM(srv)})
	if _, err := c.Info(context.Background()); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("err = %v", err)
	}
}

func TestUntrustedCertificateGivesTheChain(t *testing.T) {
	f := clienttest.New(t)
	c, err := client.New(client.Options{URL: f.URL()}) // system roots: httptest's CA is not among them
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Info(context.Background())
	var te *client.TrustError
	if !errors.As(err, &te) || te.CA() == nil {
		t.Fatalf("err = %v, want a TrustError with the presented chain", err)
	}
	if !te.CA().Equal(f.Server.Certificate()) {
		t.Fatal("TrustError.CA is not the server's certificate")
	}
	if fp := client.Fingerprint(te.CA()); len(fp) != 95 {
		t.Fatalf("fingerprint %q", fp)
	}
	// A pinned CA that is not the server's is refused too, saying so.
	c2, _ := client.New(client.Options{URL: f.URL(), CA: otherCA(t)})
	if _, err := c2.Info(context.Background()); !errors.As(err, &te) || !te.Pinned {
		t.Fatalf("err = %v, want a pinned TrustError", err)
	}
}

func TestParseURL(t *testing.T) {
	for in, want := range map[string]string{
		"https://Platform.Localhost:8443/": "https://platform.localhost:8443",
		"https://p.example":                "https://p.example",
	} {
		got, err := client.NormalizeURL(in)
		if err != nil || got != want {
			t.Errorf("NormalizeURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"http://p.example", "https://", "https://u:p@p.example", "https://p.example/x", "p.example"} {
		if _, err := client.NormalizeURL(bad); err == nil {
			t.Errorf("NormalizeURL(%q) accepted", bad)
		}
	}
}

func TestLocalhostNamesDialLoopback(t *testing.T) {
	f := clienttest.New(t)
	_, port, _ := net.SplitHostPort(f.Server.Listener.Addr().String())
	// httptest's certificate is for example.com and 127.0.0.1; the name is checked by TLS, the
	// dial by Dial: a raw dial of a .localhost name reaches the loopback listener.
	conn, err := client.Dial(context.Background(), "tcp", net.JoinHostPort("platform.devtool.localhost", port))
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	conn.Close()
	for host, want := range map[string]bool{"localhost": true, "a.b.LOCALHOST.": true, "localhost.example": false, "notlocalhost": false} {
		if client.IsLocalhost(host) != want {
			t.Errorf("IsLocalhost(%q) != %v", host, want)
		}
	}
}

func TestCheckVersions(t *testing.T) {
	cases := []struct {
		cli, server, minCLI string
		want                string
	}{
		{"v1.2.0", "0.2.0", "1.1.0", ""},
		{"v1.0.0", "0.2.0", "1.1.0", "too old for the platform"},
		{"v1.0.0", "0.0.9", "", "platform https://p is too old"},
		{"dev", "0.2.0", "9.0.0", ""},
		{"1a2b3c4", "dev", "9.0.0", ""},
		{"v1.1.0-rc.1", "0.2.0", "1.1.0", "too old"},
	}
	for _, c := range cases {
		err := client.CheckVersions(&api.Info{Version: c.server, MinCLIVersion: c.minCLI, APIServer: "x"}, c.cli, "https://p")
		if (err == nil) != (c.want == "") || err != nil && !strings.Contains(err.Error(), c.want) {
			t.Errorf("CheckVersions(cli %s, server %s, min %s) = %v, want %q", c.cli, c.server, c.minCLI, err, c.want)
		}
	}
}

func TestTokenID(t *testing.T) {
	if id, ok := client.TokenID("dvt_0123456789abcdef_abc_def-ghi"); !ok || id != "0123456789abcdef" {
		t.Fatalf("TokenID = %q, %v", id, ok)
	}
	for _, bad := range []string{"", "dvt_", "dvt_0123_x", "xyz_0123456789abcdef_x", "dvt_0123456789ABCDEF_x", "dvt_0123456789abcdef_"} {
		if _, ok := client.TokenID(bad); ok {
			t.Errorf("TokenID(%q) accepted", bad)
		}
	}
}

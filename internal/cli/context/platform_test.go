package contextcmd

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/devtool/devtool/internal/buildinfo"
	"github.com/devtool/devtool/internal/errs"
	"github.com/devtool/devtool/internal/platform/client/clienttest"
)

func (h *harness) setenv(k, v string) {
	old := h.f.Getenv
	h.f.Getenv = func(key string) string {
		if key == k {
			return v
		}
		return old(key)
	}
}

func TestPlatformLoginWithToken(t *testing.T) {
	f := clienttest.New(t)
	alice := f.AddUser("alice", false)
	h := newHarness(t)
	ca := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(ca, f.CAPEM, 0o600); err != nil {
		t.Fatal(err)
	}

	if err := h.run(t, "use", f.URL(), "--token", alice, "--ca-cert", ca); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(h.errOut.String(), "Logged in to "+f.URL()+" as alice; using namespace alice.") {
		t.Errorf("output: %q", h.errOut.String())
	}
	cfg := h.store(t)
	c := cfg.Contexts[f.URL()]
	if cfg.CurrentContext != f.URL() || c == nil || !c.IsDevtool || c.Token != alice || c.Username != "alice" ||
		c.Namespace != "alice" || c.Registry != "registry.example:5000" || c.ClusterDomain != "apps.example" ||
		c.Certificate != string(f.CAPEM) || c.KubeContext != "" {
		t.Fatalf("saved context: %+v", c)
	}
	// /info once, /me once.
	if got := strings.Join(f.Requests, ","); got != "GET /api/v1/info,GET /api/v1/me" {
		t.Errorf("requests: %s", got)
	}

	if err := h.run(t, "show"); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(h.out.String(), alice) || strings.Contains(h.out.String(), "dvt_") {
		t.Fatalf("token printed: %s", h.out.String())
	}
	var rec Record
	if err := json.Unmarshal(h.out.Bytes(), &rec); err != nil || rec.Token != Redacted || !rec.IsDevtool || rec.Namespace != "alice" {
		t.Fatalf("show: %+v %v", rec, err)
	}

	// Selecting it again (no --token) checks the saved token; once revoked: exit 4 with a hint.
	if err := h.run(t, "use", f.URL()); err != nil {
		t.Fatal(err)
	}
	f.Revoke(alice)
	err := h.run(t, "use", f.URL())
	if errs.ExitCode(err) != errs.ExitAuth || !strings.Contains(errs.Hint(err), "--token") {
		t.Fatalf("revoked token: %v (exit %d)", err, errs.ExitCode(err))
	}
}

func TestPlatformLoginRefusals(t *testing.T) {
	f := clienttest.New(t)
	alice := f.AddUser("alice", false)
	h := newHarness(t)
	h.setenv("CI", "true")

	// No token: no browser, an auth error saying what to do.
	err := h.run(t, f.URL())
	var ae *errs.AuthError
	if !errors.As(err, &ae) || !strings.Contains(err.Error(), "no browser") || !strings.Contains(errs.Hint(err), "DEVTOOL_TOKEN") {
		t.Fatalf("no token: %v / %s", err, errs.Hint(err))
	}
	// An unknown CA without a terminal: refused, with the way out; nothing saved.
	err = h.run(t, f.URL(), "--token", alice)
	if err == nil || !strings.Contains(err.Error(), "no terminal to confirm") || !strings.Contains(errs.Hint(err), "--ca-cert") {
		t.Fatalf("untrusted CA: %v / %s", err, errs.Hint(err))
	}
	if len(h.store(t).Contexts) != 0 {
		t.Fatal("a context was saved")
	}
	// A CLI too old for the server.
	old := buildinfo.Version
	buildinfo.Version = "v0.0.1"
	t.Cleanup(func() { buildinfo.Version = old })
	f.Info.MinCLIVersion = "1.0.0"
	ca := filepath.Join(t.TempDir(), "ca.crt")
	_ = os.WriteFile(ca, f.CAPEM, 0o600)
	h.setenv("DEVTOOL_CA_CERT", ca)
	err = h.run(t, f.URL(), "--token", alice)
	if err == nil || !strings.Contains(err.Error(), "this devtool (v0.0.1) is too old for the platform") {
		t.Fatalf("old CLI: %v", err)
	}
	f.Info.MinCLIVersion = ""
	f.Info.Version = "0.0.5"
	err = h.run(t, f.URL(), "--token", alice)
	if err == nil || !strings.Contains(err.Error(), "is too old (version 0.0.5)") {
		t.Fatalf("old server: %v", err)
	}
}

func TestPlatformLoginConfirmsFingerprintOnATerminal(t *testing.T) {
	f := clienttest.New(t)
	alice := f.AddUser("alice", false)
	h := newHarness(t)
	h.f.IOStreams.SetTTY(true)

	h.in.WriteString("2\n") // no
	err := h.run(t, f.URL(), "--token", alice)
	if err == nil || !strings.Contains(err.Error(), "not trusted; nothing was saved") || !strings.Contains(h.errOut.String(), "SHA-256: ") {
		t.Fatalf("refused: %v\n%s", err, h.errOut.String())
	}
	h.in.WriteString("1\n") // yes
	if err := h.run(t, f.URL(), "--token", alice, "-n", "team"); err != nil {
		t.Fatal(err)
	}
	c := h.store(t).Contexts[f.URL()]
	if c == nil || c.Certificate != string(f.CAPEM) || c.Namespace != "team" {
		t.Fatalf("saved: %+v", c)
	}
}

func TestShowWithCIVariablesAndNoSavedContext(t *testing.T) {
	h := newHarness(t)
	h.setenv("DEVTOOL_URL", "https://Platform.Example/")
	h.setenv("DEVTOOL_TOKEN", "dvt_0123456789abcdef_secret")
	h.setenv("DEVTOOL_NAMESPACE", "ci-42")
	if err := h.run(t, "show"); err != nil {
		t.Fatal(err)
	}
	var rec Record
	if err := json.Unmarshal(h.out.Bytes(), &rec); err != nil {
		t.Fatal(err)
	}
	if rec.Name != "https://platform.example" || rec.Token != Redacted || !rec.IsDevtool || rec.Namespace != "ci-42" ||
		strings.Contains(h.out.String(), "secret") {
		t.Fatalf("show: %s", h.out.String())
	}
	if len(h.store(t).Contexts) != 0 {
		t.Fatal("the CI variables saved a context")
	}
}

package namespace

import (
	"bytes"
	"strings"
	"testing"

	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"

	"github.com/devtool/devtool/internal/cmdutil"
	"github.com/devtool/devtool/internal/contexts"
	"github.com/devtool/devtool/internal/errs"
	"github.com/devtool/devtool/internal/kube"
	"github.com/devtool/devtool/internal/platform/client/clienttest"
)

// platformFactory saves a platform context of the fake for user alice and selects it.
func platformFactory(t *testing.T, f *clienttest.Fake, token string) (*cmdutil.Factory, *bytes.Buffer, *bytes.Buffer, string) {
	t.Helper()
	fac, errOut, home := newFactory(t)
	out := fac.IOStreams.Out.(*bytes.Buffer)
	c := &contexts.Context{Name: f.URL(), Token: token, Certificate: string(f.CAPEM), Username: "alice", Namespace: "alice"}
	if err := contexts.SavePlatform(contexts.NewStore(home), c); err != nil {
		t.Fatal(err)
	}
	fac.WorkDir = t.TempDir()
	// delete destroys environments through the Target: an empty namespace (no state records) here.
	fac.Target = func(k cmdutil.KubeFlags) (*cmdutil.Target, error) {
		return &cmdutil.Target{Kube: &kube.Client{Config: &rest.Config{}, Clientset: fake.NewSimpleClientset(), Namespace: k.Namespace},
			Namespace: k.Namespace, ContextName: f.URL(), IsPlatform: true}, nil
	}
	return fac, out, errOut, home
}

func TestPlatformNamespaceCommands(t *testing.T) {
	f := clienttest.New(t)
	alice := f.AddUser("alice", false)
	f.AddUser("bob", false)
	fac, out, errOut, home := platformFactory(t, f, alice)
	current := func() string {
		cfg, _ := contexts.NewStore(home).Load()
		return cfg.Current().Namespace
	}

	if err := execute(fac, "create", "shop"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(errOut.String(), "Namespace shop created.") || current() != "shop" {
		t.Fatalf("create: %q, current %s", errOut.String(), current())
	}
	errOut.Reset()
	if err := execute(fac, "create", "shop"); err != nil || !strings.Contains(errOut.String(), "already exists and is yours") {
		t.Fatalf("create again: %v %q", err, errOut.String())
	}
	if err := execute(fac, "list"); err != nil {
		t.Fatal(err)
	}
	if want := "Namespace  Status\nalice      Active\nshop *     Active\n"; out.String() != want {
		t.Fatalf("list:\n%s\nwant:\n%s", out.String(), want)
	}
	if err := execute(fac, "share", "shop", "bob", "--role", "editor"); err != nil {
		t.Fatal(err)
	}
	if m := f.Namespace("shop").Members; len(m) != 2 || m[1].User != "bob" || m[1].Role != "editor" {
		t.Fatalf("members: %+v", m)
	}
	if err := execute(fac, "unshare", "shop", "bob"); err != nil {
		t.Fatal(err)
	}
	if m := f.Namespace("shop").Members; len(m) != 1 {
		t.Fatalf("members after unshare: %+v", m)
	}
	// bob's namespace: 404 from the platform, said plainly.
	if err := execute(fac, "delete", "bob"); err == nil || !strings.Contains(err.Error(), "does not exist or you are not a member") {
		t.Fatalf("delete bob's: %v", err)
	}
	if err := execute(fac, "use", "bob"); err == nil || !strings.Contains(err.Error(), "does not exist or you are not a member") {
		t.Fatalf("use bob's: %v", err)
	}
	errOut.Reset()
	if err := execute(fac, "delete", "shop"); err != nil {
		t.Fatal(err)
	}
	if f.Namespace("shop") != nil || current() != "alice" || !strings.Contains(errOut.String(), "Namespace shop is being deleted.") {
		t.Fatalf("after delete: %q, current %s", errOut.String(), current())
	}
	if err := execute(fac, "use", "alice"); err != nil {
		t.Fatal(err)
	}
	// Bad input.
	if err := execute(fac, "share", "shop", "bob", "--role", "admin"); errs.ExitCode(err) != errs.ExitUsage {
		t.Errorf("bad role: %v", err)
	}
	if err := execute(fac, "share", "shop"); errs.ExitCode(err) != errs.ExitUsage {
		t.Errorf("missing user: %v", err)
	}
	// A revoked token: exit 4.
	f.Revoke(alice)
	if err := execute(fac, "list"); errs.ExitCode(err) != errs.ExitAuth {
		t.Errorf("revoked: %v", err)
	}
}

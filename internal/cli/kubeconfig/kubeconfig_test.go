package kubeconfig

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	clientauthv1 "k8s.io/client-go/pkg/apis/clientauthentication/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/devtool/devtool/internal/cmdutil"
	"github.com/devtool/devtool/internal/contexts"
	"github.com/devtool/devtool/internal/errs"
	"github.com/devtool/devtool/internal/iostreams"
	"github.com/devtool/devtool/internal/platform/client/clienttest"
)

func execute(cmd *cobra.Command, args ...string) error {
	cmd.SetArgs(args)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	return cmd.ExecuteContext(context.Background())
}

func TestKubeconfigMergesAndKubetokenPrintsACredential(t *testing.T) {
	f := clienttest.New(t)
	alice := f.AddUser("alice", false)
	dir := t.TempDir()
	home := filepath.Join(dir, "home")
	first, second := filepath.Join(dir, "first"), filepath.Join(dir, "second")
	// The first file has entries of its own, with a relative path that must stay relative.
	own := clientcmdapi.NewConfig()
	own.Clusters["mine"] = &clientcmdapi.Cluster{Server: "https://10.0.0.1:6443", CertificateAuthority: "ca/mine.crt"}
	own.AuthInfos["me"] = &clientcmdapi.AuthInfo{Token: "keep-me"}
	own.Contexts["mine"] = &clientcmdapi.Context{Cluster: "mine", AuthInfo: "me"}
	own.CurrentContext = "mine"
	if err := clientcmd.WriteToFile(*own, first); err != nil {
		t.Fatal(err)
	}
	secondBefore := "apiVersion: v1\nkind: Config\nclusters: []\n# untouched\n"
	if err := os.WriteFile(second, []byte(secondBefore), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"DEVTOOL_HOME": home, "KUBECONFIG": first + string(os.PathListSeparator) + second}
	if err := contexts.SavePlatform(contexts.NewStore(home), &contexts.Context{Name: f.URL(), Token: alice,
		Certificate: string(f.CAPEM), Username: "alice", Namespace: "shop"}); err != nil {
		t.Fatal(err)
	}
	ios, _, out, errOut := iostreams.Test()
	fac := &cmdutil.Factory{IOStreams: ios, Getenv: func(k string) string { return env[k] }}
	cmd := NewCmd(fac, nil)
	if err := execute(cmd); err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.LoadFromFile(first)
	if err != nil {
		t.Fatal(err)
	}
	name := entryName(f.URL(), "alice")
	if cfg.CurrentContext != name || cfg.Contexts[name].Namespace != "shop" || cfg.Clusters[name].Server != f.Info.APIServer ||
		string(cfg.Clusters[name].CertificateAuthorityData) != f.Info.APIServerCA {
		t.Fatalf("written: current %s, %+v %+v", cfg.CurrentContext, cfg.Contexts[name], cfg.Clusters[name])
	}
	ex := cfg.AuthInfos[name].Exec
	if ex == nil || ex.APIVersion != "client.authentication.k8s.io/v1" || !filepath.IsAbs(ex.Command) ||
		strings.Join(ex.Args, " ") != "kubetoken --context "+f.URL() || len(ex.Env) != 1 || ex.Env[0].Value != home {
		t.Fatalf("exec: %+v", ex)
	}
	if cfg.AuthInfos["me"].Token != "keep-me" || cfg.Clusters["mine"].CertificateAuthority != "ca/mine.crt" {
		t.Fatalf("own entries changed: %+v %+v", cfg.AuthInfos["me"], cfg.Clusters["mine"])
	}
	if b, _ := os.ReadFile(second); string(b) != secondBefore {
		t.Fatalf("second file changed:\n%s", b)
	}
	if fi, _ := os.Stat(first); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v", fi.Mode())
	}
	if !strings.Contains(errOut.String(), "Wrote context "+name) {
		t.Errorf("output %q", errOut.String())
	}

	// The plugin: an ExecCredential whose expiry is the renewal point (80% of the token's hour).
	start := time.Now()
	if err := execute(NewTokenCmd(fac, nil), "--context", f.URL()); err != nil {
		t.Fatal(err)
	}
	var cred clientauthv1.ExecCredential
	if err := json.Unmarshal(out.Bytes(), &cred); err != nil || cred.Kind != "ExecCredential" || cred.APIVersion != "client.authentication.k8s.io/v1" {
		t.Fatalf("credential: %s %v", out.String(), err)
	}
	if cred.Status.Token != "kube-alice-1" {
		t.Fatalf("token %q", cred.Status.Token)
	}
	if exp := cred.Status.ExpirationTimestamp.Time; exp.Before(start.Add(47*time.Minute)) || exp.After(start.Add(49*time.Minute)) {
		t.Errorf("expiry %v, want ~48 minutes from now", exp)
	}
	out.Reset()
	if err := execute(NewTokenCmd(fac, nil), "--context", f.URL()); err != nil || !strings.Contains(out.String(), "kube-alice-1") || f.KubeTokens != 1 {
		t.Fatalf("second call not from the cache: %v %s (issued %d)", err, out.String(), f.KubeTokens)
	}

	// A revoked API token: kubeconfig checks it first and fails with exit 4, writing nothing.
	f.Revoke(alice)
	if err := execute(NewCmd(fac, nil)); errs.ExitCode(err) != errs.ExitAuth {
		t.Fatalf("kubeconfig with a revoked token: %v", err)
	}
}

func TestKubeconfigNeedsAPlatformContext(t *testing.T) {
	dir := t.TempDir()
	kc := filepath.Join(dir, "kubeconfig")
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["c"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:1"}
	cfg.Contexts["k"] = &clientcmdapi.Context{Cluster: "c"}
	cfg.CurrentContext = "k"
	_ = clientcmd.WriteToFile(*cfg, kc)
	env := map[string]string{"DEVTOOL_HOME": dir, "KUBECONFIG": kc}
	ios, _, _, _ := iostreams.Test()
	fac := &cmdutil.Factory{IOStreams: ios, Getenv: func(k string) string { return env[k] }}
	if err := execute(NewCmd(fac, nil)); err == nil || !strings.Contains(err.Error(), "needs a platform context") {
		t.Fatalf("err = %v", err)
	}
	if err := execute(NewTokenCmd(fac, nil)); errs.ExitCode(err) != errs.ExitUsage {
		t.Fatalf("kubetoken without --context: %v", err)
	}
}

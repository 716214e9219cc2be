package contextcmd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/devtool/devtool/internal/cmdutil"
	"github.com/devtool/devtool/internal/contexts"
	"github.com/devtool/devtool/internal/iostreams"
)

type harness struct {
	f                *cmdutil.Factory
	in, out, errOut  *bytes.Buffer
	home, kubeconfig string
}

// newHarness writes a kubeconfig with contexts kube-a (namespace ns-a, current) and kube-b (none),
// and points DEVTOOL_HOME at a temp folder.
func newHarness(t *testing.T) *harness {
	t.Helper()
	dir := t.TempDir()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["local"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:6443"}
	cfg.AuthInfos["me"] = &clientcmdapi.AuthInfo{Token: "kube-token"}
	cfg.Contexts["kube-a"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: "me", Namespace: "ns-a"}
	cfg.Contexts["kube-b"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: "me"}
	cfg.CurrentContext = "kube-a"
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, kubeconfig); err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(dir, "home")
	env := map[string]string{"DEVTOOL_HOME": home, "KUBECONFIG": kubeconfig}
	ios, in, out, errOut := iostreams.Test()
	getenv := func(k string) string { return env[k] }
	f := &cmdutil.Factory{IOStreams: ios, Getenv: getenv, Target: cmdutil.TargetFunc(&contexts.Resolver{Getenv: getenv})}
	return &harness{f: f, in: in, out: out, errOut: errOut, home: home, kubeconfig: kubeconfig}
}

func (h *harness) run(t *testing.T, args ...string) error {
	t.Helper()
	h.out.Reset()
	h.errOut.Reset()
	cmd := NewCmd(h.f, nil)
	cmd.SetArgs(args)
	cmd.SetOut(h.out)
	cmd.SetErr(h.errOut)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &cmdutil.FlagError{Err: err} })
	return cmd.ExecuteContext(context.Background())
}

func (h *harness) store(t *testing.T) *contexts.Config {
	t.Helper()
	cfg, err := contexts.NewStore(h.home).Load()
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func TestUseListShowDelete(t *testing.T) {
	h := newHarness(t)
	kubeBefore, _ := os.ReadFile(h.kubeconfig)

	if err := h.run(t, "use", "kube-b"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(h.errOut.String(), "context kube-b (namespace default)") {
		t.Errorf("use output: %q", h.errOut.String())
	}
	if err := h.run(t, "kube-a", "--namespace", "web", "--builder", "tcp://127.0.0.1:1234"); err != nil {
		t.Fatal(err)
	}
	if cfg := h.store(t); cfg.CurrentContext != "kube-a" || cfg.Contexts["kube-a"].Namespace != "web" {
		t.Errorf("store after 'context kube-a --namespace web': %+v", cfg)
	}

	if err := h.run(t, "list"); err != nil {
		t.Fatal(err)
	}
	want := "Name      Namespace  Builder               Registry\n" +
		"kube-a *  web        tcp://127.0.0.1:1234  -\n" +
		"kube-b    default    -                     -\n"
	if h.out.String() != want {
		t.Errorf("list:\n%s\nwant:\n%s", h.out.String(), want)
	}

	if err := h.run(t, "show"); err != nil {
		t.Fatal(err)
	}
	var rec map[string]any
	if err := json.Unmarshal(h.out.Bytes(), &rec); err != nil {
		t.Fatalf("show is not JSON: %v\n%s", err, h.out.String())
	}
	if rec["name"] != "kube-a" || rec["namespace"] != "web" || rec["registry"] != "-" || rec["isDevtool"] != false {
		t.Errorf("show: %v", rec)
	}
	if err := h.run(t, "show", "--context", "kube-b", "-n", "other"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(h.out.String(), `"name": "kube-b"`) || !strings.Contains(h.out.String(), `"namespace": "other"`) {
		t.Errorf("show with flags: %s", h.out.String())
	}

	if err := h.run(t, "delete", "kube-a"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(h.errOut.String(), "commands now use the kubeconfig's current context kube-a (namespace ns-a)") {
		t.Errorf("delete of the current context must say what is current: %q", h.errOut.String())
	}
	if err := h.run(t, "delete", "kube-a"); err == nil || !strings.Contains(err.Error(), "kube-b") {
		t.Errorf("deleting a missing context: %v", err)
	}
	if after, _ := os.ReadFile(h.kubeconfig); !bytes.Equal(after, kubeBefore) {
		t.Error("the kubeconfig was modified")
	}
}

func TestShowRedactsToken(t *testing.T) {
	h := newHarness(t)
	err := contexts.NewStore(h.home).Update(func(c *contexts.Config) error {
		c.Contexts["https://p.example"] = &contexts.Context{Name: "https://p.example", Token: "s3cr3t-t0ken", IsDevtool: true, Namespace: "alice", KubeContext: "kube-a"}
		c.CurrentContext = "https://p.example"
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.run(t, "show"); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(h.out.String()+h.errOut.String(), "s3cr3t") {
		t.Fatalf("token printed: %s", h.out.String())
	}
	if !strings.Contains(h.out.String(), `"token": "redacted"`) || !strings.Contains(h.out.String(), `"isDevtool": true`) {
		t.Errorf("show: %s", h.out.String())
	}
}

func TestNoTerminalNeedsName(t *testing.T) {
	h := newHarness(t)
	for _, args := range [][]string{{}, {"use"}} {
		err := h.run(t, args...)
		var fe *cmdutil.FlagError
		if !errors.As(err, &fe) || !strings.Contains(err.Error(), "no terminal") || !strings.Contains(err.Error(), "<kubernetes_context_name>") {
			t.Errorf("%v: want a flag error naming the argument, got %v", args, err)
		}
	}
}

func TestPrompt(t *testing.T) {
	h := newHarness(t)
	h.f.IOStreams.SetTTY(true)
	if err := h.run(t, "use", "kube-b"); err != nil {
		t.Fatal(err)
	}
	// Listed: kube-b (current, devtool context), then kube-a (Kubernetes context). Choose 2.
	h.in.WriteString("2\n")
	if err := h.run(t); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(h.errOut.String(), "1) kube-b (current)") || !strings.Contains(h.errOut.String(), "2) kube-a (Kubernetes context)") {
		t.Errorf("prompt: %q", h.errOut.String())
	}
	if cfg := h.store(t); cfg.CurrentContext != "kube-a" {
		t.Errorf("current = %q after choosing kube-a", cfg.CurrentContext)
	}
	// An empty answer keeps the current one.
	h.in.WriteString("\n")
	if err := h.run(t, "use"); err != nil {
		t.Fatal(err)
	}
	if cfg := h.store(t); cfg.CurrentContext != "kube-a" {
		t.Errorf("current = %q after the default answer", cfg.CurrentContext)
	}
}

func TestBadInput(t *testing.T) {
	h := newHarness(t)
	cases := []struct {
		args []string
		want string
		flag bool
	}{
		{[]string{"use", "https://platform.example"}, "needs a token: there is no terminal", false},
		{[]string{"http://platform.example", "--token", "abc"}, "must start with https://", true},
		{[]string{"--token", "abc"}, "--token needs the platform URL", true},
		{[]string{"kube-a", "--ca-cert", "x"}, "--ca-cert is for platform URLs", true},
		{[]string{"kube-a", "--token", "abc"}, "--token is for platform URLs", true},
		{[]string{"use", "nope"}, `"nope" not found`, false},
		{[]string{"kube-a", "--namespace", "Not_Valid"}, "--namespace", true},
		{[]string{"kube-a", "--builder", "ftp://x"}, "--builder", true},
		{[]string{"delete"}, "give the name", true},
		{[]string{"use", "a", "b"}, "accepts at most 1 arg", false},
		{[]string{"use", "https://platform.example", "--password-stdin"}, "--password-stdin needs --user", true},
		{[]string{"use", "https://platform.example", "--user", "a", "--token", "t"}, "one way to log in", true},
		{[]string{"use", "https://platform.example", "--device", "--token", "t"}, "one way to log in", true},
		{[]string{"use", "kube-a", "--user", "a"}, "--user is for platform URLs", true},
		{[]string{"use", "kube-a", "--device"}, "--device is for platform URLs", true},
		{[]string{"use", "https://platform.example", "--password", "x"}, "unknown flag: --password", true},
	}
	for _, tc := range cases {
		err := h.run(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: want an error with %q, got %v", tc.args, tc.want, err)
			continue
		}
		var fe *cmdutil.FlagError
		if tc.flag && !errors.As(err, &fe) {
			t.Errorf("%v: want a flag error, got %T", tc.args, err)
		}
	}
	writeCorrupt(t, contexts.NewStore(h.home).Path())
	for _, args := range [][]string{{"list"}, {"show"}, {"use", "kube-a"}, {"delete", "x"}} {
		if err := h.run(t, args...); err == nil || !strings.Contains(err.Error(), "config.json is corrupt") {
			t.Errorf("%v on a corrupt store: %v", args, err)
		}
	}
}

func writeCorrupt(t *testing.T, path string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestCompletion(t *testing.T) {
	h := newHarness(t)
	if err := h.run(t, "use", "kube-b"); err != nil {
		t.Fatal(err)
	}
	if err := h.run(t, "__complete", "use", ""); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(h.out.String(), "kube-b\nkube-a\n") {
		t.Errorf("use completes devtool contexts, then kubeconfig contexts: %q", h.out.String())
	}
	if err := h.run(t, "__complete", "delete", ""); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(h.out.String(), "kube-b\n:") {
		t.Errorf("delete completes devtool contexts only: %q", h.out.String())
	}
}

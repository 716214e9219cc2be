package contexts

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/devtool/devtool/internal/errs"
)

// writeKubeconfig writes a kubeconfig with the given contexts (name -> namespace), all on one fake
// loopback server, and returns its path.
func writeKubeconfig(t *testing.T, dir, current string, contexts map[string]string) string {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["local"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:6443"}
	cfg.AuthInfos["me"] = &clientcmdapi.AuthInfo{Token: "kube-token"}
	for name, ns := range contexts {
		cfg.Contexts[name] = &clientcmdapi.Context{Cluster: "local", AuthInfo: "me", Namespace: ns}
	}
	cfg.CurrentContext = current
	path := filepath.Join(dir, "kubeconfig-"+current)
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

func envMap(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestResolvePrecedence(t *testing.T) {
	dir := t.TempDir()
	kubeconfig := writeKubeconfig(t, dir, "kube-a", map[string]string{"kube-a": "ns-a", "kube-b": "ns-b", "kube-nons": ""})

	type store struct {
		current  string
		contexts []*Context
	}
	stored := []*Context{
		{Name: "kube-b", Namespace: "dev-b", Registry: "reg-b:5000", Builder: "tcp://bk-b:1234", ClusterDomain: "b.example"},
		{Name: "kube-a", Namespace: "dev-a"},
		{Name: "alias", KubeContext: "kube-a", Namespace: "dev-alias"},
	}
	env := map[string]string{"DEVTOOL_REGISTRY": "env-reg:5000", "DEVTOOL_CLUSTER_DOMAIN": "env.example", "DEVTOOL_BUILDER": "docker"}
	cases := []struct {
		name                             string
		store                            store
		flags                            Flags
		wantCtx, wantKube, wantNS        string
		wantReg, wantDomain, wantBuilder string
	}{
		{name: "kubeconfig only", wantCtx: "kube-a", wantKube: "kube-a", wantNS: "ns-a",
			wantReg: "env-reg:5000", wantDomain: "env.example", wantBuilder: "docker"},
		{name: "kubeconfig context without namespace is default", flags: Flags{Context: "kube-nons"},
			wantCtx: "kube-nons", wantKube: "kube-nons", wantNS: "default", wantReg: "env-reg:5000", wantDomain: "env.example", wantBuilder: "docker"},
		{name: "namespace flag over kubeconfig", flags: Flags{Namespace: "flag-ns"},
			wantCtx: "kube-a", wantKube: "kube-a", wantNS: "flag-ns", wantReg: "env-reg:5000", wantDomain: "env.example", wantBuilder: "docker"},
		{name: "current devtool context over kubeconfig", store: store{"kube-b", stored},
			wantCtx: "kube-b", wantKube: "kube-b", wantNS: "dev-b", wantReg: "reg-b:5000", wantDomain: "b.example", wantBuilder: "tcp://bk-b:1234"},
		{name: "devtool context without registry falls back to env", store: store{"kube-a", stored},
			wantCtx: "kube-a", wantKube: "kube-a", wantNS: "dev-a", wantReg: "env-reg:5000", wantDomain: "env.example", wantBuilder: "docker"},
		{name: "context flag names a devtool context", store: store{"kube-a", stored}, flags: Flags{Context: "kube-b"},
			wantCtx: "kube-b", wantKube: "kube-b", wantNS: "dev-b", wantReg: "reg-b:5000", wantDomain: "b.example", wantBuilder: "tcp://bk-b:1234"},
		{name: "both flags", store: store{"kube-a", stored}, flags: Flags{Context: "kube-b", Namespace: "x"},
			wantCtx: "kube-b", wantKube: "kube-b", wantNS: "x", wantReg: "reg-b:5000", wantDomain: "b.example", wantBuilder: "tcp://bk-b:1234"},
		{name: "context flag names a kube context not in the store", store: store{"kube-b", stored[:1]}, flags: Flags{Context: "kube-a"},
			wantCtx: "kube-a", wantKube: "kube-a", wantNS: "ns-a", wantReg: "env-reg:5000", wantDomain: "env.example", wantBuilder: "docker"},
		{name: "devtool context with its own name for a kube context", store: store{"alias", stored},
			wantCtx: "alias", wantKube: "kube-a", wantNS: "dev-alias", wantReg: "env-reg:5000", wantDomain: "env.example", wantBuilder: "docker"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			home := t.TempDir()
			if len(tc.store.contexts) > 0 {
				err := NewStore(home).Update(func(c *Config) error {
					for _, sc := range tc.store.contexts {
						cp := *sc
						c.Contexts[sc.Name] = &cp
					}
					c.CurrentContext = tc.store.current
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
			}
			e := map[string]string{"KUBECONFIG": kubeconfig}
			for k, v := range env {
				e[k] = v
			}
			r := &Resolver{Home: home, Getenv: envMap(e)}
			tg, err := r.Resolve(tc.flags)
			if err != nil {
				t.Fatal(err)
			}
			got := []string{tg.ContextName, tg.KubeContext, tg.Namespace, tg.Kube.Namespace, tg.Registry, tg.ClusterDomain, tg.Builder}
			want := []string{tc.wantCtx, tc.wantKube, tc.wantNS, tc.wantNS, tc.wantReg, tc.wantDomain, tc.wantBuilder}
			if strings.Join(got, "|") != strings.Join(want, "|") {
				t.Errorf("context|kube|ns|client ns|registry|domain|builder:\n got %v\nwant %v", got, want)
			}
			if tg.Kube.Config.Host != "https://127.0.0.1:6443" || tg.Kube.Config.BearerToken != "kube-token" {
				t.Errorf("credentials not from the kubeconfig: host %q", tg.Kube.Config.Host)
			}
		})
	}
}

func TestResolveSeveralKubeconfigFiles(t *testing.T) {
	dir := t.TempDir()
	first := writeKubeconfig(t, dir, "one", map[string]string{"one": "ns-one"})
	second := writeKubeconfig(t, dir, "two", map[string]string{"two": "ns-two"})
	r := &Resolver{Home: t.TempDir(), Getenv: envMap(map[string]string{"KUBECONFIG": first + string(filepath.ListSeparator) + second})}
	tg, err := r.Resolve(Flags{Context: "two"})
	if err != nil {
		t.Fatal(err)
	}
	if tg.KubeContext != "two" || tg.Namespace != "ns-two" {
		t.Errorf("got %s/%s, want two/ns-two", tg.KubeContext, tg.Namespace)
	}
	tg, err = r.Resolve(Flags{})
	if err != nil || tg.KubeContext != "one" {
		t.Errorf("current-context of the first file wins: got %v, %v", tg, err)
	}
}

func TestResolvePlatformContext(t *testing.T) {
	dir := t.TempDir()
	kubeconfig := writeKubeconfig(t, dir, "kube-a", map[string]string{"kube-a": "ns-a"})
	home := t.TempDir()
	err := NewStore(home).Update(func(c *Config) error {
		c.Contexts["https://p.example"] = &Context{Name: "https://p.example", IsDevtool: true, Token: "tok", Namespace: "alice", KubeContext: "kube-a"}
		c.CurrentContext = "https://p.example"
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	tg, err := (&Resolver{Home: home, Getenv: envMap(map[string]string{"KUBECONFIG": kubeconfig})}).Resolve(Flags{})
	if err != nil {
		t.Fatal(err)
	}
	if !tg.IsPlatform || tg.Token != "tok" || tg.Namespace != "alice" || tg.ContextName != "https://p.example" {
		t.Errorf("platform target: %+v", tg)
	}
}

func TestResolveErrors(t *testing.T) {
	dir := t.TempDir()
	kubeconfig := writeKubeconfig(t, dir, "kube-a", map[string]string{"kube-a": "ns-a", "kube-b": ""})
	noCurrent := writeKubeconfig(t, dir, "", map[string]string{"kube-a": ""})
	cases := []struct {
		name       string
		kubeconfig string
		store      string // raw store content, "" for none
		flags      Flags
		want       []string
		flagErr    bool
	}{
		{name: "unknown context flag", kubeconfig: kubeconfig, flags: Flags{Context: "nope"},
			want: []string{`"nope"`, "kube-a, kube-b"}},
		{name: "platform URL flag", kubeconfig: kubeconfig, flags: Flags{Context: "https://x.example"},
			want: []string{"no devtool context for this platform", "devtool context use https://x.example --token", "DEVTOOL_URL"}},
		{name: "bad namespace flag", kubeconfig: kubeconfig, flags: Flags{Namespace: "Bad_NS"},
			want: []string{"--namespace", "Bad_NS"}, flagErr: true},
		{name: "no current context anywhere", kubeconfig: noCurrent, want: []string{"no current context", "kube-a"}},
		{name: "no kubeconfig at all", kubeconfig: filepath.Join(dir, "missing"), want: []string{"no current context"}},
		{name: "corrupt store", kubeconfig: kubeconfig, store: "{", want: []string{"config.json is corrupt"}},
		{name: "stored context lost from kubeconfig", kubeconfig: kubeconfig,
			store: `{"currentContext": "gone", "contexts": {"gone": {"name": "gone"}}}`, want: []string{`devtool context "gone" uses`, `"gone" not found`}},
		{name: "current context missing from store", kubeconfig: kubeconfig,
			store: `{"currentContext": "ghost", "contexts": {}}`, want: []string{`"ghost" is not in the context store`}},
		{name: "platform context without credentials", kubeconfig: kubeconfig,
			store: `{"currentContext": "https://p", "contexts": {"https://p": {"name": "https://p", "isDevtool": true}}}`,
			want:  []string{"no API token for the platform", "devtool context use https://p --token"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			home := t.TempDir()
			if tc.store != "" {
				writeFile(t, NewStore(home).Path(), tc.store)
			}
			_, err := (&Resolver{Home: home, Getenv: envMap(map[string]string{"KUBECONFIG": tc.kubeconfig})}).Resolve(tc.flags)
			if err == nil {
				t.Fatal("want an error")
			}
			msg := err.Error() + " / hint: " + errs.Hint(err)
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q lacks %q", msg, w)
				}
			}
			var fe *errs.FlagError
			if errors.As(err, &fe) != tc.flagErr {
				t.Errorf("flag error = %v, want %v", !tc.flagErr, tc.flagErr)
			}
		})
	}
}

func TestUseAndDelete(t *testing.T) {
	dir := t.TempDir()
	kubeconfig := writeKubeconfig(t, dir, "kube-a", map[string]string{"kube-a": "ns-a", "kube-b": ""})
	before := readFile(t, kubeconfig)
	kc, err := LoadKubeconfig(envMap(map[string]string{"KUBECONFIG": kubeconfig}))
	if err != nil {
		t.Fatal(err)
	}
	s := NewStore(t.TempDir())
	res, err := Use(s, kc, UseOptions{Name: "kube-b"})
	if err != nil || !res.Created || res.Context.Namespace != "default" {
		t.Fatalf("use kube-b: %+v %v", res, err)
	}
	res, err = Use(s, kc, UseOptions{Name: "kube-a", Builder: "tcp://bk:1"})
	if err != nil || res.Context.Namespace != "ns-a" || res.Context.Builder != "tcp://bk:1" {
		t.Fatalf("use kube-a: %+v %v", res, err)
	}
	res, err = Use(s, kc, UseOptions{Name: "kube-b", Namespace: "other"})
	if err != nil || res.Created || res.Context.Namespace != "other" {
		t.Fatalf("use kube-b again: %+v %v", res, err)
	}
	if _, err := Use(s, kc, UseOptions{Name: "https://platform.example"}); !errors.Is(err, ErrNoPlatformCredentials) {
		t.Errorf("platform URL: %v", err)
	}
	if _, err := Use(s, kc, UseOptions{Name: "missing"}); err == nil || !strings.Contains(err.Error(), "kube-a, kube-b") {
		t.Errorf("missing context: %v", err)
	}
	if _, err := Use(s, kc, UseOptions{Name: "kube-a", Namespace: "NOT VALID"}); err == nil {
		t.Error("invalid namespace accepted")
	}
	cfg, _ := s.Load()
	if cfg.CurrentContext != "kube-b" {
		t.Errorf("current = %q, want kube-b", cfg.CurrentContext)
	}
	if was, err := Delete(s, "kube-a"); err != nil || was {
		t.Errorf("delete kube-a: %v %v", was, err)
	}
	if was, err := Delete(s, "kube-b"); err != nil || !was {
		t.Errorf("delete current kube-b: %v %v", was, err)
	}
	if _, err := Delete(s, "kube-b"); err == nil {
		t.Error("deleting a missing context succeeded")
	}
	if readFile(t, kubeconfig) != before {
		t.Error("the kubeconfig was rewritten")
	}
}

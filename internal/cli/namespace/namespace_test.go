package namespace

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/devtool/devtool/internal/cmdutil"
	"github.com/devtool/devtool/internal/contexts"
	"github.com/devtool/devtool/internal/iostreams"
)

func TestCheckReachable(t *testing.T) {
	forbid := func(resource string) k8stesting.ReactionFunc {
		return func(a k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: resource}, "", errors.New("no"))
		}
	}
	existing := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "web"}}
	cases := []struct {
		name    string
		setup   func(*fake.Clientset)
		ns      string
		wantErr string
	}{
		{name: "exists", ns: "web"},
		{name: "missing", ns: "nope", wantErr: `namespace "nope" does not exist`},
		{name: "get forbidden, pods allowed", ns: "web", setup: func(c *fake.Clientset) {
			c.PrependReactor("get", "namespaces", forbid("namespaces"))
		}},
		{name: "nothing allowed", ns: "web", wantErr: "not reachable", setup: func(c *fake.Clientset) {
			c.PrependReactor("get", "namespaces", forbid("namespaces"))
			c.PrependReactor("list", "pods", forbid("pods"))
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cs := fake.NewSimpleClientset(existing)
			if tc.setup != nil {
				tc.setup(cs)
			}
			err := CheckReachable(context.Background(), cs, tc.ns)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("got %v, want %q", err, tc.wantErr)
			}
		})
	}
}

func newFactory(t *testing.T) (*cmdutil.Factory, *bytes.Buffer, string) {
	t.Helper()
	dir := t.TempDir()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["local"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:1"}
	cfg.AuthInfos["me"] = &clientcmdapi.AuthInfo{Token: "t"}
	cfg.Contexts["kube-a"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: "me"}
	cfg.CurrentContext = "kube-a"
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, kubeconfig); err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(dir, "home")
	env := map[string]string{"KUBECONFIG": kubeconfig, "DEVTOOL_HOME": home}
	ios, _, _, errOut := iostreams.Test()
	return &cmdutil.Factory{IOStreams: ios, Getenv: func(k string) string { return env[k] }}, errOut, home
}

func execute(f *cmdutil.Factory, args ...string) error {
	cmd := NewCmd(f, nil)
	cmd.SetArgs(args)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	return cmd.ExecuteContext(context.Background())
}

func TestPlatformOnlyCommands(t *testing.T) {
	f, _, home := newFactory(t)
	for _, args := range [][]string{{"create", "x"}, {"delete", "x"}, {"list"}} {
		err := execute(f, args...)
		if !errors.Is(err, ErrPlatformOnly) || !strings.Contains(err.Error(), "only available on clusters with the platform installed") {
			t.Errorf("%v on a Kubernetes context: %v", args, err)
		}
	}
	// On a platform context they get past the check (and here fail to reach it).
	err := contexts.NewStore(home).Update(func(c *contexts.Config) error {
		c.Contexts["https://p.invalid"] = &contexts.Context{Name: "https://p.invalid", IsDevtool: true}
		c.CurrentContext = "https://p.invalid"
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := execute(f, "list"); err == nil || errors.Is(err, ErrPlatformOnly) || !strings.Contains(err.Error(), "platform https://p.invalid") {
		t.Errorf("list on a platform context: %v", err)
	}
	if err := execute(f, "list", "--context", "kube-a"); !errors.Is(err, ErrPlatformOnly) {
		t.Errorf("list --context kube-a: %v", err)
	}
}

func TestBadInput(t *testing.T) {
	f, _, _ := newFactory(t)
	cases := []struct {
		args []string
		want string
	}{
		{nil, "no terminal to choose a namespace"},
		{[]string{"use"}, "give the namespace"},
		{[]string{"use", "Bad_Name"}, "not a valid namespace name"},
		{[]string{"create"}, "give the namespace"},
		{[]string{"list", "extra"}, "takes no arguments"},
		{[]string{"use", "web", "--context", "nope"}, `"nope"`},
	}
	for _, tc := range cases {
		err := execute(f, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: want %q, got %v", tc.args, tc.want, err)
		}
	}
}

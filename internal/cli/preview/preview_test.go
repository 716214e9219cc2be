package preview

import (
	"context"
	"strings"
	"testing"

	"github.com/devtool/devtool/internal/cmdutil"
	"github.com/devtool/devtool/internal/errs"
	"github.com/devtool/devtool/internal/iostreams"
	"github.com/devtool/devtool/internal/platform/store"
)

func TestGenerateName(t *testing.T) {
	for _, c := range []struct{ repo, branch, want string }{
		{"https://github.com/acme/shop.git", "main", "shop-main"},
		{"https://github.com/acme/Shop", "feature/Login_Page", "shop-feature-login-page"},
		{"https://github.com/acme/devtool", "main", "preview-devtool-main"},
		{"https://github.com/acme/kube-thing", "x", "preview-kube-thing-x"},
	} {
		if got := GenerateName(c.repo, c.branch); got != c.want {
			t.Errorf("%s %s: %q, want %q", c.repo, c.branch, got, c.want)
		}
	}
	long := GenerateName("https://github.com/acme/"+strings.Repeat("r", 50), "feature/"+strings.Repeat("b", 40))
	other := GenerateName("https://github.com/acme/"+strings.Repeat("r", 50), "feature/"+strings.Repeat("b", 41))
	if len(long) > 63 || store.ValidNamespaceName(long) != "" || long == other {
		t.Fatalf("long names %q %q", long, other)
	}
}

func TestFlags(t *testing.T) {
	ios, _, _, _ := iostreams.Test()
	f := &cmdutil.Factory{IOStreams: ios, Getenv: func(string) string { return "" }, WorkDir: t.TempDir()}
	run := func(args ...string) error {
		cmd := NewCmd(f)
		for _, c := range cmd.Commands() {
			switch c.Name() {
			case "deploy":
				*c = *NewDeployCmd(f, func(context.Context, *DeployOptions) error { return nil })
			case "endpoints":
				*c = *NewEndpointsCmd(f, func(context.Context, *EndpointsOptions) error { return nil })
			}
		}
		cmd.SetArgs(args)
		cmd.SilenceUsage, cmd.SilenceErrors = true, true
		return cmd.ExecuteContext(context.Background())
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"deploy", "pr-1", "--scope", "global"}, ""},
		{[]string{"deploy", "--scope", "team"}, "--scope must be personal or global"},
		{[]string{"deploy", "Bad_Name"}, "names the preview's namespace"},
		{[]string{"deploy", "a", "b"}, "at most one preview name"},
		{[]string{"deploy", "kube-system"}, "reserved"},
		{[]string{"deploy", "--sourceUrl", "ftp://git.example.com/a/pull/1"}, "--sourceUrl"},
		{[]string{"deploy", "--sourceUrl", "https:///pull/1"}, "--sourceUrl"},
		{[]string{"deploy", "--repository", "git@github.com:a/b.git"}, "--repository"},
		{[]string{"deploy", "--repository", "https://tok@github.com/a/b"}, "GIT_TOKEN_GITHUB_COM"},
		{[]string{"deploy", "--timeout", "25h"}, "--timeout"},
		{[]string{"deploy", "--var", "1X=y"}, "--var"},
		{[]string{"deploy", "pr-1", "--repository", "https://github.com/a/b", "--sourceUrl", "https://github.com/a/b/pull/1"}, ""},
		{[]string{"endpoints", "pr-1", "-o", "json"}, ""},
		{[]string{"endpoints", "-o", "yaml"}, "--output must be json or md"},
		{[]string{"list", "extra"}, "takes no arguments"},
	} {
		err := run(c.args...)
		if c.want == "" {
			if err != nil {
				t.Errorf("%v: %v", c.args, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.want) || errs.ExitCode(err) != errs.ExitUsage {
			t.Errorf("%v: %v, want a usage error saying %q", c.args, err, c.want)
		}
	}
}

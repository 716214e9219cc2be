//go:build integration

package contextcmd_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	contextcmd "github.com/devtool/devtool/internal/cli/context"
	"github.com/devtool/devtool/internal/cmdutil"
	"github.com/devtool/devtool/internal/contexts"
	"github.com/devtool/devtool/internal/contexts/contexttest"
	"github.com/devtool/devtool/internal/iostreams"
)

type cli struct {
	t           *testing.T
	f           *cmdutil.Factory
	out, errOut *bytes.Buffer
}

func newCLI(t *testing.T, e *contexttest.Env) *cli {
	ios, _, out, errOut := iostreams.Test()
	f := &cmdutil.Factory{IOStreams: ios, Getenv: e.Getenv, Target: cmdutil.TargetFunc(&contexts.Resolver{Getenv: e.Getenv})}
	return &cli{t: t, f: f, out: out, errOut: errOut}
}

// run runs `devtool context <args>`.
func (c *cli) run(args ...string) error {
	c.t.Helper()
	c.out.Reset()
	c.errOut.Reset()
	cmd := contextcmd.NewCmd(c.f, nil)
	cmd.SilenceErrors, cmd.SilenceUsage = true, true
	cmd.SetArgs(args)
	cmd.SetOut(c.out)
	cmd.SetErr(c.errOut)
	return cmd.ExecuteContext(context.Background())
}

func (c *cli) ok(args ...string) string {
	c.t.Helper()
	if err := c.run(args...); err != nil {
		c.t.Fatalf("devtool context %s: %v\nstderr: %s", strings.Join(args, " "), err, c.errOut.String())
	}
	return c.out.String()
}

func (c *cli) show(args ...string) contextcmd.Record {
	c.t.Helper()
	var rec contextcmd.Record
	out := c.ok(append([]string{"show"}, args...)...)
	if err := json.Unmarshal([]byte(out), &rec); err != nil {
		c.t.Fatalf("context show: %v\n%s", err, out)
	}
	return rec
}

// TestContextUseAgainstCluster: 'context use' switches the credentials and namespace every command gets.
func TestContextUseAgainstCluster(t *testing.T) {
	e := contexttest.New(t)
	c := newCLI(t, e)
	for _, step := range []struct{ ctx, user, ns string }{
		{contexttest.ContextB, e.LimitedUser(), e.NamespaceB},
		{contexttest.ContextA, "", e.NamespaceA},
	} {
		c.ok("use", step.ctx)
		tg, err := c.f.Target(cmdutil.KubeFlags{})
		if err != nil {
			t.Fatal(err)
		}
		who := contexttest.WhoAmI(t, tg.Kube.Clientset)
		if tg.ContextName != step.ctx || tg.Namespace != step.ns || (step.user != "" && who != step.user) || (step.user == "" && who == e.LimitedUser()) {
			t.Errorf("after use %s: context %s, namespace %s, user %s", step.ctx, tg.ContextName, tg.Namespace, who)
		}
		if rec := c.show(); rec.Name != step.ctx || rec.Namespace != step.ns {
			t.Errorf("show after use %s: %+v", step.ctx, rec)
		}
	}
}

func TestContextShowNeverPrintsToken(t *testing.T) {
	e := contexttest.New(t)
	c := newCLI(t, e)
	const token = "tok-3f9c2e-very-secret"
	err := contexts.NewStore(e.Home).Update(func(cfg *contexts.Config) error {
		cfg.Contexts["https://platform.test"] = &contexts.Context{
			Name: "https://platform.test", Token: token, IsDevtool: true, KubeContext: contexttest.ContextA, Namespace: e.NamespaceA,
		}
		cfg.CurrentContext = "https://platform.test"
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var all strings.Builder
	for _, args := range [][]string{{"show"}, {"list"}, {"show", "-n", e.NamespaceB}} {
		c.ok(args...)
		all.WriteString(c.out.String() + c.errOut.String())
	}
	if strings.Contains(all.String(), token) {
		t.Fatalf("a token was printed:\n%s", all.String())
	}
	if rec := c.show(); rec.Token != contextcmd.Redacted || !rec.IsDevtool {
		t.Errorf("show: %+v", rec)
	}
	// The token does reach the commands that need it, and the platform check passes.
	tg, err := c.f.Target(cmdutil.KubeFlags{})
	if err != nil {
		t.Fatal(err)
	}
	if tg.Token != token || !tg.IsPlatform {
		t.Errorf("target: platform %v, token set %v", tg.IsPlatform, tg.Token == token)
	}
}

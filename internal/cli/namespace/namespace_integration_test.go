//go:build integration

package namespace_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	contextcmd "github.com/devtool/devtool/internal/cli/context"
	"github.com/devtool/devtool/internal/cli/namespace"
	"github.com/devtool/devtool/internal/cmdutil"
	"github.com/devtool/devtool/internal/contexts"
	"github.com/devtool/devtool/internal/contexts/contexttest"
	"github.com/devtool/devtool/internal/iostreams"
)

type cli struct {
	t               *testing.T
	f               *cmdutil.Factory
	in, out, errOut *bytes.Buffer
}

func newCLI(t *testing.T, e *contexttest.Env) *cli {
	ios, in, out, errOut := iostreams.Test()
	f := &cmdutil.Factory{IOStreams: ios, Getenv: e.Getenv, Target: cmdutil.TargetFunc(&contexts.Resolver{Getenv: e.Getenv})}
	return &cli{t: t, f: f, in: in, out: out, errOut: errOut}
}

// run runs `devtool <args>` for the context and namespace commands, as the root command would.
func (c *cli) run(args ...string) error {
	c.t.Helper()
	c.out.Reset()
	c.errOut.Reset()
	root := &cobra.Command{Use: "devtool", SilenceErrors: true, SilenceUsage: true}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &cmdutil.FlagError{Err: err} })
	root.AddCommand(contextcmd.NewCmd(c.f, nil), namespace.NewCmd(c.f, nil))
	root.SetArgs(args)
	root.SetOut(c.out)
	root.SetErr(c.errOut)
	return root.ExecuteContext(context.Background())
}

func (c *cli) ok(args ...string) string {
	c.t.Helper()
	if err := c.run(args...); err != nil {
		c.t.Fatalf("devtool %s: %v\nstderr: %s", strings.Join(args, " "), err, c.errOut.String())
	}
	return c.out.String()
}

func (c *cli) fails(want string, args ...string) error {
	c.t.Helper()
	err := c.run(args...)
	if err == nil || !strings.Contains(err.Error(), want) {
		c.t.Errorf("devtool %s: want an error with %q, got %v", strings.Join(args, " "), want, err)
	}
	return err
}

func (c *cli) show(args ...string) contextcmd.Record {
	c.t.Helper()
	var rec contextcmd.Record
	out := c.ok(append([]string{"context", "show"}, args...)...)
	if err := json.Unmarshal([]byte(out), &rec); err != nil {
		c.t.Fatalf("context show: %v\n%s", err, out)
	}
	return rec
}

func TestContextAndNamespaceCommands(t *testing.T) {
	e := contexttest.New(t)
	c := newCLI(t, e)
	kubeBefore, err := os.ReadFile(e.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}

	// No devtool context yet: the kubeconfig's current context decides.
	if rec := c.show(); rec.Name != contexttest.ContextA || rec.Namespace != e.NamespaceA {
		t.Errorf("show before any use: %+v", rec)
	}

	// context use: dev-b becomes current, with its kubeconfig namespace.
	c.ok("context", "use", contexttest.ContextB)
	if rec := c.show(); rec.Name != contexttest.ContextB || rec.Namespace != e.NamespaceB {
		t.Errorf("show after use dev-b: %+v", rec)
	}
	tg, err := c.f.Target(cmdutil.KubeFlags{})
	if err != nil {
		t.Fatal(err)
	}
	if who := contexttest.WhoAmI(t, tg.Kube.Clientset); who != e.LimitedUser() {
		t.Errorf("after 'context use dev-b' commands act as %q, want %q", who, e.LimitedUser())
	}

	// namespace use on dev-b: the limited user cannot read Namespace objects but may list pods in
	// its namespace, which counts as reachable; the other namespace is not reachable.
	c.ok("namespace", "use", e.NamespaceB)
	if !strings.Contains(c.errOut.String(), "Using namespace "+e.NamespaceB+" in context "+contexttest.ContextB) {
		t.Errorf("namespace use output: %q", c.errOut.String())
	}
	c.fails("not reachable", "namespace", "use", e.NamespaceA)
	c.fails(`namespace "does-not-exist" does not exist`, "namespace", "use", "does-not-exist", "--context", contexttest.ContextA)

	// namespace use --context dev-a: changes dev-a's namespace, dev-b stays current.
	c.ok("namespace", "use", e.NamespaceB, "--context", contexttest.ContextA)
	if rec := c.show(); rec.Name != contexttest.ContextB {
		t.Errorf("namespace use --context changed the current context: %+v", rec)
	}
	if rec := c.show("--context", contexttest.ContextA); rec.Namespace != e.NamespaceB {
		t.Errorf("dev-a namespace after 'namespace use --context dev-a': %+v", rec)
	}

	// --context and --namespace override the stored choice for one command.
	if rec := c.show("--context", contexttest.ContextA, "--namespace", e.NamespaceA); rec.Name != contexttest.ContextA || rec.Namespace != e.NamespaceA {
		t.Errorf("show with both flags: %+v", rec)
	}
	tg, err = c.f.Target(cmdutil.KubeFlags{Context: contexttest.ContextA, Namespace: e.NamespaceA})
	if err != nil {
		t.Fatal(err)
	}
	if who := contexttest.WhoAmI(t, tg.Kube.Clientset); who == e.LimitedUser() || tg.Namespace != e.NamespaceA {
		t.Errorf("--context dev-a --namespace A: user %q namespace %q", who, tg.Namespace)
	}

	// context use dev-a keeps the namespace chosen for it.
	c.ok("context", "use", contexttest.ContextA)
	if rec := c.show(); rec.Name != contexttest.ContextA || rec.Namespace != e.NamespaceB {
		t.Errorf("show after use dev-a: %+v", rec)
	}
	list := c.ok("context", "list")
	if !strings.Contains(list, contexttest.ContextA+" *") || !strings.Contains(list, contexttest.ContextB+" ") {
		t.Errorf("context list:\n%s", list)
	}

	// Interactive selection on a terminal: the prompt lists the cluster's namespaces, the current one
	// marked. A first run without an answer shows the list; the second answers with A's number.
	c.f.IOStreams.SetTTY(true)
	c.fails("no answer", "namespace")
	number := ""
	for _, line := range strings.Split(c.errOut.String(), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[len(f)-1] == e.NamespaceA {
			number = strings.TrimSuffix(f[len(f)-2], ")")
		}
		if strings.HasSuffix(line, " "+e.NamespaceB) {
			t.Errorf("the current namespace %s is not marked: %q", e.NamespaceB, line)
		}
	}
	if number == "" {
		t.Fatalf("namespace %s not offered:\n%s", e.NamespaceA, c.errOut.String())
	}
	c.in.WriteString(number + "\n")
	c.ok("namespace")
	c.f.IOStreams.SetTTY(false)
	if rec := c.show(); rec.Name != contexttest.ContextA || rec.Namespace != e.NamespaceA {
		t.Errorf("show after choosing %s interactively: %+v", e.NamespaceA, rec)
	}

	// The platform-only namespace commands fail with the spec's message on this cluster.
	for _, args := range [][]string{{"namespace", "create", "x"}, {"namespace", "delete", e.NamespaceA}, {"namespace", "list"}} {
		err := c.fails("only available on clusters with the platform installed", args...)
		if !errors.Is(err, namespace.ErrPlatformOnly) {
			t.Errorf("%v: %v", args, err)
		}
	}

	// The kubeconfig was never written.
	if after, _ := os.ReadFile(e.Kubeconfig); !bytes.Equal(after, kubeBefore) {
		t.Error("the kubeconfig was modified")
	}
}

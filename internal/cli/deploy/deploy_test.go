package deploy

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/devtool/devtool/internal/cmdutil"
	"github.com/devtool/devtool/internal/environment"
	"github.com/devtool/devtool/internal/iostreams"
	"github.com/devtool/devtool/internal/translate"
)

func parse(t *testing.T, args ...string) (*Options, error) {
	t.Helper()
	ios, _, _, _ := iostreams.Test()
	f := &cmdutil.Factory{IOStreams: ios, WorkDir: t.TempDir()}
	var got *Options
	cmd := NewCmd(f, func(_ context.Context, o *Options) error { got = o; return nil })
	cmd.SetArgs(args)
	cmd.SetOut(&strings.Builder{})
	cmd.SetErr(&strings.Builder{})
	return got, cmd.Execute()
}

func TestFlags(t *testing.T) {
	o, err := parse(t, "--var", "A=1", "--var", "B=x=y", "--no-bash", "--build", "--wait", "--dependencies", "--name", "n", "-f", "d.yml", "-n", "ns")
	if err != nil {
		t.Fatal(err)
	}
	if !o.NoBash || !o.Build || !o.Wait || !o.Dependencies || o.Env.Name != "n" || len(o.Env.Files) != 1 || o.Env.Files[0] != "d.yml" || o.Kube.Namespace != "ns" || o.Timeout != 5*time.Minute {
		t.Errorf("options: %+v", o)
	}
	vars, err := parseVars(o.Vars)
	if err != nil || vars["A"] != "1" || vars["B"] != "x=y" {
		t.Errorf("vars %v, %v", vars, err)
	}
}

func TestReservedVarIsAFlagError(t *testing.T) {
	for _, v := range []string{"DEVTOOL_NAMESPACE=x", "KUBECONFIG=/x", "novalue", "9X=1"} {
		_, err := parse(t, "--var", v)
		var fe *cmdutil.FlagError
		if !errors.As(err, &fe) {
			t.Errorf("--var %s: err %v, want a flag error", v, err)
		}
	}
}

// TestPrintDryRun: a devtool.yml's plan goes to stderr, the objects as YAML to stdout (nothing
// when there are none), so `deploy --dry-run > objects.yaml` keeps only YAML.
func TestPrintDryRun(t *testing.T) {
	svc := &corev1.Service{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"}, ObjectMeta: metav1.ObjectMeta{Name: "web"}}
	for _, c := range []struct {
		res          *environment.DeployResult
		out, errOut  string
		outIsNothing bool
	}{
		{&environment.DeployResult{Plan: []string{"would run: echo"}, Objects: &translate.Result{Objects: []runtime.Object{svc}}}, "kind: Service", "would run: echo\n", false},
		{&environment.DeployResult{Plan: []string{"would run: echo"}}, "", "would run: echo\n", true},
		{&environment.DeployResult{Plan: []string{"a", "b"}, Objects: &translate.Result{}}, "", "a\nb\n", true},
	} {
		ios, _, out, errOut := iostreams.Test()
		if err := printDryRun(context.Background(), ios, c.res); err != nil {
			t.Fatal(err)
		}
		if errOut.String() != c.errOut || !strings.Contains(out.String(), c.out) || (c.outIsNothing && out.Len() != 0) ||
			strings.Contains(out.String(), "would run") {
			t.Errorf("stdout %q, stderr %q", out.String(), errOut.String())
		}
	}
}

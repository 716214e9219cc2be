package deploy

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/devtool/devtool/internal/cmdutil"
	"github.com/devtool/devtool/internal/iostreams"
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

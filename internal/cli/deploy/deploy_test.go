package deploy

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/devtool/devtool/internal/cmdutil"
	"github.com/devtool/devtool/internal/deploy"
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
	if !o.NoBash || !o.Build || !o.Wait || !o.Dependencies || o.Name != "n" || o.File != "d.yml" || o.Kube.Namespace != "ns" || o.Timeout != 5*time.Minute {
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

func TestEndpointsOfTheDeploySection(t *testing.T) {
	dir := t.TempDir()
	err := os.WriteFile(filepath.Join(dir, "devtool.yml"), []byte(`name: shop
deploy:
  commands: [kubectl apply -f k8s]
  endpoints:
    shop:
      - {path: /, service: web, port: 8080}
`), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	m, err := deploy.LoadManifest(dir, "", nil)
	if err != nil || m == nil {
		t.Fatalf("load: %v %v", m, err)
	}
	ios, _, _, _ := iostreams.Test()
	res, err := translateDeploySection(context.Background(), &Options{IO: ios}, &cmdutil.Target{Namespace: "dev", ClusterDomain: "example.test"}, m, "shop", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Objects) != 1 || len(res.Endpoints) != 1 || res.Endpoints[0].URL != "https://shop-dev.example.test/" {
		t.Errorf("objects %d, endpoints %+v", len(res.Objects), res.Endpoints)
	}
}

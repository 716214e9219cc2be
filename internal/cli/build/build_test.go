package build

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/devtool/devtool/internal/build"
	"github.com/devtool/devtool/internal/cmdutil"
	"github.com/devtool/devtool/internal/iostreams"
)

func testFactory(t *testing.T) *cmdutil.Factory {
	ios, _, _, _ := iostreams.Test()
	return &cmdutil.Factory{IOStreams: ios, Getenv: func(string) string { return "" }, WorkDir: "/work/dir",
		Target: func(cmdutil.KubeFlags) (*cmdutil.Target, error) { return nil, errors.New("no cluster") }}
}

func parse(t *testing.T, args ...string) (*Options, error) {
	t.Helper()
	var got *Options
	cmd := NewCmd(testFactory(t), func(_ context.Context, o *Options) error { got = o; return nil })
	cmd.SetArgs(args)
	cmd.SetOut(new(strings.Builder))
	cmd.SetErr(new(strings.Builder))
	err := cmd.Execute()
	return got, err
}

func TestFlags(t *testing.T) {
	o, err := parse(t, "api", "web", "--no-cache", "--secret", "id=npm,src=.npmrc", "--secret", "id=b,src=/abs",
		"--export-cache", "r/c:e", "--cache-from", "r/c:1", "--cache-from", "r/c:2", "-n", "ns")
	if err != nil {
		t.Fatal(err)
	}
	want := []build.Secret{{ID: "npm", Src: "/work/dir/.npmrc"}, {ID: "b", Src: "/abs"}}
	if len(o.Secrets) != 2 || o.Secrets[0] != want[0] || o.Secrets[1] != want[1] {
		t.Errorf("secrets %+v", o.Secrets)
	}
	if !o.NoCache || o.ExportCache != "r/c:e" || len(o.CacheFrom) != 2 || o.Kube.Namespace != "ns" || len(o.Services) != 2 {
		t.Errorf("options %+v", o)
	}
	o, err = parse(t, "-f", "sub/Dockerfile.dev", "--tag", "r/x:1")
	if err != nil || o.Tag != "r/x:1" || o.File != "sub/Dockerfile.dev" {
		t.Errorf("dockerfile mode: %+v %v", o, err)
	}
	for _, bad := range [][]string{
		{"--secret", "npm"},
		{"--secret", "id=x"},
		{"--tag", "r/x:1"},
		{"-f", "devtool.yml", "--tag", "r/x:1"},
		{"-f", "Dockerfile", "api"},
	} {
		_, err := parse(t, bad...)
		var fe *cmdutil.FlagError
		if !errors.As(err, &fe) {
			t.Errorf("%v: want a flag error, got %v", bad, err)
		}
	}
}

func TestIsDockerfile(t *testing.T) {
	for f, want := range map[string]bool{
		"Dockerfile": true, "x/Dockerfile.prod": true, "prod.dockerfile": true, "Containerfile": true,
		"devtool.yml": false, "docker-compose.yaml": false, "": false, "compose.yml": false,
	} {
		if isDockerfile(f) != want {
			t.Errorf("%q: want %v", f, want)
		}
	}
}

// Without a registry and namespace, -f Dockerfile needs --tag: a flag error, before any builder is dialled.
func TestDockerfileNeedsTag(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte("FROM scratch\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f := testFactory(t)
	f.WorkDir = dir
	cmd := NewCmd(f, nil)
	cmd.SetArgs([]string{"-f", "Dockerfile"})
	err := cmd.Execute()
	var fe *cmdutil.FlagError
	if !errors.As(err, &fe) || !strings.Contains(err.Error(), "--tag") {
		t.Fatalf("got %v", err)
	}
}

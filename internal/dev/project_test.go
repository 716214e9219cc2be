package dev

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/devtool/devtool/internal/contexts"
	"github.com/devtool/devtool/internal/environment"
	"github.com/devtool/devtool/internal/errs"
)

func TestLoadProjectExample(t *testing.T) {
	p, err := LoadProject(environment.Options{Dir: filepath.Join("..", "..", "examples", "hello"), Environ: map[string]string{}})
	if err != nil {
		t.Fatal(err)
	}
	d, err := p.Select("")
	if err != nil {
		t.Fatal(err)
	}
	if d.Name != "web" || len(d.Sync) != 1 || d.Sync[0].Remote != "/app" || !strings.HasSuffix(d.Sync[0].Local, "web") || len(d.Forward) != 1 {
		t.Errorf("%+v", d)
	}
	if p.Name != "hello" || p.FromCompose {
		t.Errorf("project %+v", p)
	}
}

func TestLoadProjectComposeAndServices(t *testing.T) {
	dir := t.TempDir()
	_ = os.WriteFile(filepath.Join(dir, "compose.yml"), []byte("services:\n  api:\n    image: busybox\n  worker:\n    image: busybox\n"), 0o644)
	p, err := LoadProject(environment.Options{Dir: dir, Environ: map[string]string{}})
	if err != nil {
		t.Fatal(err)
	}
	if !p.FromCompose || strings.Join(p.Names(), ",") != "api,worker" {
		t.Errorf("%+v", p)
	}
	if _, err := p.Select(""); err == nil || !strings.Contains(err.Error(), "2 dev containers (api, worker)") {
		t.Errorf("several: %v", err)
	}
	if _, err := p.Select("nope"); err == nil || !strings.Contains(err.Error(), `no dev container "nope"`) {
		t.Errorf("unknown: %v", err)
	}
	_ = os.WriteFile(filepath.Join(dir, "devtool.yml"), []byte("deploy:\n  compose: compose.yml\ndev:\n  api:\n    services: [worker]\n"), 0o644)
	p, err = LoadProject(environment.Options{Dir: dir, Environ: map[string]string{}})
	if err != nil {
		t.Fatal(err)
	}
	if d, err := p.Select("api"); err != nil || len(d.Services) != 1 || d.Services[0] != "worker" {
		t.Errorf("services %+v %v", d, err)
	}
	if len(p.Warnings) != 0 {
		t.Errorf("warnings %v (services must be a known field)", p.Warnings)
	}
}

func TestLoadDev(t *testing.T) {
	dir := t.TempDir()
	_ = os.WriteFile(filepath.Join(dir, "compose.yml"), []byte("services:\n  api:\n    image: busybox\n  worker:\n    image: busybox\n"), 0o644)
	_ = os.WriteFile(filepath.Join(dir, "other.yml"), []byte("services:\n  solo:\n    image: busybox\n"), 0o644)
	env := environment.Options{Dir: dir, Environ: map[string]string{}}
	_, err := LoadDev(LoadOptions{Env: env, Usage: "devtool down NAME"})
	if err == nil || !strings.Contains(err.Error(), "2 dev containers (api, worker) and none was named") ||
		errs.Hint(err) != "run 'devtool down NAME' with NAME one of: api, worker" || errs.ExitCode(err) != errs.ExitUsage {
		t.Errorf("several, no name: %v (hint %q)", err, errs.Hint(err))
	}
	var offered []string
	s, err := LoadDev(LoadOptions{Env: env, Pick: func(n []string) (string, error) { offered = n; return "worker", nil }})
	if err != nil || s.Dev.Name != "worker" || strings.Join(offered, ",") != "api,worker" || s.Target != nil {
		t.Errorf("picked: %+v %v %v", s, offered, err)
	}
	targetErr := errors.New("no such context")
	if _, err := LoadDev(LoadOptions{Env: env, Name: "api", Target: func() (*contexts.Target, error) { return nil, targetErr }}); !errors.Is(err, targetErr) {
		t.Errorf("target error: %v", err)
	}
	// --file and --name reach the loader.
	env.Files, env.Name = []string{"other.yml"}, "named"
	s, err = LoadDev(LoadOptions{Env: env, Target: func() (*contexts.Target, error) { return &contexts.Target{Namespace: "x"}, nil }})
	if err != nil || s.Dev.Name != "solo" || s.Project.Name != "named" || s.Target.Namespace != "x" {
		t.Errorf("--file/--name: %+v %v", s, err)
	}
}

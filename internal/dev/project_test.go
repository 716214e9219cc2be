package dev

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLoadProjectExample(t *testing.T) {
	p, err := LoadProject(filepath.Join("..", "..", "examples", "hello"), "", map[string]string{})
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
	p, err := LoadProject(dir, "", map[string]string{})
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
	p, err = LoadProject(dir, "", map[string]string{})
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

package compose

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestInterpolation(t *testing.T) {
	env := map[string]string{"TAG": "1.2", "EMPTY": ""}
	tests := []struct {
		value string
		want  string
	}{
		{`"app:${TAG}"`, "app:1.2"},
		{`"app:$TAG"`, "app:1.2"},
		{`"app:${MISSING:-latest}"`, "app:latest"},
		{`"app:${EMPTY:-latest}"`, "app:latest"},
		{`"app:${MISSING-latest}"`, "app:latest"},
		{`"app:${EMPTY-latest}x"`, "app:x"},
		{`"app:${TAG:?tag needed}"`, "app:1.2"},
		{`"app:${EMPTY?set it}x"`, "app:x"},
		{`"app:${TAG:+set}"`, "app:set"},
		{`"cost$$5"`, "cost$5"},
		{`"app:${MISSING}x"`, "app:x"},
		{`"${MISSING:-host}:${TAG}/${MISSING:-p}"`, "host:1.2/p"},
		{`"${MISSING:-${TAG}}"`, "1.2"},
	}
	for _, tt := range tests {
		t.Run(tt.value, func(t *testing.T) {
			p, err := loadYAML(t, "services:\n  web:\n    image: "+tt.value+"\n", env, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := p.Service("web").Image; got != tt.want {
				t.Errorf("image = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestInterpolationUnsetVariableWarns(t *testing.T) {
	p, err := loadYAML(t, "services:\n  web:\n    image: \"a${NOPE}${NOPE}${HAS:-x}:${NOPE}\"\n", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := `the "NOPE" variable is not set; using an empty string`
	if len(p.Warnings) != 1 || p.Warnings[0] != want {
		t.Errorf("warnings = %q, want [%q]", p.Warnings, want)
	}
}

func TestInterpolationRequiredErrorNamesPosition(t *testing.T) {
	es := loadErrors(t, "services:\n  web:\n    image: nginx\n    working_dir: ${DIR:?set DIR to the app folder}\n    command: ${CMD?}\n")
	e := findError(t, es, "required variable DIR is not set: set DIR to the app folder")
	if e.Pos.Line != 4 || e.Pos.Column != 18 || e.Field != "services.web.working_dir" {
		t.Errorf("got %s %s, want line 4 col 18 services.web.working_dir", e.Pos, e.Field)
	}
	if !strings.HasSuffix(e.Pos.File, "compose.yml") {
		t.Errorf("position file = %q", e.Pos.File)
	}
	e = findError(t, es, "required variable CMD is not set")
	if e.Pos.Line != 5 {
		t.Errorf("CMD error at line %d, want 5", e.Pos.Line)
	}
}

func TestInterpolationInvalidTemplate(t *testing.T) {
	es := loadErrors(t, "services:\n  web:\n    image: \"nginx:${\"\n")
	e := findError(t, es, "invalid variable reference")
	if e.Pos.Line != 3 {
		t.Errorf("line %d, want 3", e.Pos.Line)
	}
}

func TestVariablePrecedence(t *testing.T) {
	compose := "services:\n  web:\n    image: nginx\n    environment:\n      A: $A\n      B: $B\n      C: $C\n      D: ${D:-none}\n"
	dotenv := "A=dotenv\nB=dotenv\nD=from-${A}\n"
	secrets := func(name string) (string, bool) {
		v, ok := map[string]string{"A": "secret", "B": "secret", "C": "secret"}[name]
		return v, ok
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "compose.yml")
	os.WriteFile(file, []byte(compose), 0o644)
	os.WriteFile(filepath.Join(dir, ".env"), []byte(dotenv), 0o644)
	p, err := Load(LoadOptions{File: file, Environ: map[string]string{"A": "shell"}, Lookups: []Lookup{secrets}})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"A": "shell", "B": "dotenv", "C": "secret", "D": "from-shell"}
	if got := p.Service("web").Environment; !reflect.DeepEqual(got, want) {
		t.Errorf("environment = %v, want %v", got, want)
	}
}

func TestInvalidDotEnvIsPositionedAtTheFile(t *testing.T) {
	_, err := loadYAML(t, "services:\n  web:\n    image: nginx\n", nil, map[string]string{".env": "A='unterminated\n"})
	if err == nil || !strings.Contains(err.Error(), ".env") {
		t.Fatalf("want an error naming .env, got %v", err)
	}
}

func TestAnchorsAliasesAndMergeKeys(t *testing.T) {
	p := mustLoad(t, `
x-common: &common
  image: base:1
  labels: {team: core}
  restart: on-failure
x-env: &env
  environment: {LEVEL: debug}
services:
  web:
    <<: [*common, *env]
    image: web:2
  worker:
    <<: *common
    cap_add: &caps [NET_ADMIN]
  job:
    image: job
    cap_drop: *caps
`)
	web, worker, job := p.Service("web"), p.Service("worker"), p.Service("job")
	if web.Image != "web:2" || web.Labels["team"] != "core" || web.Environment["LEVEL"] != "debug" || web.Restart.Policy != RestartOnFailure {
		t.Errorf("web = %+v", web)
	}
	if worker.Image != "base:1" || !reflect.DeepEqual(worker.CapAdd, []string{"NET_ADMIN"}) {
		t.Errorf("worker = %+v", worker)
	}
	if !reflect.DeepEqual(job.CapDrop, []string{"NET_ADMIN"}) {
		t.Errorf("job cap_drop = %v", job.CapDrop)
	}
	names := []string{}
	for _, s := range p.Services {
		names = append(names, s.Name)
	}
	if !reflect.DeepEqual(names, []string{"web", "worker", "job"}) {
		t.Errorf("services not in file order: %v", names)
	}
	if len(p.Warnings) != 0 {
		t.Errorf("x- keys must not warn: %v", p.Warnings)
	}
}

func TestMergeKeyFirstSourceWins(t *testing.T) {
	p := mustLoad(t, "x-a: &a {image: a}\nx-b: &b {image: b, working_dir: /b}\nservices:\n  web:\n    <<: [*a, *b]\n")
	s := p.Service("web")
	if s.Image != "a" || s.WorkingDir != "/b" {
		t.Errorf("image %q working_dir %q, want a and /b", s.Image, s.WorkingDir)
	}
}

func TestIgnoredFieldsAreOneGroupedWarning(t *testing.T) {
	p := mustLoad(t, `version: "3.9"
name: shop
services:
  web:
    image: nginx
    networks: [front]
    container_name: web1
    deploy:
      placement: {constraints: []}
networks:
  front: {}
x-later: {}
`)
	if p.Name != "shop" {
		t.Errorf("name = %q", p.Name)
	}
	var grouped, version string
	for _, w := range p.Warnings {
		if strings.HasPrefix(w, "ignored fields") {
			grouped = w
		}
		if strings.Contains(w, "version field is obsolete") {
			version = w
		}
	}
	want := "ignored fields not supported by devtool: services.web.networks (%[1]s:6:5), services.web.container_name (%[1]s:7:5), services.web.deploy.placement (%[1]s:9:7), networks (%[1]s:10:1)"
	if file := p.File; grouped != strings.ReplaceAll(want, "%[1]s", file) {
		t.Errorf("grouped warning:\n got %s\nwant %s", grouped, strings.ReplaceAll(want, "%[1]s", file))
	}
	if version == "" {
		t.Errorf("no notice for the obsolete version field: %q", p.Warnings)
	}
}

func TestFindFile(t *testing.T) {
	dir := t.TempDir()
	_, err := FindFile(dir)
	if err == nil || !strings.Contains(err.Error(), "compose.yaml, compose.yml, docker-compose.yaml, docker-compose.yml") {
		t.Fatalf("want an error listing the names, got %v", err)
	}
	for _, name := range []string{"docker-compose.yml", "docker-compose.yaml", "compose.yml", "compose.yaml"} {
		os.WriteFile(filepath.Join(dir, name), nil, 0o644)
		got, err := FindFile(dir)
		if err != nil || got != filepath.Join(dir, name) {
			t.Errorf("after adding %s: got %q, %v", name, got, err)
		}
	}
}

func TestProjectPaths(t *testing.T) {
	p := mustLoad(t, "services:\n  web:\n    image: nginx\n")
	if !filepath.IsAbs(p.File) || p.WorkingDir != filepath.Dir(p.File) {
		t.Errorf("File %q WorkingDir %q", p.File, p.WorkingDir)
	}
}

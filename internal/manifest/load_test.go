package manifest

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/devtool/devtool/internal/compose"
)

// writeFiles creates files (path -> content) under a fresh folder and returns it.
func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func load(t *testing.T, manifest string, env map[string]string, extra map[string]string) (*Manifest, string, error) {
	t.Helper()
	files := map[string]string{"devtool.yml": manifest}
	for k, v := range extra {
		files[k] = v
	}
	dir := writeFiles(t, files)
	if env == nil {
		env = map[string]string{}
	}
	m, err := Load(LoadOptions{Dir: dir, Environ: env, HomeDir: "/home/dev"})
	return m, dir, err
}

func mustLoad(t *testing.T, manifest string, extra map[string]string) (*Manifest, string) {
	t.Helper()
	m, dir, err := load(t, manifest, nil, extra)
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	return m, dir
}

func TestFind(t *testing.T) {
	for _, tc := range []struct {
		name      string
		files     []string
		file      string
		want      string
		isCompose bool
	}{
		{"devtool.yml first", []string{"devtool.yml", "devtool.yaml", "compose.yml"}, "", "devtool.yml", false},
		{"devtool.yaml", []string{"devtool.yaml", "compose.yml"}, "", "devtool.yaml", false},
		{"under .devtool", []string{".devtool/devtool.yml", "compose.yml"}, "", ".devtool/devtool.yml", false},
		{"under .devtool yaml", []string{".devtool/devtool.yaml"}, "", ".devtool/devtool.yaml", false},
		{"compose fallback", []string{"docker-compose.yml"}, "", "docker-compose.yml", true},
		{"--file wins", []string{"devtool.yml", "other/m.yml"}, "other/m.yml", "other/m.yml", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			files := map[string]string{}
			for _, f := range tc.files {
				files[f] = "x: 1\n"
			}
			dir := writeFiles(t, files)
			got, isCompose, err := Find(dir, tc.file)
			if err != nil {
				t.Fatal(err)
			}
			if got != filepath.Join(dir, tc.want) || isCompose != tc.isCompose {
				t.Errorf("Find = %s, %v; want %s, %v", got, isCompose, tc.want, tc.isCompose)
			}
		})
	}
	t.Run("nothing found lists every path", func(t *testing.T) {
		dir := t.TempDir()
		_, _, err := Find(dir, "")
		var nf *NotFoundError
		if !errors.As(err, &nf) {
			t.Fatalf("err = %v, want *NotFoundError", err)
		}
		for _, name := range append(append([]string{}, DefaultFileNames...), compose.DefaultFileNames...) {
			if !strings.Contains(err.Error(), filepath.Join(dir, name)) {
				t.Errorf("error does not name %s: %v", name, err)
			}
		}
	})
	t.Run("missing --file", func(t *testing.T) {
		_, _, err := Find(t.TempDir(), "nope.yml")
		if err == nil || !strings.Contains(err.Error(), "nope.yml") {
			t.Errorf("err = %v", err)
		}
	})
}

func TestComposeStandsIn(t *testing.T) {
	composeFile := "name: Shop_App\nservices:\n  api:\n    build: ./api\n  db:\n    image: postgres\n"
	for _, tc := range []struct {
		name  string
		file  string
		file2 string
	}{
		{"discovered", "compose.yaml", ""},
		{"--file by content", "stack.yml", "stack.yml"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeFiles(t, map[string]string{tc.file: composeFile})
			m, err := Load(LoadOptions{Dir: dir, File: tc.file2, Environ: map[string]string{}})
			if err != nil {
				t.Fatal(err)
			}
			want := filepath.Join(dir, tc.file)
			if !m.Inferred || m.File != want || m.Dir != dir || m.Name != "Shop_App" {
				t.Errorf("manifest = %+v", m)
			}
			if len(m.Deploy.Compose) != 1 || m.Deploy.Compose[0].File != want || m.Deploy.Compose[0].Services != nil {
				t.Errorf("deploy.compose = %+v", m.Deploy.Compose)
			}
			if len(m.Build) != 1 || m.Build[0].Service != "api" || m.Build[0].Build.Context != filepath.Join(dir, "api") {
				t.Errorf("build = %+v", m.Build)
			}
		})
	}
	t.Run("broken compose file fails with its position", func(t *testing.T) {
		dir := writeFiles(t, map[string]string{"compose.yml": "services:\n  web: {}\n"})
		_, err := Load(LoadOptions{Dir: dir, Environ: map[string]string{}})
		if err == nil || !strings.Contains(err.Error(), "compose.yml:2:3") {
			t.Errorf("err = %v", err)
		}
	})
}

func TestDeployNotations(t *testing.T) {
	composeFiles := map[string]string{"compose.yml": "services: {api: {image: a}}\n", "c/other.yml": "services: {b: {image: b}}\n"}
	for _, tc := range []struct {
		name     string
		yaml     string
		commands []Command
		compose  []ComposeFile
	}{
		{"list of strings", "deploy:\n  - kubectl apply -f k8s\n  - echo ${NOT_EXPANDED} $$\n", []Command{
			{Name: "kubectl apply -f k8s", Command: "kubectl apply -f k8s"},
			{Name: "echo ${NOT_EXPANDED} $$", Command: "echo ${NOT_EXPANDED} $$"}}, nil},
		{"list of objects", "deploy:\n  - name: apply\n    command: kubectl apply -f k8s\n  - command: make\n", []Command{
			{Name: "apply", Command: "kubectl apply -f k8s"}, {Name: "make", Command: "make"}}, nil},
		{"object with commands", "deploy:\n  commands: [helm upgrade --install x chart]\n", []Command{
			{Name: "helm upgrade --install x chart", Command: "helm upgrade --install x chart"}}, nil},
		{"compose string", "deploy:\n  compose: compose.yml\n", nil, []ComposeFile{{File: "compose.yml"}}},
		{"compose object", "deploy:\n  compose: {file: compose.yml, services: [api]}\n", nil, []ComposeFile{{File: "compose.yml", Services: []string{"api"}}}},
		{"compose object services string", "deploy:\n  compose: {file: compose.yml, services: api}\n", nil, []ComposeFile{{File: "compose.yml", Services: []string{"api"}}}},
		{"compose list", "deploy:\n  compose:\n    - compose.yml\n    - file: c/other.yml\n", nil, []ComposeFile{{File: "compose.yml"}, {File: "c/other.yml"}}},
		{"interpolated compose path", "deploy:\n  compose: ${FILE:-compose.yml}\n", nil, []ComposeFile{{File: "compose.yml"}}},
		{"null", "deploy:\n", nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, dir := mustLoad(t, tc.yaml, composeFiles)
			var cmds []Command
			for _, c := range m.Deploy.Commands {
				cmds = append(cmds, Command{Name: c.Name, Command: c.Command})
			}
			if !reflect.DeepEqual(cmds, tc.commands) {
				t.Errorf("commands = %#v, want %#v", cmds, tc.commands)
			}
			var files []ComposeFile
			for _, c := range m.Deploy.Compose {
				rel, _ := filepath.Rel(dir, c.File)
				files = append(files, ComposeFile{File: rel, Services: c.Services})
			}
			if !reflect.DeepEqual(files, tc.compose) {
				t.Errorf("compose = %#v, want %#v", files, tc.compose)
			}
		})
	}
}

func TestCommandPositions(t *testing.T) {
	m, _ := mustLoad(t, "destroy:\n  - a\n  - name: b\n    command: c\n", nil)
	if len(m.Destroy) != 2 || m.Destroy[0].Pos.Line != 2 || m.Destroy[1].Pos.Line != 3 || m.Destroy[1].Name != "b" {
		t.Errorf("destroy = %+v", m.Destroy)
	}
}

func TestEndpointNotations(t *testing.T) {
	for _, tc := range []struct {
		name  string
		yaml  string
		names []string
		rules int
		label string
	}{
		{"list", "deploy:\n  endpoints:\n    - {path: /, service: web, port: 80}\n    - {path: /api, service: api, port: '8080'}\n", []string{""}, 2, ""},
		{"map", "deploy:\n  endpoints:\n    web: [{path: /, service: web, port: 80}]\n    api: [{path: /, service: api, port: 8080}]\n", []string{"web", "api"}, 1, ""},
		{"object", "deploy:\n  endpoints:\n    labels: {team: a}\n    rules: [{path: /, service: web, port: 80}]\n", []string{""}, 1, "a"},
		{"map of objects", "deploy:\n  endpoints:\n    web: {labels: {team: a}, rules: [{path: /, service: web, port: 80}]}\n", []string{"web"}, 1, "a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, _ := mustLoad(t, tc.yaml, nil)
			var names []string
			for _, e := range m.Deploy.Endpoints {
				names = append(names, e.Name)
			}
			if !reflect.DeepEqual(names, tc.names) || len(m.Deploy.Endpoints[0].Rules) != tc.rules || m.Deploy.Endpoints[0].Labels["team"] != tc.label {
				t.Errorf("endpoints = %+v", m.Deploy.Endpoints)
			}
		})
	}
}

func TestBuildNotations(t *testing.T) {
	m, dir := mustLoad(t, `build:
  a: ./a
  b:
  c:
    context: c
    dockerfile: Dockerfile.dev
    target: dev
    args: {X: "1", FROM_ENV: }
    export_cache: reg/c:cache
    cache_from: reg/c:cache
    image: reg/c:dev
    secrets: [npm=~/.npmrc, key=keys/k]
  d: https://github.com/acme/d.git
`, map[string]string{".env": "FROM_ENV=dotenv\n"})
	want := map[string]*BuildService{
		"a": {Build: &compose.Build{Context: filepath.Join(dir, "a"), Dockerfile: "Dockerfile"}},
		"b": {Build: &compose.Build{Context: dir, Dockerfile: "Dockerfile"}},
		"c": {Image: "reg/c:dev", Secrets: map[string]string{"npm": "/home/dev/.npmrc", "key": filepath.Join(dir, "keys/k")},
			Build: &compose.Build{Context: filepath.Join(dir, "c"), Dockerfile: "Dockerfile.dev", Target: "dev",
				Args: map[string]string{"X": "1", "FROM_ENV": "dotenv"}, ExportCache: "reg/c:cache", CacheFrom: []string{"reg/c:cache"}}},
		"d": {Build: &compose.Build{Context: "https://github.com/acme/d.git", Dockerfile: "Dockerfile"}},
	}
	if len(m.Build) != len(want) {
		t.Fatalf("build = %+v", m.Build)
	}
	for i, name := range []string{"a", "b", "c", "d"} {
		got := m.Build[i]
		w := want[name]
		if got.Service != name || got.Image != w.Image || !reflect.DeepEqual(got.Secrets, w.Secrets) || !reflect.DeepEqual(got.Build, w.Build) {
			t.Errorf("build %s = %+v %+v, want %+v %+v", name, got, got.Build, w, w.Build)
		}
	}
	if m.BuildByService("c") != m.Build[2] {
		t.Error("BuildByService")
	}
}

func TestDependencyNotations(t *testing.T) {
	m, dir := mustLoad(t, `dependencies:
  - https://github.com/acme/payments.git
  - git@github.com:acme/catalog.git
  - ../local-repo
`, nil)
	var got [][2]string
	for _, d := range m.Dependencies {
		got = append(got, [2]string{d.Name, d.Repository})
	}
	want := [][2]string{{"payments", "https://github.com/acme/payments.git"}, {"catalog", "git@github.com:acme/catalog.git"},
		{"local-repo", filepath.Join(filepath.Dir(dir), "local-repo")}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("list = %v, want %v", got, want)
	}

	m, _ = mustLoad(t, `dependencies:
  api:
    repository: https://github.com/acme/api
    manifest: deploy/devtool.yml
    branch: dev
    variables:
      - A=1
      - B=${B:-2}
    wait: true
    timeout: 90s
  web: https://github.com/acme/web
`, nil)
	want2 := []*Dependency{
		{Name: "api", Repository: "https://github.com/acme/api", Manifest: "deploy/devtool.yml", Branch: "dev",
			Variables: map[string]string{"A": "1", "B": "2"}, Wait: true, Timeout: 90 * time.Second},
		{Name: "web", Repository: "https://github.com/acme/web"},
	}
	for i, d := range m.Dependencies {
		d.Pos = compose.Position{}
		if !reflect.DeepEqual(d, want2[i]) {
			t.Errorf("dependency %d = %+v, want %+v", i, d, want2[i])
		}
	}
}

func TestRepositoryName(t *testing.T) {
	for in, want := range map[string]string{
		"https://github.com/acme/api.git": "api", "https://github.com/acme/api/": "api",
		"git@github.com:acme/web.git": "web", "/srv/repos/db": "db", "https://x/y?ref=1": "y",
	} {
		if got := RepositoryName(in); got != want {
			t.Errorf("RepositoryName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestDevSection(t *testing.T) {
	m, dir := mustLoad(t, `dev:
  web:
    image: ${IMAGE:-node:20}
    command: npm run "dev server"
    workdir: /app
    sync: [".:/app", "../shared:/shared"]
    forward: ["8080:80", "5432:db:5432", 9229]
    reverse: ["9000:9001"]
    environment: {A: "1", FROM_SHELL: }
    resources:
      requests: {cpu: 100m, memory: 128Mi}
      limits: {cpu: 2, memory: 1Gi}
    securityContext:
      runAsUser: 1000
      runAsGroup: 3000
      fsGroup: 2000
      runAsNonRoot: true
      capabilities: {add: [SYS_PTRACE], drop: [ALL]}
    persistentVolume: {size: 3Gi, storageClass: fast}
    selector: {app: web}
    container: main
    services: [worker, " mail "]
  api:
    command: [go, run, .]
    persistentVolume: {enabled: false}
`, nil)
	w := m.DevByName("web")
	if w == nil || m.DevByName("api") == nil {
		t.Fatalf("dev = %+v", m.Dev)
	}
	i := func(v int64) *int64 { return &v }
	tr := true
	want := &Dev{Name: "web", Pos: w.Pos, Image: "node:20", Command: []string{"npm", "run", "dev server"}, Workdir: "/app",
		Sync:    []Sync{{Local: dir, Remote: "/app"}, {Local: filepath.Join(filepath.Dir(dir), "shared"), Remote: "/shared"}},
		Forward: []Forward{{Local: 8080, Remote: 80}, {Local: 5432, Service: "db", Remote: 5432}, {Local: 9229, Remote: 9229}},
		Reverse: []Reverse{{Remote: 9000, Local: 9001}}, Environment: map[string]string{"A": "1"},
		Resources: compose.Resources{Requests: compose.ResourceList{CPU: "100m", Memory: "128Mi"}, Limits: compose.ResourceList{CPU: "2", Memory: "1Gi"}},
		SecurityContext: &SecurityContext{RunAsUser: i(1000), RunAsGroup: i(3000), FSGroup: i(2000), RunAsNonRoot: &tr,
			CapAdd: []string{"SYS_PTRACE"}, CapDrop: []string{"ALL"}},
		PersistentVolume: &PersistentVolume{Enabled: true, Size: "3Gi", StorageClass: "fast"},
		Selector:         map[string]string{"app": "web"}, Container: "main", Services: []string{"worker", "mail"}}
	// Sources: where each value was written (up's checks name it), here four of them.
	for rel, line := range map[string]int{"image": 3, "sync[1]": 6, "environment.A": 9, "resources.limits.memory": 12} {
		if s := w.Source(rel); s.Pos.Line != line || s.Field != "dev.web."+rel {
			t.Errorf("source of %s: %+v, want line %d", rel, s, line)
		}
	}
	if _, ok := w.Sources["environment.FROM_SHELL"]; ok {
		t.Errorf("a variable left out has a source")
	}
	want.Sources = w.Sources
	if !reflect.DeepEqual(w, want) {
		t.Errorf("web =\n%+v\nwant\n%+v", w, want)
	}
	if w.Pos.Line != 2 || w.Pos.Column != 3 {
		t.Errorf("pos = %v", w.Pos)
	}
	a := m.DevByName("api")
	if !reflect.DeepEqual(a.Command, []string{"go", "run", "."}) || a.PersistentVolume.Enabled || a.PersistentVolume.Size != DefaultVolumeSize || a.Services != nil {
		t.Errorf("api = %+v %+v", a, a.PersistentVolume)
	}
	if DefaultVolumeSize != "5Gi" {
		t.Errorf("DefaultVolumeSize = %s, the issue says 5Gi", DefaultVolumeSize)
	}
}

func TestDevServicesBadInput(t *testing.T) {
	for in, want := range map[string]string{
		"services: worker":           "dev.web.services: expected a list of service names",
		"services: [Worker_1]":       "dev.web.services[0]",
		"services: [worker, worker]": `dev.web.services[1]: service "worker" is listed twice`,
		"services: [{a: b}]":         "dev.web.services[0]",
	} {
		_, err := LoadBytes(LoadOptions{File: "/p/devtool.yml", Environ: map[string]string{}, HomeDir: "/home/dev"}, []byte("dev:\n  web:\n    "+in+"\n"))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v, want it to contain %q", in, err, want)
		}
	}
}

func TestInterpolationPrecedence(t *testing.T) {
	dotenv := map[string]string{".env": "A=dotenv\nB=dotenv\nC=dotenv\n"}
	lookup := func(name string) (string, bool) {
		if name == "SECRET" || name == "C" {
			return "secret", true
		}
		return "", false
	}
	dir := writeFiles(t, map[string]string{"devtool.yml": "name: ${A}-${B}-${C}-${SECRET}-${UNSET}\ndestroy:\n  - echo ${A}\n", ".env": dotenv[".env"]})
	m, err := Load(LoadOptions{Dir: dir, Environ: map[string]string{"A": "shell"}, Lookups: []compose.Lookup{lookup}})
	if err != nil {
		t.Fatal(err)
	}
	if m.Name != "shell-dotenv-dotenv-secret-" {
		t.Errorf("name = %q", m.Name)
	}
	if m.Destroy[0].Command != "echo ${A}" {
		t.Errorf("destroy command was interpolated: %q", m.Destroy[0].Command)
	}
	if m.DotEnv["B"] != "dotenv" {
		t.Errorf("DotEnv = %v", m.DotEnv)
	}
	if len(m.Warnings) != 1 || !strings.Contains(m.Warnings[0], `"UNSET" variable is not set`) {
		t.Errorf("warnings = %q", m.Warnings)
	}
}

func TestUnknownFieldsWarnOnce(t *testing.T) {
	m, _ := mustLoad(t, "deploy:\n  commands: [a]\n  hooks: x\nfoo: 1\ndev:\n  web:\n    image: x\n    ports: [1]\n", nil)
	if len(m.Warnings) != 1 {
		t.Fatalf("warnings = %q", m.Warnings)
	}
	for _, want := range []string{"deploy.hooks (", "devtool.yml:3:3", "foo (", "dev.web.ports ("} {
		if !strings.Contains(m.Warnings[0], want) {
			t.Errorf("warning %q does not name %q", m.Warnings[0], want)
		}
	}
}

func TestErrors(t *testing.T) {
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"syntax", "deploy: [a\n", "devtool.yml:1:1: invalid YAML: did not find expected"},
		{"empty", "", "devtool.yml:1:1: the manifest is empty"},
		{"not a mapping", "- a\n", "devtool.yml:1:1: expected a mapping, found a list"},
		{"deploy scalar", "deploy: make\n", "devtool.yml:1:9: deploy: expected a list of commands or an object with commands, compose and endpoints, found the string \"make\""},
		{"command empty", "deploy: ['']\n", "devtool.yml:1:10: deploy[0]: the command is empty"},
		{"command object without command", "deploy:\n  - name: x\n", "devtool.yml:2:5: deploy[0]: the command is empty"},
		{"command list item", "deploy: [[a]]\n", "deploy[0]: expected a command string or {name, command}, found a list"},
		{"commands not a list", "deploy: {commands: a}\n", "deploy.commands: expected a list of commands"},
		{"destroy mapping", "destroy: {a: b}\n", "destroy: expected a list of commands"},
		{"compose missing file", "deploy: {compose: nope.yml}\n", "devtool.yml:1:19: deploy.compose: Compose file"},
		{"compose object without file", "deploy: {compose: {services: [a]}}\n", "deploy.compose.file: expected the path of a Compose file"},
		{"compose number list", "deploy: {compose: [[1]]}\n", "deploy.compose[0]: expected a Compose file path or {file, services}"},
		{"route missing port", "deploy: {endpoints: [{path: /, service: a}]}\n", "deploy.endpoints[0]: a route needs path, service and port; missing port"},
		{"route path", "deploy: {endpoints: [{path: x, service: a, port: 1}]}\n", "expected a path starting with /"},
		{"route port range", "deploy: {endpoints: [{path: /, service: a, port: 70000}]}\n", "expected a port between 1 and 65535, found 70000"},
		{"endpoint name", "deploy: {endpoints: {Web_1: [{path: /, service: a, port: 1}]}}\n", "endpoint name \"Web_1\" is not valid"},
		{"endpoint object without rules", "deploy: {endpoints: {labels: {a: b}}}\n", "deploy.endpoints.labels: rules is required"},
		{"endpoints scalar", "deploy: {endpoints: x}\n", "expected a list of routes, a mapping of endpoint name to routes, or {labels, rules}"},
		{"build service name", "build: {My_Api: .}\n", "build.My_Api: service name \"My_Api\" is not valid in Kubernetes"},
		{"build list", "build: [a]\n", "build: expected a mapping, found a list"},
		{"build number", "build: {a: [1]}\n", "build.a: expected a build context path or a build object"},
		{"build args", "build: {a: {args: [=x]}}\n", "build.a.args[0]: expected NAME=value"},
		{"build secret without file", "build: {a: {secrets: {npm: }}}\n", "build.a.secrets.npm: expected the path of the secret's file"},
		{"dependency scalar", "dependencies: x\n", "dependencies: expected a list of repository URLs or a mapping"},
		{"dependency empty", "dependencies: ['']\n", "dependencies[0]: expected a non-empty string"},
		{"dependency duplicate", "dependencies: [a/x, b/x.git]\n", "two dependencies are named \"x\""},
		{"dependency without repository", "dependencies: {api: {branch: main}}\n", "dependencies.api.repository: repository is required"},
		{"dependency wait", "dependencies: {api: {repository: r, wait: maybe}}\n", "dependencies.api.wait: expected true or false, found the string \"maybe\""},
		{"dependency timeout unit", "dependencies: {api: {repository: r, timeout: 10}}\n", "dependencies.api.timeout: expected a positive duration with a unit"},
		{"dependency variables", "dependencies: {api: {repository: r, variables: x}}\n", "dependencies.api.variables: expected a mapping or a list of NAME=value strings"},
		{"dev not a map", "dev: [web]\n", "dev: expected a mapping, found a list"},
		{"dev name", "dev: {Web: {}}\n", "development container name \"Web\" is not valid"},
		{"dev command quotes", "dev: {web: {command: \"sh -c 'x\"}}\n", "dev.web.command: cannot split"},
		{"sync without remote", "dev: {web: {sync: [app]}}\n", "dev.web.sync[0]: expected local:remote (for example .:/app), found \"app\""},
		{"sync not a list", "dev: {web: {sync: .:/app}}\n", "dev.web.sync: expected a list of local:remote folder pairs"},
		{"forward port", "dev: {web: {forward: [80:x:y]}}\n", "dev.web.forward[0]: expected a port between 1 and 65535, found \"y\""},
		{"forward service", "dev: {web: {forward: [80:Db:80]}}\n", "service name \"Db\" is not valid"},
		{"forward shape", "dev: {web: {forward: [1:2:3:4]}}\n", "expected local:remote or local:service:remote"},
		{"reverse shape", "dev: {web: {reverse: ['9000']}}\n", "dev.web.reverse[0]: expected remote:local"},
		{"reverse range", "dev: {web: {reverse: ['0:1']}}\n", "expected a port between 1 and 65535, found \"0\""},
		{"environment", "dev: {web: {environment: x}}\n", "dev.web.environment: expected a mapping or a list of NAME=value strings"},
		{"cpu", "dev: {web: {resources: {limits: {cpu: lots}}}}\n", "dev.web.resources.limits.cpu: expected a CPU amount"},
		{"memory", "dev: {web: {resources: {requests: {memory: -1Gi}}}}\n", "dev.web.resources.requests.memory: expected a memory amount"},
		{"run as user", "dev: {web: {securityContext: {runAsUser: root}}}\n", "dev.web.securityContext.runAsUser: expected an integer"},
		{"negative group", "dev: {web: {securityContext: {fsGroup: -1}}}\n", "expected a user or group id between 0 and 2147483647"},
		{"capabilities", "dev: {web: {securityContext: {capabilities: {add: NET_ADMIN}}}}\n", "dev.web.securityContext.capabilities.add: expected a list of strings"},
		{"volume size", "dev: {web: {persistentVolume: {size: big}}}\n", "dev.web.persistentVolume.size: expected a volume size"},
		{"volume enabled", "dev: {web: {persistentVolume: {enabled: 1}}}\n", "expected true or false"},
		{"autocreate without image", "dev: {web: {autocreate: true}}\n", "dev.web.image: image is required with autocreate: true"},
		{"selector", "dev: {web: {selector: [[a]]}}\n", "dev.web.selector[0]: expected a string"},
		{"required variable", "name: ${NAME:?set NAME}\n", "devtool.yml:1:7: name: required variable NAME is not set: set NAME"},
		{"invalid variable", "name: ${NAME\n", "name: invalid variable reference"},
		{"duplicate key", "name: a\nname: b\n", "devtool.yml:2:1: name: key is defined twice"},
		{"bad merge", "dev:\n  web:\n    <<: 1\n", "dev.web.<<: expected a mapping or a list of mappings to merge"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := load(t, tc.yaml, nil, nil)
			if err == nil {
				t.Fatalf("no error for:\n%s", tc.yaml)
			}
			var es Errors
			if !errors.As(err, &es) || len(es) == 0 {
				t.Fatalf("error is not manifest.Errors: %T %v", err, err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error:\n%v\ndoes not contain %q", err, tc.want)
			}
			var ce *compose.Error
			if !errors.As(err, &ce) || !strings.HasSuffix(ce.Pos.File, "devtool.yml") {
				t.Errorf("errors.As *compose.Error: %v", ce)
			}
		})
	}
}

func TestErrorsCollectedInFileOrder(t *testing.T) {
	_, _, err := load(t, "dev:\n  web:\n    forward: [x]\n    sync: [x]\ndeploy: [\"\"]\n", nil, nil)
	var es Errors
	if !errors.As(err, &es) || len(es) != 3 {
		t.Fatalf("err = %v", err)
	}
	if es[0].Pos.Line != 3 || es[1].Pos.Line != 4 || es[2].Pos.Line != 5 || !strings.HasPrefix(err.Error(), "3 problems in the manifest:") {
		t.Errorf("order: %v", err)
	}
}

func TestDevtoolFolderRunsInProject(t *testing.T) {
	dir := writeFiles(t, map[string]string{".devtool/devtool.yml": "build: {api: api}\n", ".env": "X=1\n"})
	m, err := Load(LoadOptions{Dir: dir, Environ: map[string]string{}})
	if err != nil {
		t.Fatal(err)
	}
	if m.Dir != dir || m.Build[0].Build.Context != filepath.Join(dir, "api") || m.DotEnv["X"] != "1" {
		t.Errorf("dir %s, context %s, dotenv %v", m.Dir, m.Build[0].Build.Context, m.DotEnv)
	}
}

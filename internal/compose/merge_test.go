package compose

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// writeDir writes files (name -> content) into a fresh folder.
func writeDir(t *testing.T, files map[string]string) string {
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

func loadFiles(t *testing.T, dir string, names ...string) (*Project, error) {
	t.Helper()
	var files []string
	for _, n := range names {
		files = append(files, filepath.Join(dir, n))
	}
	return Load(LoadOptions{Files: files, Environ: map[string]string{"TAG": "2"}, HomeDir: "/home/dev"})
}

func TestMergeFiles(t *testing.T) {
	dir := writeDir(t, map[string]string{
		"compose.yaml": `services:
  web:
    image: web:1
    command: [serve, --a]
    environment: {A: "1", B: "1"}
    labels: [x=1]
    ports: ["8080:80", "9000"]
    volumes: [data:/data, ./src:/src]
    depends_on: [db]
    cap_add: [NET_ADMIN]
  db:
    image: postgres
volumes:
  data: {}
`,
		"compose.override.yaml": `services:
  web:
    image: web:${TAG}
    command: [serve, --b]
    environment: [B=2, C=3]
    labels: {y: "2"}
    ports: ["8080:80", "9001"]
    volumes: [./other:/src]
    depends_on:
      cache: {condition: service_healthy}
    cap_add: [NET_ADMIN, SYS_TIME]
  cache:
    image: redis
    healthcheck: {test: [CMD, redis-cli, ping]}
`,
	})
	p, err := loadFiles(t, dir, "compose.yaml", "compose.override.yaml")
	if err != nil {
		t.Fatal(err)
	}
	web := p.Service("web")
	if web.Image != "web:2" || !reflect.DeepEqual(web.Command, []string{"serve", "--b"}) {
		t.Errorf("image %q command %q", web.Image, web.Command)
	}
	if !reflect.DeepEqual(web.Environment, map[string]string{"A": "1", "B": "2", "C": "3"}) {
		t.Errorf("environment = %v", web.Environment)
	}
	if !reflect.DeepEqual(web.Labels, map[string]string{"x": "1", "y": "2"}) {
		t.Errorf("labels = %v", web.Labels)
	}
	var ports []int32
	for _, pt := range web.Ports {
		ports = append(ports, pt.ContainerPort)
	}
	if !reflect.DeepEqual(ports, []int32{80, 9000, 9001}) {
		t.Errorf("ports = %v", ports)
	}
	if len(web.Volumes) != 2 || web.Volumes[1].Source != filepath.Join(dir, "other") {
		t.Errorf("volumes = %+v", web.Volumes)
	}
	if len(web.DependsOn) != 2 || web.DependsOn[1].Service != "cache" || web.DependsOn[1].Condition != ConditionHealthy {
		t.Errorf("depends_on = %+v", web.DependsOn)
	}
	if !reflect.DeepEqual(web.CapAdd, []string{"NET_ADMIN", "SYS_TIME"}) {
		t.Errorf("cap_add = %v", web.CapAdd)
	}
	if p.Service("cache") == nil || len(p.Files) != 2 {
		t.Errorf("cache missing or files %v", p.Files)
	}
}

// TestMergeErrorsKeepTheirFile: an error in a value set by the second file names that file.
func TestMergeErrorsKeepTheirFile(t *testing.T) {
	dir := writeDir(t, map[string]string{
		"a.yml": "services:\n  web:\n    image: x\n",
		"b.yml": "services:\n  web:\n    ports: [\"http\"]\n    restart: sometimes\n",
	})
	_, err := loadFiles(t, dir, "a.yml", "b.yml")
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{filepath.Join(dir, "b.yml") + ":3:13: services.web.ports[0]", filepath.Join(dir, "b.yml") + ":4:14: services.web.restart"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
}

func TestFindFilesOverride(t *testing.T) {
	for _, tc := range []struct {
		files []string
		want  []string
	}{
		{[]string{"compose.yaml"}, []string{"compose.yaml"}},
		{[]string{"compose.yaml", "compose.override.yaml"}, []string{"compose.yaml", "compose.override.yaml"}},
		{[]string{"compose.yml", "compose.override.yaml"}, []string{"compose.yml", "compose.override.yaml"}},
		{[]string{"docker-compose.yml", "docker-compose.override.yml"}, []string{"docker-compose.yml", "docker-compose.override.yml"}},
		{[]string{"docker-compose.yml", "compose.override.yaml"}, []string{"docker-compose.yml"}},
	} {
		files := map[string]string{}
		for _, f := range tc.files {
			files[f] = "services: {}\n"
		}
		dir := writeDir(t, files)
		got, err := FindFiles(dir)
		if err != nil {
			t.Fatal(err)
		}
		for i := range got {
			got[i] = filepath.Base(got[i])
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%v: got %v, want %v", tc.files, got, tc.want)
		}
		if o := OverrideFile(filepath.Join(dir, tc.files[0])); (o != "") != (len(tc.want) == 2) {
			t.Errorf("%v: OverrideFile = %q", tc.files, o)
		}
	}
}

func TestExtends(t *testing.T) {
	dir := writeDir(t, map[string]string{
		"compose.yaml": `services:
  base:
    image: app
    environment: {A: "1"}
    ports: ["80"]
  web:
    extends: base
    environment: {B: "2"}
  worker:
    extends: {service: common, file: lib/common.yaml}
    command: work
`,
		"lib/common.yaml": `services:
  common:
    extends: root
    build: .
    env_file: common.env
    volumes: [./cache:/cache]
  root:
    image: root-image
    labels: {tier: back}
`,
		"lib/common.env": "FROM_FILE=yes\n",
	})
	p, err := loadFiles(t, dir, "compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	web := p.Service("web")
	if web.Image != "app" || !reflect.DeepEqual(web.Environment, map[string]string{"A": "1", "B": "2"}) || len(web.Ports) != 1 {
		t.Errorf("web = %+v", web)
	}
	w := p.Service("worker")
	lib := filepath.Join(dir, "lib")
	if w.Image != "root-image" || w.Labels["tier"] != "back" || w.Build == nil || w.Build.Context != lib ||
		w.Environment["FROM_FILE"] != "yes" || w.Volumes[0].Source != filepath.Join(lib, "cache") || w.Command[0] != "work" {
		t.Errorf("worker = %+v (build %+v, volumes %+v)", w, w.Build, w.Volumes)
	}
	if p.Service("common") != nil || p.Service("root") != nil {
		t.Errorf("services of an extended file are not part of the project")
	}
}

func TestExtendsAndIncludeErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  string
	}{
		{"extends cycle", map[string]string{"compose.yaml": "services:\n  a: {extends: b, image: x}\n  b: {extends: a, image: y}\n"}, "extends cycle"},
		{"extends missing service", map[string]string{"compose.yaml": "services:\n  a: {extends: nope}\n"}, `compose.yaml:2:16: services.a.extends: service "nope" to extend is not defined`},
		{"extends missing file", map[string]string{"compose.yaml": "services:\n  a:\n    extends: {service: b, file: gone.yaml}\n"}, "compose.yaml:3:33: services.a.extends.file: cannot read gone.yaml"},
		{"include cycle", map[string]string{"compose.yaml": "include: [a.yaml]\nservices: {w: {image: x}}\n", "a.yaml": "include: [a.yaml]\n"}, "include cycle"},
		{"include conflict", map[string]string{"compose.yaml": "include: [a.yaml]\nservices: {w: {image: x}}\n", "a.yaml": "services:\n  w: {image: y}\n"}, `service "w" is also defined in the included file`},
		{"error in an included file", map[string]string{"compose.yaml": "include: [sub/a.yaml]\n", "sub/a.yaml": "services:\n  w: {image: y, scale: many}\n"}, "sub/a.yaml:2:24: services.w.scale"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			within(t, 10e9, func() {
				dir := writeDir(t, tc.files)
				_, err := loadFiles(t, dir, "compose.yaml")
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("err = %v, want %q", err, tc.want)
				}
			})
		})
	}
}

func TestInclude(t *testing.T) {
	dir := writeDir(t, map[string]string{
		"compose.yaml":        "include:\n  - db/compose.yaml\n  - path: [cache/compose.yaml, cache/override.yaml]\nservices:\n  web: {image: w, depends_on: [db, cache]}\n",
		"db/compose.yaml":     "services:\n  db:\n    image: postgres\n    env_file: db.env\n    volumes: [pg:/var/lib/postgresql/data]\nvolumes:\n  pg: {}\n",
		"db/db.env":           "POSTGRES_PASSWORD=x\n",
		"cache/compose.yaml":  "services:\n  cache: {image: redis:6}\n",
		"cache/override.yaml": "services:\n  cache: {image: redis:7}\n",
	})
	p, err := loadFiles(t, dir, "compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if db := p.Service("db"); db == nil || db.Environment["POSTGRES_PASSWORD"] != "x" || p.Volume("pg") == nil {
		t.Errorf("db = %+v", db)
	}
	if c := p.Service("cache"); c == nil || c.Image != "redis:7" {
		t.Errorf("cache = %+v", c)
	}
	if w := p.Service("web"); len(w.DependsOn) != 2 {
		t.Errorf("web = %+v", w)
	}
}

// TestMergedFilePathsRelativeToFirst: as in Docker Compose, relative paths in a second -f file
// resolve against the first file's folder.
func TestMergedFilePathsRelativeToFirst(t *testing.T) {
	dir := writeDir(t, map[string]string{
		"compose.yaml":     "services:\n  web: {image: x}\n",
		"ci/override.yaml": "services:\n  web:\n    volumes: [./src:/src]\n    build: ./app\n",
	})
	p, err := loadFiles(t, dir, "compose.yaml", "ci/override.yaml")
	if err != nil {
		t.Fatal(err)
	}
	w := p.Service("web")
	if w.Volumes[0].Source != filepath.Join(dir, "src") || w.Build.Context != filepath.Join(dir, "app") {
		t.Errorf("volume %s, build %s", w.Volumes[0].Source, w.Build.Context)
	}
}

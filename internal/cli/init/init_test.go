package initcmd

import (
	"bytes"
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"gopkg.in/yaml.v3"

	"github.com/devtool/devtool/internal/cmdutil"
	"github.com/devtool/devtool/internal/iostreams"
	"github.com/devtool/devtool/internal/manifest"
)

// copySample copies testdata/<name> into a fresh folder named after the sample.
func copySample(t *testing.T, name string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), name)
	src := filepath.Join("testdata", name)
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

func newOpts(dir string) (*Options, *bytes.Buffer) {
	ios, _, _, errOut := iostreams.Test()
	return &Options{IO: ios, WorkDir: dir, File: "devtool.yml"}, errOut
}

// loadWritten loads the written manifest with the manifest loader and checks it against the schema.
func loadWritten(t *testing.T, dir string) *manifest.Manifest {
	t.Helper()
	m, err := manifest.Load(manifest.LoadOptions{Dir: dir, Environ: map[string]string{}})
	if err != nil {
		t.Fatalf("the written manifest does not load: %v", err)
	}
	if m.Inferred || m.File != filepath.Join(dir, "devtool.yml") {
		t.Fatalf("loaded %s (inferred %v), not the written devtool.yml", m.File, m.Inferred)
	}
	if len(m.Warnings) > 0 {
		t.Errorf("warnings: %q", m.Warnings)
	}
	validateSchema(t, m.Raw)
	return m
}

func validateSchema(t *testing.T, data []byte) {
	t.Helper()
	f, err := os.Open("../../../docs/schema/devtool.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("devtool.schema.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("devtool.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := yaml.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	j, _ := json.Marshal(v)
	inst, _ := jsonschema.UnmarshalJSON(bytes.NewReader(j))
	if err := s.Validate(inst); err != nil {
		t.Errorf("written manifest is not valid per the schema: %v\n%s", err, data)
	}
}

func commandsOf(m *manifest.Manifest) []string {
	var out []string
	for _, c := range m.Deploy.Commands {
		out = append(out, c.Command)
	}
	return out
}

func TestInitComposeFolder(t *testing.T) {
	dir := copySample(t, "compose")
	opts, errOut := newOpts(dir)
	if err := run(context.Background(), opts); err != nil {
		t.Fatal(err)
	}
	m := loadWritten(t, dir)
	if len(m.Deploy.Compose) != 1 || m.Deploy.Compose[0].File != filepath.Join(dir, "docker-compose.yml") {
		t.Errorf("deploy.compose = %+v", m.Deploy.Compose)
	}
	if len(m.Build) != 0 || len(m.Deploy.Commands) != 0 {
		t.Errorf("Compose builds its own images; build = %+v, commands = %v", m.Build, commandsOf(m))
	}
	if !strings.Contains(errOut.String(), "Wrote devtool.yml") {
		t.Errorf("stderr = %q", errOut.String())
	}
}

func TestInitDockerfilesAndManifests(t *testing.T) {
	dir := copySample(t, "docker-k8s")
	opts, _ := newOpts(dir)
	if err := run(context.Background(), opts); err != nil {
		t.Fatal(err)
	}
	m := loadWritten(t, dir)
	got := map[string][2]string{}
	for _, b := range m.Build {
		got[b.Service] = [2]string{b.Build.Context, b.Build.Dockerfile}
	}
	want := map[string][2]string{
		"api":     {filepath.Join(dir, "api"), "Dockerfile"},
		"web":     {filepath.Join(dir, "web"), "Dockerfile"},
		"web-dev": {filepath.Join(dir, "web"), "Dockerfile.dev"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("build = %v, want %v", got, want)
	}
	if cmds := commandsOf(m); !reflect.DeepEqual(cmds, []string{"kubectl apply -f k8s"}) {
		t.Errorf("commands = %q", cmds)
	}
}

func TestInitHelmChart(t *testing.T) {
	dir := copySample(t, "helm")
	opts, _ := newOpts(dir)
	if err := run(context.Background(), opts); err != nil {
		t.Fatal(err)
	}
	m := loadWritten(t, dir)
	cmds := commandsOf(m)
	if !reflect.DeepEqual(cmds, []string{"helm upgrade --install my-shop ./chart"}) {
		t.Errorf("commands = %q (the chart's templates must not count as plain manifests)", cmds)
	}
	if args := strings.Fields(cmds[0]); len(args) != 5 {
		t.Errorf("command does not split into 5 words: %q", args)
	}
}

func TestInitRootDockerfileNamesTheFolder(t *testing.T) {
	root := filepath.Join(t.TempDir(), "My_Service")
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "Dockerfile"), []byte("FROM x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	opts, _ := newOpts(root)
	if err := run(context.Background(), opts); err != nil {
		t.Fatal(err)
	}
	m := loadWritten(t, root)
	if len(m.Build) != 1 || m.Build[0].Service != "my-service" || m.Build[0].Build.Context != root {
		t.Errorf("build = %+v", m.Build)
	}
}

func TestInitPromptPicksOne(t *testing.T) {
	dir := copySample(t, "docker-k8s")
	if err := os.MkdirAll(filepath.Join(dir, "helm", "app"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "helm", "app", "Chart.yaml"), []byte("name: app\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ios, in, _, errOut := iostreams.Test()
	ios.SetTTY(true)
	in.WriteString("3\n") // 1 all, 2 kubectl, 3 helm
	opts := &Options{IO: ios, WorkDir: dir, File: "devtool.yml"}
	if err := run(context.Background(), opts); err != nil {
		t.Fatal(err)
	}
	m := loadWritten(t, dir)
	if cmds := commandsOf(m); !reflect.DeepEqual(cmds, []string{"helm upgrade --install app ./helm/app"}) {
		t.Errorf("commands = %q\nprompt:\n%s", cmds, errOut)
	}
}

func TestInitExistingFile(t *testing.T) {
	dir := copySample(t, "compose")
	if err := os.WriteFile(filepath.Join(dir, "devtool.yml"), []byte("deploy: [keep me]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	opts, _ := newOpts(dir)
	err := run(context.Background(), opts)
	if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "devtool.yml")+" already exists") || !strings.Contains(cmdutil.Hint(err), "--replace") {
		t.Fatalf("err = %v (hint %q)", err, cmdutil.Hint(err))
	}
	if data, _ := os.ReadFile(filepath.Join(dir, "devtool.yml")); string(data) != "deploy: [keep me]\n" {
		t.Errorf("existing file changed: %q", data)
	}
	opts.Replace = true
	if err := run(context.Background(), opts); err != nil {
		t.Fatal(err)
	}
	if m := loadWritten(t, dir); len(m.Deploy.Compose) != 1 {
		t.Errorf("replaced manifest = %+v", m.Deploy)
	}
}

func TestInitOtherFile(t *testing.T) {
	dir := copySample(t, "helm")
	opts, _ := newOpts(dir)
	opts.File = ".devtool/devtool.yml"
	if err := run(context.Background(), opts); err != nil {
		t.Fatal(err)
	}
	m, err := manifest.Load(manifest.LoadOptions{Dir: dir, Environ: map[string]string{}})
	if err != nil || m.File != filepath.Join(dir, ".devtool", "devtool.yml") {
		t.Fatalf("load: %v %+v", err, m)
	}
	// A manifest under .devtool/ runs in the folder above, where init looked.
	if m.Dir != dir || !reflect.DeepEqual(commandsOf(m), []string{"helm upgrade --install my-shop ./chart"}) {
		t.Errorf("dir %s, commands %q", m.Dir, commandsOf(m))
	}
}

func TestInitNothingFound(t *testing.T) {
	opts, _ := newOpts(t.TempDir())
	err := run(context.Background(), opts)
	if err == nil || !strings.Contains(err.Error(), "found nothing to deploy") || cmdutil.Hint(err) == "" {
		t.Fatalf("err = %v", err)
	}
}

func TestFlags(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		v1      bool
		file    string
		replace bool
		wantErr string
	}{
		{args: nil, file: "devtool.yml"},
		{args: []string{"-v1"}, v1: true, file: "devtool.yml"},
		{args: []string{"--v1"}, v1: true, file: "devtool.yml"},
		{args: []string{"-v", "1", "--workload", "api"}, v1: true, file: "devtool.yml"},
		{args: []string{"--file", "x.yml", "--replace", "--namespace", "ns", "--context", "c"}, file: "x.yml", replace: true},
		{args: []string{"-v2"}, wantErr: "the only init flow version is 1"},
		{args: []string{"--workload", "api"}, wantErr: "--workload needs -v1"},
		{args: []string{"--file", ""}, wantErr: "--file must not be empty"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			ios, _, _, _ := iostreams.Test()
			var got *Options
			cmd := NewCmd(&cmdutil.Factory{IOStreams: ios, WorkDir: "/w"}, func(_ context.Context, o *Options) error {
				got = o
				return nil
			})
			cmd.SetArgs(tc.args)
			cmd.SetOut(&bytes.Buffer{})
			cmd.SetErr(&bytes.Buffer{})
			err := cmd.Execute()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.V1 != tc.v1 || got.File != tc.file || got.Replace != tc.replace {
				t.Errorf("options = %+v", got)
			}
		})
	}
}

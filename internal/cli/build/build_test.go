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
	"github.com/devtool/devtool/internal/composeenv"
	"github.com/devtool/devtool/internal/environment"
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
	if err != nil || o.Tag != "r/x:1" || len(o.Env.Files) != 1 || o.Env.Files[0] != "sub/Dockerfile.dev" {
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

type fakeBuilder struct{ refs []string }

func (b *fakeBuilder) Name() string { return "fake" }
func (b *fakeBuilder) Build(_ context.Context, req build.Request) (build.Result, error) {
	b.refs = append(b.refs, req.Tags[0])
	return build.Result{Ref: req.Tags[0]}, nil
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// runBuild runs `devtool build args...` in dir with a fake builder and returns the refs built.
func runBuild(t *testing.T, dir string, args ...string) ([]string, string, error) {
	t.Helper()
	ios, _, out, _ := iostreams.Test()
	f := &cmdutil.Factory{IOStreams: ios, Getenv: func(string) string { return "" }, WorkDir: dir,
		Target: func(k cmdutil.KubeFlags) (*cmdutil.Target, error) {
			if k.Context != "" {
				return nil, errors.New("no such context " + k.Context)
			}
			return &cmdutil.Target{Namespace: "dev", Registry: "127.0.0.1:1"}, nil
		}}
	fb := &fakeBuilder{}
	cmd := NewCmd(f, func(ctx context.Context, o *Options) error {
		o.SelectBuilder = func(context.Context, build.SelectOptions) (build.Builder, error) { return fb, nil }
		return run(ctx, o)
	})
	cmd.SetArgs(append(args, "--no-cache"))
	cmd.SetOut(new(strings.Builder))
	cmd.SetErr(new(strings.Builder))
	err := cmd.Execute()
	return fb.refs, out.String(), err
}

// TestBuildReadsTheManifestBuildSection: `devtool build` builds a devtool.yml's build section,
// named after the environment (the repository's origin, also in a subfolder), and the names are
// the ones deploy computes for the same files.
func TestBuildReadsTheManifestBuildSection(t *testing.T) {
	repo := filepath.Join(t.TempDir(), "checkout")
	write(t, filepath.Join(repo, ".git", "config"), "[remote \"origin\"]\n\turl = https://example.test/team/shop.git\n")
	sub := filepath.Join(repo, "app")
	write(t, filepath.Join(sub, "api", "Dockerfile"), "FROM scratch\n")
	write(t, filepath.Join(sub, "devtool.yml"), "build:\n  api: api\ndeploy:\n  commands: [echo hi]\n")
	refs, out, err := runBuild(t, sub)
	if err != nil {
		t.Fatal(err)
	}
	if len(refs) != 1 || !strings.HasPrefix(refs[0], "127.0.0.1:1/dev/shop-api:") || !strings.Contains(out, refs[0]) {
		t.Fatalf("built %v, printed %q", refs, out)
	}
	refs2, _, err := runBuild(t, sub, "--name", "Other")
	if err != nil || len(refs2) != 1 || !strings.HasPrefix(refs2[0], "127.0.0.1:1/dev/other-api:") {
		t.Fatalf("--name: %v %v", refs2, err)
	}
	if _, _, err := runBuild(t, sub, "nope"); err == nil {
		t.Fatal("an unknown image name is accepted")
	}
}

// TestBuildAndDeployNameImagesAlike: a Compose file in a repository subfolder gets the same
// image name from build as from deploy (its dry run computes the names a deploy uses).
func TestBuildAndDeployNameImagesAlike(t *testing.T) {
	repo := filepath.Join(t.TempDir(), "checkout")
	write(t, filepath.Join(repo, ".git", "config"), "[remote \"origin\"]\n\turl = git@example.test:team/shop.git\n")
	sub := filepath.Join(repo, "app")
	write(t, filepath.Join(sub, "web", "Dockerfile"), "FROM scratch\n")
	write(t, filepath.Join(sub, "compose.yml"), "services:\n  web:\n    build: web\n")
	refs, _, err := runBuild(t, sub)
	if err != nil || len(refs) != 1 {
		t.Fatalf("build: %v %v", refs, err)
	}
	env, err := environment.Load(environment.Options{Dir: sub})
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Compose.ResolveImages(context.Background(), composeenv.ImageOptions{Registry: "127.0.0.1:1", Namespace: "dev", DryRun: true}); err != nil {
		t.Fatal(err)
	}
	if got := env.Compose.Project.Service("web").Image; got != refs[0] {
		t.Fatalf("deploy names the image %q, build %q", got, refs[0])
	}
}

func TestBuildRefusesABadContext(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "Dockerfile"), "FROM scratch\n")
	write(t, filepath.Join(dir, "compose.yml"), "services:\n  web:\n    build: .\n")
	for _, args := range [][]string{{"--context", "typo"}, {"--context", "typo", "-f", "Dockerfile", "--tag", "r/x:1"}} {
		if _, _, err := runBuild(t, dir, args...); err == nil || !strings.Contains(err.Error(), "typo") {
			t.Errorf("%v: err %v", args, err)
		}
	}
}

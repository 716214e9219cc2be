//go:build integration

package build_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/devtool/devtool/internal/build"
	buildcmd "github.com/devtool/devtool/internal/cli/build"
	"github.com/devtool/devtool/internal/cmdutil"
	"github.com/devtool/devtool/internal/iostreams"
)

func write(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for n, c := range files {
		p := filepath.Join(dir, n)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// runBuild runs `devtool build args...` in dir against the test buildkitd and registry.
func runBuild(t *testing.T, dir string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	return runBuildEnv(t, dir, map[string]string{
		build.EnvBuildKitHost: strings.TrimPrefix(build.HarnessBuildKit(t), "tcp://"), // HOST:PORT, as the spec writes it
		build.EnvRegistry:     build.HarnessRegistry(),
		build.EnvDockerHost:   "unix:///nonexistent/docker.sock",
	}, args...)
}

// runBuildEnv runs `devtool build args...` in dir with the environment vars.
func runBuildEnv(t *testing.T, dir string, vars map[string]string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	ios, _, out, errOut := iostreams.Test()
	f := &cmdutil.Factory{IOStreams: ios, Getenv: func(k string) string { return vars[k] }, WorkDir: dir,
		Target: func(k cmdutil.KubeFlags) (*cmdutil.Target, error) { return &cmdutil.Target{Namespace: "team"}, nil }}
	cmd := buildcmd.NewCmd(f, nil)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	cmd.SetArgs(args)
	cmd.SetContext(context.Background())
	err = cmd.Execute()
	return out.String(), errOut.String(), err
}

func TestDevtoolBuildCompose(t *testing.T) {
	reg := build.HarnessRegistry()
	_ = build.HarnessBuildKit(t)
	dir := t.TempDir()
	write(t, dir, map[string]string{
		"compose.yml": `services:
  web:
    build:
      context: ./web
      args:
        VERSION: "1.0"
  api:
    image: ` + reg + `/explicit/api:v1
    build: ./api
  db:
    image: postgres:16
`,
		"web/Dockerfile": "FROM scratch\nARG VERSION\nCOPY index.html /www/index.html\nLABEL v=$VERSION\n",
		"web/index.html": "<h1>hi</h1>\n",
		"api/Dockerfile": "FROM " + build.HarnessBusybox() + "\nCOPY . /api/\n",
		"api/main.sh":    "echo api\n",
	})
	stdout, stderr, err := runBuild(t, dir)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	refs := strings.Fields(stdout)
	if len(refs) != 2 || !strings.HasPrefix(refs[0], reg+"/team/"+filepath.Base(dir)+"-web:") || refs[1] != reg+"/explicit/api:v1" {
		t.Fatalf("stdout %q", stdout)
	}
	if f := build.HarnessImageFiles(t, refs[0]); f["www/index.html"] != "<h1>hi</h1>\n" {
		t.Errorf("web files %v", f)
	}
	if f := build.HarnessImageFiles(t, refs[1]); f["api/main.sh"] != "echo api\n" {
		t.Errorf("api files %v", f)
	}

	// Unchanged: web (content-hash name) is skipped, api (explicit name) is built again.
	stdout2, stderr2, err := runBuild(t, dir, "web")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr2)
	}
	if strings.TrimSpace(stdout2) != refs[0] || !strings.Contains(stderr2, "unchanged") {
		t.Errorf("second build of web: stdout %q stderr %q", stdout2, stderr2)
	}
	if _, _, err := runBuild(t, dir, "db"); err == nil || !strings.Contains(err.Error(), "in the build section") {
		t.Errorf("db: %v", err)
	}
}

func TestDevtoolBuildDockerfileWithSecret(t *testing.T) {
	reg := build.HarnessRegistry()
	_ = build.HarnessBuildKit(t)
	dir := t.TempDir()
	write(t, dir, map[string]string{
		"Dockerfile.dev": "# syntax=docker/dockerfile:1\nFROM " + build.HarnessBusybox() + "\n" +
			"RUN --mount=type=secret,id=npm cp /run/secrets/npm /copied\n",
		"npmrc": "token=abc\n",
	})
	ref := reg + "/direct/app:dev"
	stdout, stderr, err := runBuild(t, dir, "-f", "Dockerfile.dev", "--tag", ref, "--secret", "id=npm,src=npmrc")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	if strings.TrimSpace(stdout) != ref {
		t.Fatalf("stdout %q", stdout)
	}
	if f := build.HarnessImageFiles(t, ref); f["copied"] != "token=abc\n" {
		t.Errorf("files: copied=%q", f["copied"])
	}
}

// `devtool build --secret` on the Docker backend (no BUILDKIT_HOST) builds with the daemon's BuildKit
// instead of refusing the secret. The private daemon has no network for RUN steps, which the command
// cannot turn off, so the Dockerfile has none (the secret reaching RUN is TestDockerMultiStageSecretTarget).
func TestDevtoolBuildSecretOnDocker(t *testing.T) {
	reg := build.HarnessRegistry()
	dir := t.TempDir()
	write(t, dir, map[string]string{
		"Dockerfile": "FROM " + build.HarnessBusybox() + " AS base\nFROM scratch AS app\nCOPY --from=base /bin/busybox /busybox\nCOPY app.txt /\n",
		"app.txt":    "app\n",
		"npmrc":      "token=abc\n",
	})
	ref := reg + "/direct/docker-app:dev"
	stdout, stderr, err := runBuildEnv(t, dir, map[string]string{
		build.EnvRegistry:   reg,
		build.EnvDockerHost: build.HarnessDocker(t),
	}, "-f", "Dockerfile", "--tag", ref, "--secret", "id=npm,src=npmrc")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	if strings.TrimSpace(stdout) != ref {
		t.Fatalf("stdout %q", stdout)
	}
	if !strings.Contains(stderr, "#") || strings.Contains(stderr, "Step 1/") {
		t.Errorf("not built with BuildKit:\n%s", stderr)
	}
	f := build.HarnessImageFiles(t, ref)
	if f["app.txt"] != "app\n" || f["busybox"] == "" || len(f) != 2 {
		t.Errorf("%d files, app.txt=%q", len(f), f["app.txt"])
	}
}

//go:build integration

package build

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moby/buildkit/client"

	"github.com/devtool/devtool/internal/compose"
)

func bk() *BuildKit { return &BuildKit{Addr: env.buildkit} }

// A "# syntax=" line must not make an offline build fail: the built-in frontend does the work.
func TestBuildKitBuildAndPush(t *testing.T) {
	needDaemons(t)
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"Dockerfile": "# syntax=docker/dockerfile:1.7\nFROM scratch\nARG GREETING\nCOPY hello.txt /hello.txt\nLABEL greeting=$GREETING\n",
		"hello.txt":  "hi from buildkit\n",
	})
	ref := env.regHost + "/it/bk-hello:1"
	var progress bytes.Buffer
	res, err := bk().Build(context.Background(), Request{Context: dir, Tags: []string{ref}, Push: true,
		Args: map[string]string{"GREETING": "salut"}, Progress: &progress, ProgressMode: "plain"})
	if err != nil {
		t.Fatalf("%v\n%s", err, progress.String())
	}
	if res.Digest == "" || res.Digest != digestOf(t, ref) {
		t.Fatalf("builder said %q, registry has %s", res.Digest, digestOf(t, ref))
	}
	files, cf := imageFiles(t, ref)
	if files["hello.txt"] != "hi from buildkit\n" || cf.Config.Labels["greeting"] != "salut" {
		t.Fatalf("image content %v labels %v", files, cf.Config.Labels)
	}
	if !strings.Contains(progress.String(), "COPY hello.txt") {
		t.Errorf("plain progress has no COPY step:\n%s", progress.String())
	}
}

// Multi-stage from a locally made base image, a secret used by RUN, a target stage.
func TestBuildKitMultiStageSecretTarget(t *testing.T) {
	needDaemons(t)
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"Dockerfile": "FROM " + env.busyboxBase + " AS prep\n" +
			"COPY in.txt /in/in.txt\n" +
			"RUN --mount=type=secret,id=token mkdir /out && cp /in/in.txt /out/ && cat /run/secrets/token | tr a-z A-Z > /out/token\n" +
			"FROM scratch AS final\nCOPY --from=prep /out/ /\n" +
			"FROM final AS other\nCOPY in.txt /other\n",
		"in.txt": "input\n",
	})
	secret := filepath.Join(t.TempDir(), "token")
	writeFiles(t, filepath.Dir(secret), map[string]string{"token": "s3cret"})
	ref := env.regHost + "/it/bk-multi:1"
	var progress bytes.Buffer
	_, err := bk().Build(context.Background(), Request{Context: dir, Tags: []string{ref}, Push: true, Target: "final",
		Secrets: []Secret{{ID: "token", Src: secret}}, Progress: &progress, ProgressMode: "plain"})
	if err != nil {
		t.Fatalf("%v\n%s", err, progress.String())
	}
	files, _ := imageFiles(t, ref)
	if files["in.txt"] != "input\n" || files["token"] != "S3CRET" {
		t.Fatalf("image files %v", files)
	}
	if _, ok := files["other"]; ok {
		t.Errorf("target final built the later stage too")
	}
	if strings.Contains(progress.String(), "s3cret") {
		t.Errorf("the secret appears in the progress output")
	}
}

// Cache export to a registry, then import into a daemon whose local cache was emptied.
func TestBuildKitCacheExportImport(t *testing.T) {
	needDaemons(t)
	dir := t.TempDir()
	stamp := time.Now().Format(time.RFC3339Nano)
	writeFiles(t, dir, map[string]string{
		"Dockerfile": "FROM " + env.busyboxBase + "\nRUN echo " + stamp + " > /stamp && sleep 1\n",
	})
	cacheRef := env.regHost + "/it/cache:buildcache"
	ctx := context.Background()
	var p1 bytes.Buffer
	if _, err := bk().Build(ctx, Request{Context: dir, Tags: []string{env.regHost + "/it/cached:1"}, Push: true,
		ExportCache: cacheRef, Progress: &p1, ProgressMode: "plain"}); err != nil {
		t.Fatalf("%v\n%s", err, p1.String())
	}
	if digestOf(t, cacheRef) == "" {
		t.Fatal("no cache manifest pushed")
	}
	pruneAll(t)
	var p2 bytes.Buffer
	if _, err := bk().Build(ctx, Request{Context: dir, Tags: []string{env.regHost + "/it/cached:2"}, Push: true,
		CacheFrom: []string{cacheRef}, Progress: &p2, ProgressMode: "plain"}); err != nil {
		t.Fatalf("%v\n%s", err, p2.String())
	}
	if !regexpCachedRun(p2.String()) {
		t.Fatalf("the RUN step was not taken from the imported cache:\n%s", p2.String())
	}
	f1, _ := imageFiles(t, env.regHost+"/it/cached:1")
	f2, _ := imageFiles(t, env.regHost+"/it/cached:2")
	if f1["stamp"] == "" || f1["stamp"] != f2["stamp"] {
		t.Errorf("stamps differ: %q vs %q", f1["stamp"], f2["stamp"])
	}
}

func regexpCachedRun(progress string) bool {
	for _, l := range strings.Split(progress, "\n") {
		if strings.Contains(l, "RUN echo") {
			// the vertex line is followed by "#N CACHED"; check the step's number
			fields := strings.Fields(l)
			if len(fields) > 0 && strings.Contains(progress, fields[0]+" CACHED") {
				return true
			}
		}
	}
	return false
}

// pruneAll empties the daemon's local build cache (what buildctl prune --all does).
func pruneAll(t *testing.T) {
	t.Helper()
	c, err := bk().client(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Prune(context.Background(), nil, client.PruneAll); err != nil {
		t.Fatal(err)
	}
}

// The content-hash skip: a second EnsureImages of an unchanged context builds nothing; a change builds.
func TestContentHashSkip(t *testing.T) {
	needDaemons(t)
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"Dockerfile":    "FROM scratch\nCOPY . /app/\n",
		"main.txt":      "v1\n",
		".dockerignore": "*.tmp\n",
	})
	opts := EnsureOptions{Builder: bk(), Registry: env.regHost, Namespace: "ns", Name: "proj"}
	images := []Image{{Service: "web", Build: &compose.Build{Context: dir, Dockerfile: "Dockerfile"}}}
	ctx := context.Background()
	r1, err := EnsureImages(ctx, opts, images)
	if err != nil {
		t.Fatal(err)
	}
	if r1["web"].Skipped || !strings.HasPrefix(r1["web"].Ref, env.regHost+"/ns/proj-web:") {
		t.Fatalf("first build: %+v", r1)
	}
	writeFiles(t, dir, map[string]string{"scratch.tmp": "ignored"})
	start := time.Now()
	r2, err := EnsureImages(ctx, opts, images)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("unchanged rebuild took %v", time.Since(start)) // reported, never asserted
	if !r2["web"].Skipped || r2["web"].Ref != r1["web"].Ref {
		t.Fatalf("unchanged (ignored file added): %+v, want skipped %s", r2, r1["web"].Ref)
	}
	writeFiles(t, dir, map[string]string{"main.txt": "v2\n"})
	r3, err := EnsureImages(ctx, opts, images)
	if err != nil {
		t.Fatal(err)
	}
	if r3["web"].Skipped || r3["web"].Ref == r1["web"].Ref {
		t.Fatalf("changed: %+v", r3)
	}
	files, _ := imageFiles(t, r3["web"].Ref)
	if files["app/main.txt"] != "v2\n" {
		t.Errorf("files %v", files)
	}
	if _, ok := files["app/scratch.tmp"]; ok {
		t.Errorf(".dockerignore'd file was sent to the builder")
	}
}

// Select with DOCKER_HOST only picks the Docker daemon; with BUILDKIT_HOST (HOST:PORT) BuildKit.
func TestSelectReal(t *testing.T) {
	host := dockerd(t)
	vars := map[string]string{EnvDockerHost: host}
	getenv := func(k string) string { return vars[k] }
	b, err := Select(context.Background(), SelectOptions{Getenv: getenv})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := b.(*Docker); !ok {
		t.Errorf("got %s", b.Name())
	}
	vars[EnvBuildKitHost] = strings.TrimPrefix(env.buildkit, "tcp://")
	vars[EnvKeepaliveTime] = "1000"
	if b, err = Select(context.Background(), SelectOptions{Getenv: getenv}); err != nil {
		t.Fatal(err)
	}
	if k, ok := b.(*BuildKit); !ok || k.Addr != env.buildkit || len(k.DialOptions) != 1 {
		t.Errorf("got %s", b.Name())
	}
}

func TestMainHarnessBinaries(t *testing.T) {
	needDaemons(t)
	if _, err := os.Stat(env.buildctl); err != nil {
		t.Errorf("buildctl: %v", err)
	}
}

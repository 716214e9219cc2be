//go:build integration

package build

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"testing"
	"time"

	"github.com/devtool/devtool/internal/compose"
)

// BenchmarkBuildVsBuildctl builds the same Dockerfile with devtool's BuildKit builder and with
// `buildctl build` against the same daemon, in the same run, each with a fresh stamp file so neither
// hits the cache for the steps after it. It reports the ratio devtool/buildctl and the time of an
// unchanged rebuild (content-hash skip). Run:
//
//	go test -tags integration -run '^$' -bench BuildVsBuildctl -benchtime 5x ./internal/build/
func BenchmarkBuildVsBuildctl(b *testing.B) {
	needDaemons(b)
	dir := b.TempDir()
	df := "FROM " + env.busyboxBase + " AS prep\nCOPY stamp /stamp\nRUN mkdir /out && cp /stamp /out/ && ls -la / > /out/listing\n" +
		"FROM scratch\nCOPY --from=prep /out/ /\n"
	ctx := context.Background()
	var devtool, buildctl time.Duration
	for i := 0; i < b.N; i++ {
		stamp := fmt.Sprintf("%d-%d", time.Now().UnixNano(), i)
		writeFiles(b, dir, map[string]string{"Dockerfile": df, "stamp": "devtool " + stamp})
		start := time.Now()
		if _, err := bk().Build(ctx, Request{Context: dir, Tags: []string{env.regHost + "/bench/devtool:latest"}, Push: true}); err != nil {
			b.Fatal(err)
		}
		devtool += time.Since(start)

		writeFiles(b, dir, map[string]string{"stamp": "buildctl " + stamp})
		start = time.Now()
		cmd := exec.Command(env.buildctl, "--addr", env.buildkit, "build", "--frontend", "dockerfile.v0",
			"--local", "context="+dir, "--local", "dockerfile="+dir, "--progress", "quiet",
			"--output", "type=image,name="+env.regHost+"/bench/buildctl:latest,push=true,registry.insecure=true")
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			b.Fatalf("buildctl: %v\n%s", err, out.String())
		}
		buildctl += time.Since(start)
	}
	b.ReportMetric(float64(devtool.Milliseconds())/float64(b.N), "devtool-ms/build")
	b.ReportMetric(float64(buildctl.Milliseconds())/float64(b.N), "buildctl-ms/build")
	b.ReportMetric(float64(devtool)/float64(buildctl), "devtool/buildctl")

	// Unchanged rebuild: the registry already has the content-hash tag.
	opts := EnsureOptions{Builder: bk(), Registry: env.regHost, Namespace: "bench", Name: "unchanged"}
	images := []Image{{Service: "app", Build: &compose.Build{Context: dir}}}
	if _, err := EnsureImages(ctx, opts, images); err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	const rounds = 5
	for i := 0; i < rounds; i++ {
		res, err := EnsureImages(ctx, opts, images)
		if err != nil || !res["app"].Skipped {
			b.Fatalf("unchanged rebuild not skipped: %+v %v", res, err)
		}
	}
	b.ReportMetric(float64(time.Since(start).Microseconds())/1000/rounds, "unchanged-rebuild-ms")
}

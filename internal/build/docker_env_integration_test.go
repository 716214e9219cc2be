//go:build integration

package build

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestSelectDockerFromEnv: the variables reach a real Docker daemon's builds through Select:
// with the keepalive variables set the build runs on the daemon's BuildKit over /grpc with
// keepalive pings on; with DOCKER_BUILDKIT=0 it runs on the classic builder, after a warning.
func TestSelectDockerFromEnv(t *testing.T) {
	host := dockerd(t)
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"Dockerfile": "FROM " + env.busyboxBase + "\nCOPY in.txt /in.txt\n",
		"in.txt":     "from select\n",
	})
	for _, c := range []struct {
		name     string
		vars     map[string]string
		classic  bool
		progress string
	}{
		{"buildkit with keepalive", map[string]string{EnvKeepaliveTime: "10000", EnvKeepaliveTimeout: "5000", EnvKeepalivePermitWithoutRPC: "true"}, false, ""},
		{"classic", map[string]string{EnvDockerBuildKit: "0"}, true, "Step 1/"},
	} {
		t.Run(c.name, func(t *testing.T) {
			vars := map[string]string{EnvDockerHost: host}
			for k, v := range c.vars {
				vars[k] = v
			}
			var warnings []string
			b, err := Select(context.Background(), SelectOptions{Getenv: func(k string) string { return vars[k] },
				Warn: func(s string) { warnings = append(warnings, s) }})
			if err != nil {
				t.Fatal(err)
			}
			d := b.(*Docker)
			defer d.Close()
			d.NetworkMode = "none"
			if c.classic != (len(warnings) == 1) {
				t.Errorf("warnings %q", warnings)
			}
			ref := env.regHost + "/it/select-" + strings.ReplaceAll(c.name, " ", "-") + ":1"
			var progress bytes.Buffer
			if _, err := d.Build(context.Background(), Request{Context: dir, Tags: []string{ref}, Push: true, Progress: &progress, ProgressMode: "plain"}); err != nil {
				t.Fatalf("%v\n%s", err, progress.String())
			}
			db, err := d.builder(context.Background())
			if err != nil || db.buildKit == c.classic {
				t.Errorf("built with BuildKit %v, want %v (%v)", db.buildKit, !c.classic, err)
			}
			if c.progress != "" && !strings.Contains(progress.String(), c.progress) {
				t.Errorf("progress lacks %q:\n%s", c.progress, progress.String())
			}
			if files, _ := imageFiles(t, ref); files["in.txt"] != "from select\n" {
				t.Errorf("files %v", files)
			}
		})
	}
}

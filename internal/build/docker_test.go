package build

import (
	"reflect"
	"strings"
	"testing"

	"github.com/docker/docker/api/types"
	dockerbuild "github.com/docker/docker/api/types/build"
	"github.com/moby/buildkit/client"
)

func TestBuilderFromPing(t *testing.T) {
	for _, tc := range []struct {
		name     string
		ping     types.Ping
		buildKit bool
		why      string
	}{
		{"announces BuildKit", types.Ping{APIVersion: "1.51", OSType: "linux", BuilderVersion: dockerbuild.BuilderBuildKit}, true, ""},
		// Docker 20.10 on Linux: BuildKit is there, though not the default builder
		{"Linux 20.10", types.Ping{APIVersion: "1.41", OSType: "linux"}, true, ""},
		{"Linux 20.10, classic default", types.Ping{APIVersion: "1.41", OSType: "linux", BuilderVersion: dockerbuild.BuilderV1}, true, ""},
		{"first API with BuildKit", types.Ping{APIVersion: "1.39", OSType: "linux"}, true, ""},
		{"no headers", types.Ping{}, true, ""},
		{"API 1.38", types.Ping{APIVersion: "1.38", OSType: "linux"}, false, "Engine API 1.38 is older than 1.39"},
		{"API 1.12", types.Ping{APIVersion: "1.12"}, false, "older than 1.39"},
		{"Windows", types.Ping{APIVersion: "1.47", OSType: "windows", BuilderVersion: dockerbuild.BuilderV1}, false, "Windows daemon"},
		{"Windows with BuildKit", types.Ping{APIVersion: "1.51", OSType: "windows", BuilderVersion: dockerbuild.BuilderBuildKit}, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := builderFromPing(tc.ping)
			if db.buildKit != tc.buildKit || !strings.Contains(db.why, tc.why) || (tc.buildKit && db.why != "") {
				t.Errorf("got %+v, want buildKit=%v why~%q", db, tc.buildKit, tc.why)
			}
		})
	}
}

// What a build on the Docker daemon's BuildKit asks of it, against a BuildKit daemon's, from the same request.
func TestDockerSolveOptions(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"Dockerfile": "FROM scratch\n", "secret": "x"})
	req := Request{Context: dir, Tags: []string{"127.0.0.1:5000/a:1", "127.0.0.1:5000/a:latest"}, Push: true,
		Target: "final", Args: map[string]string{"V": "1", "BUILDKIT_SYNTAX": "evil/frontend"},
		Secrets:     []Secret{{ID: "tok", Src: dir + "/secret"}},
		ExportCache: "127.0.0.1:5000/a:cache", CacheFrom: []string{"127.0.0.1:5000/a:cache", "registry.example/c:1"}}

	bkOpt, err := solveOptions(req, solveSpec{exporter: client.ExporterImage, push: true})
	if err != nil {
		t.Fatal(err)
	}
	classicStore := daemonBuilder{buildKit: true}
	spec, err := dockerSolveSpec(classicStore, "none", []string{"secret"})
	if err != nil {
		t.Fatal(err)
	}
	dOpt, err := solveOptions(req, spec)
	if err != nil {
		t.Fatal(err)
	}
	// Same frontend request on both, except the Docker daemon's extras.
	for k, v := range bkOpt.FrontendAttrs {
		if dOpt.FrontendAttrs[k] != v {
			t.Errorf("frontend attribute %s: docker %q, buildkit %q", k, dOpt.FrontendAttrs[k], v)
		}
	}
	if bkOpt.FrontendAttrs["target"] != "final" || bkOpt.FrontendAttrs["build-arg:V"] != "1" {
		t.Errorf("frontend attributes %v", bkOpt.FrontendAttrs)
	}
	if _, ok := bkOpt.FrontendAttrs["build-arg:BUILDKIT_SYNTAX"]; ok {
		t.Error("BUILDKIT_SYNTAX forwarded")
	}
	if dOpt.FrontendAttrs["force-network-mode"] != "none" || dOpt.FrontendAttrs["image-resolve-mode"] != "local" {
		t.Errorf("docker frontend attributes %v", dOpt.FrontendAttrs)
	}
	if len(bkOpt.Session) != 2 || len(dOpt.Session) != 2 { // auth and secrets
		t.Errorf("session attachables: buildkit %d, docker %d", len(bkOpt.Session), len(dOpt.Session))
	}
	if !reflect.DeepEqual(bkOpt.CacheImports, dOpt.CacheImports) || len(dOpt.CacheImports) != 2 ||
		dOpt.CacheImports[0].Attrs["registry.insecure"] != "true" || dOpt.CacheImports[1].Attrs["registry.insecure"] != "" {
		t.Errorf("cache imports: buildkit %v, docker %v", bkOpt.CacheImports, dOpt.CacheImports)
	}

	// Exports: BuildKit pushes itself; the Docker daemon keeps the image (the builder pushes it after).
	if e := bkOpt.Exports[0]; e.Type != "image" || e.Attrs["name"] != strings.Join(req.Tags, ",") ||
		e.Attrs["push"] != "true" || e.Attrs["registry.insecure"] != "true" {
		t.Errorf("buildkit export %+v", e)
	}
	if e := dOpt.Exports[0]; e.Type != "moby" || e.Attrs["name"] != strings.Join(req.Tags, ",") || e.Attrs["push"] != "" {
		t.Errorf("docker export %+v", e)
	}
	// Cache export: to the registry from BuildKit, inline from a daemon without the containerd image store.
	if c := bkOpt.CacheExports; len(c) != 1 || c[0].Type != "registry" || c[0].Attrs["ref"] != req.ExportCache || c[0].Attrs["mode"] != "max" {
		t.Errorf("buildkit cache export %+v", c)
	}
	if c := dOpt.CacheExports; len(c) != 1 || c[0].Type != "inline" {
		t.Errorf("docker cache export %+v", c)
	}
	// With the containerd image store the daemon's BuildKit exports to the registry like BuildKit does.
	spec, err = dockerSolveSpec(daemonBuilder{buildKit: true, containerdStore: true}, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	cOpt, err := solveOptions(req, spec)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(cOpt.CacheExports, bkOpt.CacheExports) || cOpt.Exports[0].Attrs["prefer-image-digest"] != "true" {
		t.Errorf("containerd store: cache %+v export %+v", cOpt.CacheExports, cOpt.Exports)
	}
	if _, ok := cOpt.FrontendAttrs["force-network-mode"]; ok {
		t.Errorf("default network forced: %v", cOpt.FrontendAttrs)
	}
}

func TestDockerSolveSpecNetwork(t *testing.T) {
	if s, err := dockerSolveSpec(daemonBuilder{buildKit: true}, "host", nil); err != nil ||
		s.frontendAttrs["force-network-mode"] != "host" || !reflect.DeepEqual(s.entitlements, []string{"network.host"}) {
		t.Errorf("host: %+v %v", s, err)
	}
	if _, err := dockerSolveSpec(daemonBuilder{buildKit: true}, "mynet", nil); err == nil || !strings.Contains(err.Error(), `"mynet"`) {
		t.Errorf("custom network: %v", err)
	}
}

package build

import (
	"context"
	"net/http"
	"net/http/httptest"
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

	bkOpt, err := solveOptions(context.Background(), req, solveSpec{exporter: client.ExporterImage, push: true})
	if err != nil {
		t.Fatal(err)
	}
	classicStore := daemonBuilder{buildKit: true}
	spec, err := dockerSolveSpec(classicStore, "none", []string{"secret"})
	if err != nil {
		t.Fatal(err)
	}
	dOpt, err := solveOptions(context.Background(), req, spec)
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
	cOpt, err := solveOptions(context.Background(), req, spec)
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

func TestDockerClassicFromEnv(t *testing.T) {
	for _, c := range []struct {
		v       string
		classic bool
		bad     bool
	}{
		{"", false, false}, {"1", false, false}, {"true", false, false}, {" 0 ", true, false}, {"0", true, false},
		{"false", true, false}, {"FALSE", true, false}, {"no", false, true}, {"2", false, true},
	} {
		classic, err := DockerClassicFromEnv(func(k string) string {
			if k == EnvDockerBuildKit {
				return c.v
			}
			return ""
		})
		if classic != c.classic || (err != nil) != c.bad || (err != nil && !strings.Contains(err.Error(), "DOCKER_BUILDKIT=")) {
			t.Errorf("DOCKER_BUILDKIT=%q: classic %v, err %v", c.v, classic, err)
		}
	}
}

// fakeDockerd answers the Engine API's /_ping on loopback, as a daemon with BuildKit does.
func fakeDockerd(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Api-Version", "1.45")
		w.Header().Set("Ostype", "linux")
		w.Header().Set("Builder-Version", "2")
		if strings.HasSuffix(r.URL.Path, "/_ping") {
			_, _ = w.Write([]byte("OK"))
			return
		}
		http.NotFound(w, r)
	}))
	t.Cleanup(srv.Close)
	return "tcp://" + strings.TrimPrefix(srv.URL, "http://")
}

// TestSelectDockerVariables: Select hands DOCKER_BUILDKIT and the keepalive variables to the
// Docker backend (with a warning for the classic builder), and refuses bad values naming the
// variable before it asks any daemon.
func TestSelectDockerVariables(t *testing.T) {
	host := fakeDockerd(t)
	for _, c := range []struct {
		name     string
		env      map[string]string
		classic  bool
		dialOpts int
		warn     string
		err      string
	}{
		{name: "defaults", env: map[string]string{}},
		{name: "classic", env: map[string]string{"DOCKER_BUILDKIT": "0"}, classic: true, warn: "DOCKER_BUILDKIT=0: Docker daemon at " + host + " builds with its classic builder: build secrets (--secret)"},
		{name: "buildkit asked", env: map[string]string{"DOCKER_BUILDKIT": "1"}},
		{name: "keepalive", env: map[string]string{EnvKeepaliveTime: "30000", EnvKeepalivePermitWithoutRPC: "true"}, dialOpts: 1},
		{name: "bad DOCKER_BUILDKIT", env: map[string]string{"DOCKER_BUILDKIT": "maybe"}, err: `DOCKER_BUILDKIT="maybe"`},
		{name: "bad time", env: map[string]string{EnvKeepaliveTime: "10s"}, err: `DEVTOOL_KEEPALIVE_CLIENT_TIME_MS="10s": want a number of milliseconds`},
		{name: "bad timeout", env: map[string]string{EnvKeepaliveTime: "1000", EnvKeepaliveTimeout: "-5"}, err: `DEVTOOL_KEEPALIVE_CLIENT_TIMEOUT_MS="-5"`},
		{name: "bad permit", env: map[string]string{EnvKeepalivePermitWithoutRPC: "sometimes"}, err: `DEVTOOL_KEEPALIVE_CLIENT_PERMIT_WITHOUT_STREAM="sometimes": want true or false`},
	} {
		t.Run(c.name, func(t *testing.T) {
			env := map[string]string{EnvDockerHost: host}
			for k, v := range c.env {
				env[k] = v
			}
			var warnings []string
			b, err := Select(context.Background(), SelectOptions{Getenv: func(k string) string { return env[k] },
				Warn: func(s string) { warnings = append(warnings, s) }})
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err %v, want %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			d, ok := b.(*Docker)
			if !ok {
				t.Fatalf("builder %T", b)
			}
			defer d.Close()
			if d.Classic != c.classic || len(d.DialOptions) != c.dialOpts {
				t.Errorf("classic %v, dial options %d", d.Classic, len(d.DialOptions))
			}
			if got := len(d.buildKitClientOpts(context.Background())); got != 2+c.dialOpts {
				t.Errorf("the daemon's BuildKit client has %d options, want %d", got, 2+c.dialOpts)
			}
			if (c.warn == "") != (len(warnings) == 0) || (c.warn != "" && !strings.Contains(warnings[0], c.warn)) {
				t.Errorf("warnings %q, want %q", warnings, c.warn)
			}
		})
	}
}

// TestClassicSecretHint: with DOCKER_BUILDKIT=0 a build secret is refused before the daemon is
// asked anything, and the hint says how to get BuildKit back.
func TestClassicSecretHint(t *testing.T) {
	d := &Docker{Host: "unix:///nonexistent.sock", Classic: true}
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"Dockerfile": "FROM scratch\n", "s": "x"})
	_, err := d.buildClassic(context.Background(), Request{Context: dir, Secrets: []Secret{{ID: "s", Src: dir + "/s"}}}, "asked")
	if err == nil || !strings.Contains(err.Error(), "unset DOCKER_BUILDKIT") || !strings.Contains(err.Error(), "BUILDKIT_HOST") {
		t.Errorf("err %v", err)
	}
}

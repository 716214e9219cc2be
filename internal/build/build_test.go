package build

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/devtool/devtool/internal/compose"
)

func writeFiles(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func tagOf(t *testing.T, req Request) string {
	t.Helper()
	tag, err := ContentTagContext(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	return tag
}

func TestContentTag(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"Dockerfile":          "FROM scratch\nCOPY . /\n",
		"app/main.go":         "package main\n",
		".dockerignore":       "node_modules\n*.log\n!keep.log\n",
		"node_modules/x/a.js": "x",
		"debug.log":           "1",
		"keep.log":            "k",
	})
	base := Request{Context: dir, Args: map[string]string{"A": "1"}}
	t0 := tagOf(t, base)
	if len(t0) != 24 || strings.Trim(t0, "0123456789abcdef") != "" {
		t.Fatalf("tag %q is not 24 hex characters", t0)
	}
	if again := tagOf(t, base); again != t0 {
		t.Fatalf("unchanged context: %s then %s", t0, again)
	}

	// Ignored files do not change the tag.
	writeFiles(t, dir, map[string]string{"node_modules/x/a.js": "changed", "debug.log": "2", "node_modules/new.js": "n"})
	if got := tagOf(t, base); got != t0 {
		t.Errorf("an ignored file changed the tag")
	}

	for _, tc := range []struct {
		name   string
		change func(t *testing.T) Request
	}{
		{"kept file (exception)", func(t *testing.T) Request { writeFiles(t, dir, map[string]string{"keep.log": "k2"}); return base }},
		{"source file", func(t *testing.T) Request {
			writeFiles(t, dir, map[string]string{"app/main.go": "package main // 2\n"})
			return base
		}},
		{"new file", func(t *testing.T) Request {
			writeFiles(t, dir, map[string]string{"app/util.go": "package main\n"})
			return base
		}},
		{"mode", func(t *testing.T) Request {
			if err := os.Chmod(filepath.Join(dir, "app/util.go"), 0o755); err != nil {
				t.Fatal(err)
			}
			return base
		}},
		{"dockerfile", func(t *testing.T) Request {
			writeFiles(t, dir, map[string]string{"Dockerfile": "FROM scratch\nCOPY . /app\n"})
			return base
		}},
		{".dockerignore", func(t *testing.T) Request {
			writeFiles(t, dir, map[string]string{".dockerignore": "node_modules\n"})
			return base
		}},
		{"arg value", func(t *testing.T) Request { r := base; r.Args = map[string]string{"A": "2"}; return r }},
		{"target", func(t *testing.T) Request { r := base; r.Target = "prod"; return r }},
		{"secret id", func(t *testing.T) Request { r := base; r.Secrets = []Secret{{ID: "npm", Src: "/x"}}; return r }},
	} {
		prev := tagOf(t, base)
		req := tc.change(t)
		if got := tagOf(t, req); got == prev {
			t.Errorf("%s: changing it kept the tag %s", tc.name, got)
		}
	}

	// The secret's file (its content) is not part of the tag; its id is.
	r1 := base
	r1.Secrets = []Secret{{ID: "npm", Src: "/a"}}
	r2 := base
	r2.Secrets = []Secret{{ID: "npm", Src: "/b"}}
	if tagOf(t, r1) != tagOf(t, r2) {
		t.Errorf("the secret's path changed the tag")
	}
	// Cache options and tags do not change it.
	r3 := base
	r3.CacheFrom, r3.ExportCache, r3.Tags = []string{"x/y:c"}, "x/y:e", []string{"x/y:z"}
	if tagOf(t, r3) != tagOf(t, base) {
		t.Errorf("cache options changed the tag")
	}
}

func TestContentTagDockerfileSpecificIgnore(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"build/app.Dockerfile":              "FROM scratch\n",
		"build/app.Dockerfile.dockerignore": "secret.txt\n",
		".dockerignore":                     "",
		"secret.txt":                        "1",
	})
	req := Request{Context: dir, Dockerfile: "build/app.Dockerfile"}
	t0 := tagOf(t, req)
	writeFiles(t, dir, map[string]string{"secret.txt": "2"})
	if tagOf(t, req) != t0 {
		t.Errorf("<Dockerfile>.dockerignore was not honoured")
	}
}

func TestImageName(t *testing.T) {
	got, err := ImageName("127.0.0.1:25000", "team-a", "My_App", "Web", "abc")
	if err != nil || got != "127.0.0.1:25000/team-a/my-app-web:abc" {
		t.Fatalf("got %q, %v", got, err)
	}
	if got, _ := ImageName("reg.example/", "ns", "", "api", ""); got != "reg.example/ns/api" {
		t.Errorf("got %q", got)
	}
	for _, reg := range []string{"", "-"} {
		if _, err := ImageName(reg, "ns", "n", "s", "t"); err == nil || !strings.Contains(err.Error(), "DEVTOOL_REGISTRY") {
			t.Errorf("registry %q: want an error naming DEVTOOL_REGISTRY, got %v", reg, err)
		}
	}
}

func TestParseSecret(t *testing.T) {
	for in, want := range map[string]Secret{
		"id=npm,src=/home/me/.npmrc": {ID: "npm", Src: "/home/me/.npmrc"},
		"src=rel/file, id=x":         {ID: "x", Src: "rel/file"},
		"type=file,id=a,source=/b":   {ID: "a", Src: "/b"},
		"id=with=equals,src=/p=q":    {ID: "with=equals", Src: "/p=q"},
	} {
		got, err := ParseSecret(in)
		if err != nil || got != want {
			t.Errorf("%q: got %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "id=a", "src=/x", "npm", "id=a,src=/x,env=Y", "type=env,id=a,src=b"} {
		if _, err := ParseSecret(in); err == nil {
			t.Errorf("%q: want an error", in)
		}
	}
}

func TestExpandArgs(t *testing.T) {
	env := map[string]string{"HOME": "/home/me", "V": "1.2"}
	got := ExpandArgs(map[string]string{"A": "$HOME/x", "B": "v${V}", "C": "plain", "D": "$$literal", "E": "$UNSET"},
		func(k string) string { return env[k] })
	want := map[string]string{"A": "/home/me/x", "B": "v1.2", "C": "plain", "D": "$literal", "E": ""}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: got %q, want %q", k, got[k], v)
		}
	}
}

func TestKeepaliveFromEnv(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	ka, err := KeepaliveFromEnv(env(nil))
	if err != nil || ka != nil {
		t.Fatalf("default: want off, got %+v %v", ka, err)
	}
	ka, err = KeepaliveFromEnv(env(map[string]string{EnvKeepaliveTimeout: "5000", EnvKeepalivePermitWithoutRPC: "true"}))
	if err != nil || ka != nil {
		t.Fatalf("timeout alone: want off, got %+v %v", ka, err)
	}
	ka, err = KeepaliveFromEnv(env(map[string]string{EnvKeepaliveTime: "3000"}))
	if err != nil || ka == nil || ka.Time != 10*time.Second || ka.Timeout != 20*time.Second || ka.PermitWithoutStream {
		t.Fatalf("3s: want raised to 10s with 20s timeout, got %+v %v", ka, err)
	}
	ka, err = KeepaliveFromEnv(env(map[string]string{EnvKeepaliveTime: "60000", EnvKeepaliveTimeout: "1500", EnvKeepalivePermitWithoutRPC: "TRUE"}))
	if err != nil || ka == nil || ka.Time != time.Minute || ka.Timeout != 1500*time.Millisecond || !ka.PermitWithoutStream {
		t.Fatalf("got %+v %v", ka, err)
	}
	for _, bad := range []map[string]string{
		{EnvKeepaliveTime: "10s"}, {EnvKeepaliveTime: "-1"}, {EnvKeepaliveTimeout: "x"}, {EnvKeepalivePermitWithoutRPC: "yes please"},
	} {
		if _, err := KeepaliveFromEnv(env(bad)); err == nil {
			t.Errorf("%v: want an error", bad)
		}
	}
}

func TestNormalizeBuildKitHost(t *testing.T) {
	for in, want := range map[string]string{
		"127.0.0.1:1234":        "tcp://127.0.0.1:1234",
		"buildkit.example:1234": "tcp://buildkit.example:1234",
		"tcp://h:1":             "tcp://h:1",
		"unix:///run/bk.sock":   "unix:///run/bk.sock",
		"docker-container://bk": "docker-container://bk",
		" 10.0.0.1:9 ":          "tcp://10.0.0.1:9",
	} {
		if got := NormalizeBuildKitHost(in); got != want {
			t.Errorf("%q: got %q, want %q", in, got, want)
		}
	}
}

// closedAddr is a loopback port nothing listens on.
func closedAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

func TestSelect(t *testing.T) {
	ctx := context.Background()
	bk, ctxBuilder, hosted := closedAddr(t), closedAddr(t), closedAddr(t)
	sock := filepath.Join(t.TempDir(), "docker.sock")
	env := map[string]string{EnvBuildKitHost: bk, EnvDockerHost: "unix://" + sock}
	h := &HostedService{Addr: "tcp://" + hosted, Platform: "https://p.example", Credentials: func(context.Context) ([]byte, []byte, []byte, error) {
		return nil, nil, nil, errors.New("no certificate today")
	}}
	start := time.Now()
	_, err := Select(ctx, SelectOptions{ContextBuilder: ctxBuilder, Hosted: h, Getenv: func(k string) string { return env[k] }, ProbeTimeout: 3 * time.Second})
	if !errors.Is(err, ErrNoBuilder) {
		t.Fatalf("want ErrNoBuilder, got %v", err)
	}
	msg := err.Error()
	for _, want := range []string{"tcp://" + bk, "BUILDKIT_HOST", "tcp://" + hosted, "build service of https://p.example", "no certificate today",
		"tcp://" + ctxBuilder, "the context's builder", "unix://" + sock, "DOCKER_HOST"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error does not name %q:\n%s", want, msg)
		}
	}
	if strings.Count(msg, "\n  - ") != 4 {
		t.Errorf("want four candidates listed:\n%s", msg)
	}
	// BUILDKIT_HOST first, then the platform's service, then the context's builder, then Docker.
	if i, j, k := strings.Index(msg, bk), strings.Index(msg, hosted), strings.Index(msg, ctxBuilder); !(i < j && j < k) {
		t.Errorf("candidates out of order:\n%s", msg)
	}
	t.Logf("failed in %v:\n%s", time.Since(start), msg)

	// Bad keepalive values are an error before anything is dialled.
	env[EnvKeepaliveTime] = "soon"
	if _, err := Select(ctx, SelectOptions{Getenv: func(k string) string { return env[k] }}); err == nil || !strings.Contains(err.Error(), EnvKeepaliveTime) {
		t.Errorf("want keepalive error, got %v", err)
	}
}

type fakeBuilder struct{ built []Request }

func (f *fakeBuilder) Name() string { return "fake" }
func (f *fakeBuilder) Build(_ context.Context, req Request) (Result, error) {
	f.built = append(f.built, req)
	return Result{Ref: req.Tags[0], Digest: "sha256:x"}, nil
}

func TestEnsureImages(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"Dockerfile": "FROM scratch\n"})
	registry := map[string]bool{}
	fb := &fakeBuilder{}
	opts := EnsureOptions{Builder: fb, Registry: "127.0.0.1:5000", Namespace: "ns", Name: "app",
		Exists: func(_ context.Context, ref string) (bool, error) { return registry[ref], nil }}
	images := []Image{
		{Service: "web", Build: &compose.Build{Context: dir, Dockerfile: "Dockerfile", CacheFrom: []string{"c/one"}}},
		{Service: "db", Image: "127.0.0.1:5000/ns/db:1", Build: &compose.Build{Context: dir}},
	}
	opts.CacheFrom = []string{"c/two"}
	res, err := EnsureImages(context.Background(), opts, images)
	if err != nil {
		t.Fatal(err)
	}
	web := res["web"].Ref
	if !strings.HasPrefix(web, "127.0.0.1:5000/ns/app-web:") || res["db"].Ref != "127.0.0.1:5000/ns/db:1" || len(fb.built) != 2 {
		t.Fatalf("got %+v, built %d", res, len(fb.built))
	}
	if got := fb.built[0].CacheFrom; len(got) != 2 || got[0] != "c/one" || got[1] != "c/two" || !fb.built[0].Push {
		t.Errorf("request: %+v", fb.built[0])
	}
	registry[web], registry["127.0.0.1:5000/ns/db:1"] = true, true

	// devtool build: the content-hash image is skipped, the explicit one built.
	fb.built = nil
	res, _ = EnsureImages(context.Background(), opts, images)
	if !res["web"].Skipped || res["db"].Skipped || len(fb.built) != 1 {
		t.Errorf("devtool build again: %+v, built %d", res, len(fb.built))
	}
	// deploy (only missing): nothing built.
	fb.built = nil
	o := opts
	o.OnlyMissing = true
	res, _ = EnsureImages(context.Background(), o, images)
	if !res["web"].Skipped || !res["db"].Skipped || len(fb.built) != 0 {
		t.Errorf("deploy: %+v, built %d", res, len(fb.built))
	}
	// Everything present: no builder is needed (NewBuilder is not called).
	o.Builder, o.NewBuilder = nil, func(context.Context) (Builder, error) { return nil, errors.New("no builder reachable") }
	if res, err := EnsureImages(context.Background(), o, images); err != nil || !res["db"].Skipped {
		t.Errorf("all present without a builder: %+v %v", res, err)
	}
	o.Builder = fb
	// deploy --build: everything.
	o.Force = true
	fb.built = nil
	if _, err := EnsureImages(context.Background(), o, images); err != nil || len(fb.built) != 2 {
		t.Errorf("deploy --build: built %d, %v", len(fb.built), err)
	}
	// No registry: a clear error.
	o = opts
	o.Registry = ""
	if _, err := EnsureImages(context.Background(), o, images[:1]); err == nil || !strings.Contains(err.Error(), "DEVTOOL_REGISTRY") {
		t.Errorf("no registry: %v", err)
	}
}

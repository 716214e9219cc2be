//go:build integration

package build

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	dockerbuild "github.com/docker/docker/api/types/build"
	"github.com/docker/docker/api/types/image"
)

// newDocker is a Docker builder on the private dockerd (no bridge network: RUN steps get none).
func newDocker(t *testing.T) *Docker {
	t.Helper()
	d, err := NewDocker(dockerd(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	d.NetworkMode = "none"
	return d
}

// mustUseBuildKit fails the test unless d builds with the daemon's BuildKit.
func mustUseBuildKit(t *testing.T, d *Docker) daemonBuilder {
	t.Helper()
	db, err := d.builder(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !db.buildKit {
		t.Fatalf("the private dockerd builds with its classic builder: %s", db.why)
	}
	return db
}

// The Docker daemon's BuildKit: a Dockerfile outside the context with a "# syntax=" line (not followed:
// offline), multi-stage from the base image in the registry, a build arg, .dockerignore, push of two tags.
func TestDockerBuildAndPush(t *testing.T) {
	d := newDocker(t)
	mustUseBuildKit(t, d)
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"docker/app.Dockerfile": "# syntax=docker/dockerfile:1\nFROM " + env.busyboxBase + " AS prep\nARG V\nCOPY . /in/\n" +
			"RUN mkdir /out && cp /in/in.txt /out/ && echo $V > /out/v && ls /in > /out/listing\nFROM scratch\nCOPY --from=prep /out/ /\n",
		"in.txt":                             "docker input\n",
		"secret.env":                         "nope",
		"docker/app.Dockerfile.dockerignore": "secret.env\ndocker\n",
	})
	ref := env.regHost + "/it/docker-multi:1"
	ref2 := env.regHost + "/it/docker-multi:also"
	var progress bytes.Buffer
	res, err := d.Build(context.Background(), Request{Context: dir, Dockerfile: "docker/app.Dockerfile", Tags: []string{ref, ref2},
		Push: true, Args: map[string]string{"V": "42"}, Progress: &progress, ProgressMode: "plain"})
	if err != nil {
		t.Fatalf("%v\n%s", err, progress.String())
	}
	if res.Digest == "" || res.Digest != digestOf(t, ref) || digestOf(t, ref2) != res.Digest {
		t.Errorf("digest %q vs registry %s and %s", res.Digest, digestOf(t, ref), digestOf(t, ref2))
	}
	files, _ := imageFiles(t, ref)
	if files["in.txt"] != "docker input\n" || files["v"] != "42\n" {
		t.Fatalf("files %v", files)
	}
	if files["listing"] != "in.txt\n" {
		t.Errorf("the context sent was %q, want only in.txt (<Dockerfile>.dockerignore)", files["listing"])
	}
	if !regexpStep(progress.String(), "COPY --from=prep") {
		t.Errorf("no BuildKit progress (#N lines) for the COPY step:\n%s", progress.String())
	}
}

// regexpStep reports whether plain BuildKit progress has a "#N [...] step" line naming step.
func regexpStep(progress, step string) bool {
	for _, l := range strings.Split(progress, "\n") {
		if strings.HasPrefix(l, "#") && strings.Contains(l, step) {
			return true
		}
	}
	return false
}

// --secret, a target stage, and the secret never in the progress: the same test as on BuildKit.
func TestDockerMultiStageSecretTarget(t *testing.T) {
	d := newDocker(t)
	mustUseBuildKit(t, d)
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
	ref := env.regHost + "/it/docker-secret:1"
	var progress bytes.Buffer
	_, err := d.Build(context.Background(), Request{Context: dir, Tags: []string{ref}, Push: true, Target: "final",
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
	// The secret is not in the image the daemon keeps either (only the target's files are).
	inspect, err := d.client.ImageInspect(context.Background(), ref)
	if err != nil {
		t.Fatal(err)
	}
	if len(inspect.RootFS.Layers) != 1 {
		t.Errorf("target final has %d layers, want 1", len(inspect.RootFS.Layers))
	}
}

// Cache export to a registry, then import by a daemon whose build cache and images were emptied.
func TestDockerCacheExportImport(t *testing.T) {
	d := newDocker(t)
	db := mustUseBuildKit(t, d)
	t.Logf("daemon with the containerd image store: %v (no: the cache goes inline into the cache image)", db.containerdStore)
	dir := t.TempDir()
	stamp := time.Now().Format(time.RFC3339Nano)
	writeFiles(t, dir, map[string]string{
		"Dockerfile": "FROM " + env.busyboxBase + "\nRUN echo " + stamp + " > /stamp && sleep 1\n",
	})
	cacheRef := env.regHost + "/it/docker-cache:buildcache"
	ref1, ref2 := env.regHost+"/it/docker-cached:1", env.regHost+"/it/docker-cached:2"
	ctx := context.Background()
	var p1 bytes.Buffer
	if _, err := d.Build(ctx, Request{Context: dir, Tags: []string{ref1}, Push: true,
		ExportCache: cacheRef, Progress: &p1, ProgressMode: "plain"}); err != nil {
		t.Fatalf("%v\n%s", err, p1.String())
	}
	if digestOf(t, cacheRef) == "" {
		t.Fatal("no cache pushed")
	}
	pruneDocker(t, d, ref1, cacheRef)
	var p2 bytes.Buffer
	if _, err := d.Build(ctx, Request{Context: dir, Tags: []string{ref2}, Push: true,
		CacheFrom: []string{cacheRef}, Progress: &p2, ProgressMode: "plain"}); err != nil {
		t.Fatalf("%v\n%s", err, p2.String())
	}
	if !regexpCachedRun(p2.String()) {
		t.Fatalf("the RUN step was not taken from the imported cache:\n%s", p2.String())
	}
	f1, _ := imageFiles(t, ref1)
	f2, _ := imageFiles(t, ref2)
	if f1["stamp"] == "" || f1["stamp"] != f2["stamp"] {
		t.Errorf("stamps differ: %q vs %q", f1["stamp"], f2["stamp"])
	}
}

// pruneDocker empties the daemon's build cache and removes the given images.
func pruneDocker(t *testing.T, d *Docker, refs ...string) {
	t.Helper()
	ctx := context.Background()
	for _, r := range refs {
		if _, err := d.client.ImageRemove(ctx, r, image.RemoveOptions{Force: true, PruneChildren: true}); err != nil {
			t.Logf("removing %s: %v", r, err)
		}
	}
	if _, err := d.client.BuildCachePrune(ctx, dockerbuild.CachePruneOptions{All: true}); err != nil {
		t.Fatal(err)
	}
}

// The classic builder, asked for: it still builds, pushes and exports its cache as an image, and
// --secret gives the hint.
func TestDockerClassicBuilder(t *testing.T) {
	d := newDocker(t)
	d.Classic = true
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"Dockerfile": "FROM " + env.busyboxBase + " AS prep\nARG V\nCOPY in.txt /in.txt\n" +
			"RUN mkdir /out && cp /in.txt /out/ && echo $V > /out/v\nFROM scratch\nCOPY --from=prep /out/ /\n",
		"in.txt": "classic input\n",
	})
	ref := env.regHost + "/it/docker-classic:1"
	var progress bytes.Buffer
	res, err := d.Build(context.Background(), Request{Context: dir, Tags: []string{ref}, Push: true,
		Args: map[string]string{"V": "7"}, ExportCache: env.regHost + "/it/docker-classic:cache",
		Progress: &progress, ProgressMode: "plain"})
	if err != nil {
		t.Fatalf("%v\n%s", err, progress.String())
	}
	if res.Digest == "" || res.Digest != digestOf(t, ref) {
		t.Errorf("digest %q vs registry %s", res.Digest, digestOf(t, ref))
	}
	if files, _ := imageFiles(t, ref); files["in.txt"] != "classic input\n" || files["v"] != "7\n" {
		t.Fatalf("files %v", files)
	}
	if !strings.Contains(progress.String(), "Step 1/") {
		t.Errorf("not the classic builder's progress:\n%s", progress.String())
	}
	digestOf(t, env.regHost+"/it/docker-classic:cache")
	assertSecretHint(t, d, dir, "classic builder was asked for")
}

func assertSecretHint(t *testing.T, d *Docker, dir, why string) {
	t.Helper()
	_, err := d.Build(context.Background(), Request{Context: dir, Tags: []string{env.regHost + "/it/never:1"},
		Secrets: []Secret{{ID: "x", Src: filepath.Join(dir, "in.txt")}}})
	if err == nil || !strings.Contains(err.Error(), "BUILDKIT_HOST") || !strings.Contains(err.Error(), why) {
		t.Errorf("secret with the classic builder: %v", err)
	}
}

// A daemon without BuildKit falls back to the classic builder. Two daemons are shown through a proxy
// in front of the private dockerd: one that announces Engine API 1.38 (before BuildKit), one whose
// /grpc and /session are refused (BuildKit does not answer).
func TestDockerWithoutBuildKitFallsBack(t *testing.T) {
	host := dockerd(t)
	for _, tc := range []struct {
		name, why string
		oldAPI    bool
	}{
		{"old API", "older than 1.39", true},
		{"no /grpc", "its BuildKit does not answer", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			proxy := daemonProxy(t, strings.TrimPrefix(host, "unix://"), tc.oldAPI)
			d, err := NewDocker("unix://" + proxy)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			d.NetworkMode = "none"
			db, err := d.builder(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if db.buildKit || !strings.Contains(db.why, tc.why) {
				t.Fatalf("detected %+v, want the classic builder because %q", db, tc.why)
			}
			dir := t.TempDir()
			writeFiles(t, dir, map[string]string{"Dockerfile": "FROM scratch\nCOPY in.txt /\n", "in.txt": "x\n"})
			ref := env.regHost + "/it/docker-fallback:1"
			var progress bytes.Buffer
			if _, err := d.Build(context.Background(), Request{Context: dir, Tags: []string{ref}, Push: true,
				Progress: &progress, ProgressMode: "plain"}); err != nil {
				t.Fatalf("%v\n%s", err, progress.String())
			}
			if files, _ := imageFiles(t, ref); files["in.txt"] != "x\n" {
				t.Errorf("files %v", files)
			}
			assertSecretHint(t, d, dir, tc.why)
		})
	}
}

// daemonProxy serves the Engine API of the daemon at sock on a new unix socket, refusing /grpc and
// /session (as a daemon without BuildKit does) and, with oldAPI, announcing Engine API 1.38.
func daemonProxy(t *testing.T, sock string, oldAPI bool) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "proxy.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(&url.URL{Scheme: "http", Host: "docker"}) },
		Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		}},
		ModifyResponse: func(r *http.Response) error {
			if oldAPI && r.Header.Get("Api-Version") != "" {
				r.Header.Set("Api-Version", "1.38")
				r.Header.Del("Builder-Version")
			}
			return nil
		},
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/grpc") || strings.HasSuffix(r.URL.Path, "/session") {
			http.Error(w, "page not found", http.StatusNotFound)
			return
		}
		// The daemon answers a push before reading its small JSON body. Without full duplex the
		// server, on the first response write, drains and closes the request body while the
		// proxy's transport may still be copying it upstream; that copy then fails and the
		// transport closes the upstream connection in the middle of the response.
		_ = http.NewResponseController(w).EnableFullDuplex()
		rp.ServeHTTP(w, r)
	})}
	done := make(chan struct{})
	go func() { _ = srv.Serve(ln); close(done) }()
	t.Cleanup(func() { srv.Close(); <-done })
	return path
}

// A build canceled during a RUN step returns the cancellation, and neither it nor a finished build
// leaves a goroutine of the BuildKit client, its session or the Engine API client behind.
func TestDockerBuildKitCancelLeavesNothingRunning(t *testing.T) {
	host := dockerd(t)
	before, _ := clientGoroutines()
	d, err := NewDocker(host)
	if err != nil {
		t.Fatal(err)
	}
	d.NetworkMode = "none"
	mustUseBuildKit(t, d)
	dir := t.TempDir()
	stamp := time.Now().Format(time.RFC3339Nano)
	writeFiles(t, dir, map[string]string{
		"Dockerfile": "FROM " + env.busyboxBase + "\nRUN --mount=type=secret,id=s cat /run/secrets/s > /s\n" +
			"ARG SLEEP\nRUN echo " + stamp + " && sleep $SLEEP\n",
		"s": "secret\n",
	})
	req := Request{Context: dir, Tags: []string{env.regHost + "/it/leak:1"}, Push: true,
		Secrets: []Secret{{ID: "s", Src: filepath.Join(dir, "s")}}, Args: map[string]string{"SLEEP": "0"}}
	var p1 bytes.Buffer
	req.Progress, req.ProgressMode = &p1, "plain"
	if _, err := d.Build(context.Background(), req); err != nil {
		t.Fatalf("%v\n%s", err, p1.String())
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := &watchWriter{want: "sleep 600", seen: make(chan struct{})}
	req.Args = map[string]string{"SLEEP": "600"}
	req.Progress = w
	errc := make(chan error, 1)
	go func() { _, err := d.Build(ctx, req); errc <- err }()
	select {
	case <-w.seen:
	case err := <-errc:
		t.Fatalf("the build ended before its RUN step: %v\n%s", err, w.String())
	}
	cancel()
	if err := <-errc; err == nil || !strings.Contains(err.Error(), "context canceled") {
		t.Fatalf("canceled build: %v", err)
	}
	_ = d.Close()
	waitGoroutines(t, before)
}

// watchWriter collects progress and closes seen once it holds want.
type watchWriter struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	want string
	seen chan struct{}
	once sync.Once
}

func (w *watchWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if strings.Contains(w.buf.String(), w.want) {
		w.once.Do(func() { close(w.seen) })
	}
	return len(p), nil
}

func (w *watchWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// clientGoroutines counts the goroutines of gRPC, the BuildKit client and its session, fsutil, and
// HTTP client connections (the registry server's own connections are not counted).
func clientGoroutines() (int, string) {
	buf := make([]byte, 1<<22)
	buf = buf[:runtime.Stack(buf, true)]
	n, kept := 0, []string{}
	for _, g := range strings.Split(string(buf), "\n\n") {
		for _, mark := range []string{"google.golang.org/grpc", "github.com/moby/buildkit", "github.com/tonistiigi/fsutil", "net/http.(*persistConn)", "docker/docker/client"} {
			if strings.Contains(g, mark) {
				n++
				kept = append(kept, g)
				break
			}
		}
	}
	return n, strings.Join(kept, "\n\n")
}

// waitGoroutines waits (up to 10 s) for the client goroutines to come back to the count before.
func waitGoroutines(t *testing.T, before int, _ ...string) {
	t.Helper()
	var now int
	var stacks string
	for i := 0; i < 100; i++ {
		if now, stacks = clientGoroutines(); now <= before {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Errorf("%d client goroutines left running (%d before):\n%s", now, before, stacks)
}

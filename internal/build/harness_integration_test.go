//go:build integration

package build

// The integration harness: an in-process OCI registry (go-containerregistry's pkg/registry on
// 127.0.0.1), a private buildkitd (v0.33.1 from hack/buildkit/build.sh, runc worker, on a free loopback
// port) started once for the package, and a private dockerd (Debian's docker.io, unix socket in a temp
// folder, no bridge or iptables) started by the first test that needs it. When the daemons cannot be
// run (binaries missing, not root), the tests fail under CI=true and skip with the reason otherwise.

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// clusterRegistry is the local test cluster's registry (hack/cluster), which its containerd pulls from.
const clusterRegistry = "127.0.0.1:25000"

var env struct {
	skip        string // why the daemons are not available
	regHost     string // in-process registry host:port
	buildkit    string // tcp://127.0.0.1:PORT
	buildctl    string // path of buildctl
	busyboxBase string // <regHost>/base/busybox:test
}

// BuildKitBinDir is where the tests find buildkitd and buildctl: DEVTOOL_BUILDKIT_BIN, else the
// cache folder hack/buildkit/build.sh fills.
func buildKitBinDir() string {
	if d := os.Getenv("DEVTOOL_BUILDKIT_BIN"); d != "" {
		return d
	}
	cache := os.Getenv("DEVTOOL_TOOLS_CACHE")
	if cache == "" {
		base := os.Getenv("XDG_CACHE_HOME")
		if base == "" {
			home, _ := os.UserHomeDir()
			base = filepath.Join(home, ".cache")
		}
		cache = filepath.Join(base, "devtool-tools")
	}
	return filepath.Join(cache, "buildkit-v0.33.1")
}

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	reg := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer reg.Close()
	env.regHost = strings.TrimPrefix(reg.URL, "http://")

	stop, err := startBuildkitd()
	if err != nil {
		env.skip = err.Error()
	} else {
		defer stop()
	}
	if env.skip == "" {
		if env.busyboxBase, err = pushBusyboxBase(env.regHost + "/base/busybox:test"); err != nil {
			env.skip = "making the busybox base image: " + err.Error()
		}
	}
	code := m.Run()
	stopDockerd()
	return code
}

// needDaemons ends the test when the harness could not start: Fatal under CI=true, Skip otherwise.
func needDaemons(t testing.TB) {
	t.Helper()
	if env.skip == "" {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("build integration test needs buildkitd (CI=true): %s", env.skip)
	}
	t.Skipf("SKIP build integration test: %s", env.skip)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func startBuildkitd() (func(), error) {
	dir := buildKitBinDir()
	bin := filepath.Join(dir, "buildkitd")
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("no buildkitd in %s (run hack/buildkit/build.sh, or set DEVTOOL_BUILDKIT_BIN)", dir)
	}
	env.buildctl = filepath.Join(dir, "buildctl")
	runc, err := exec.LookPath("runc")
	if err != nil {
		return nil, fmt.Errorf("runc not installed (hack/buildkit/build.sh installs it)")
	}
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("buildkitd's runc worker needs root")
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	// Not t.TempDir: the daemon must unmount its overlays before the folder goes.
	root, err := os.MkdirTemp("", "devtool-buildkitd-")
	if err != nil {
		return nil, err
	}
	addr := fmt.Sprintf("tcp://127.0.0.1:%d", port)
	cfg := fmt.Sprintf(`root = %q
[grpc]
  address = [%q]
[worker.oci]
  enabled = true
  binary = %q
  snapshotter = "overlayfs"
  gc = true
  gckeepstorage = "2GB"
[worker.containerd]
  enabled = false
[registry.%q]
  http = true
  insecure = true
[registry.%q]
  http = true
  insecure = true
`, filepath.Join(root, "root"), addr, runc, env.regHost, clusterRegistry)
	if err := os.WriteFile(filepath.Join(root, "buildkitd.toml"), []byte(cfg), 0o644); err != nil {
		return nil, err
	}
	logPath := filepath.Join(root, "buildkitd.log")
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "--config", filepath.Join(root, "buildkitd.toml"))
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	stop := func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		logf.Close()
		_ = os.RemoveAll(root)
	}
	bk := &BuildKit{Addr: addr}
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err = bk.Ping(ctx)
		cancel()
		if err == nil {
			env.buildkit = addr
			return stop, nil
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(logPath)
			stop()
			return nil, fmt.Errorf("buildkitd did not start: %v\n%s", err, b)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// pushBusyboxBase makes a small base image without any daemon: Debian's static /bin/busybox with its
// applet links, in one layer on an empty image.
func pushBusyboxBase(ref string) (string, error) {
	bb, err := os.ReadFile("/bin/busybox")
	if err != nil {
		return "", fmt.Errorf("busybox-static not installed: %w", err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, d := range []string{"bin/", "tmp/", "etc/", "run/"} {
		mode := int64(0o755)
		if d == "tmp/" {
			mode = 0o1777
		}
		_ = tw.WriteHeader(&tar.Header{Name: d, Typeflag: tar.TypeDir, Mode: mode})
	}
	_ = tw.WriteHeader(&tar.Header{Name: "bin/busybox", Mode: 0o755, Size: int64(len(bb))})
	_, _ = tw.Write(bb)
	for _, a := range []string{"sh", "cat", "cp", "echo", "mkdir", "ls", "sleep", "httpd", "wget", "test", "tr"} {
		_ = tw.WriteHeader(&tar.Header{Name: "bin/" + a, Typeflag: tar.TypeSymlink, Linkname: "busybox", Mode: 0o777})
	}
	passwd := "root:x:0:0:root:/root:/bin/sh\n"
	_ = tw.WriteHeader(&tar.Header{Name: "etc/passwd", Mode: 0o644, Size: int64(len(passwd))})
	_, _ = tw.Write([]byte(passwd))
	if err := tw.Close(); err != nil {
		return "", err
	}
	data := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil })
	if err != nil {
		return "", err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return "", err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return "", err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", "amd64"
	cf.Config.Env = []string{"PATH=/bin"}
	cf.Config.Cmd = []string{"/bin/sh"}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return "", err
	}
	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		return "", err
	}
	if err := remote.Write(r, img); err != nil {
		return "", err
	}
	return ref, nil
}

var (
	dockerOnce sync.Once
	dockerErr  error
	dockerHost string
	dockerStop func()
)

// dockerd starts the private Docker daemon once (the first test that asks) and returns its host.
func dockerd(t *testing.T) string {
	t.Helper()
	needDaemons(t)
	dockerOnce.Do(func() { dockerHost, dockerStop, dockerErr = startDockerd() })
	if dockerErr != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("private dockerd (CI=true): %v", dockerErr)
		}
		t.Skipf("SKIP: private dockerd: %v", dockerErr)
	}
	return dockerHost
}

func stopDockerd() {
	if dockerStop != nil {
		dockerStop()
	}
}

func startDockerd() (string, func(), error) {
	bin, err := exec.LookPath("dockerd")
	if err != nil {
		return "", nil, fmt.Errorf("dockerd not installed (hack/buildkit/build.sh installs docker.io)")
	}
	root, err := os.MkdirTemp("", "devtool-dockerd-")
	if err != nil {
		return "", nil, err
	}
	sock := filepath.Join(root, "docker.sock")
	if err := os.WriteFile(filepath.Join(root, "daemon.json"), []byte("{}"), 0o644); err != nil {
		return "", nil, err
	}
	logPath := filepath.Join(root, "dockerd.log")
	logf, err := os.Create(logPath)
	if err != nil {
		return "", nil, err
	}
	cmd := exec.Command(bin, "--config-file", filepath.Join(root, "daemon.json"),
		"--data-root", filepath.Join(root, "data"), "--exec-root", filepath.Join(root, "exec"),
		"--pidfile", filepath.Join(root, "docker.pid"), "-H", "unix://"+sock,
		"--bridge=none", "--iptables=false", "--ip6tables=false", "--ip-forward=false", "--ip-masq=false",
		"--userland-proxy=false", "--storage-driver=overlay2",
		"--insecure-registry", env.regHost, "--insecure-registry", clusterRegistry)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	stop := func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
		logf.Close()
		_ = os.RemoveAll(root)
	}
	host := "unix://" + sock
	d, err := NewDocker(host)
	if err != nil {
		stop()
		return "", nil, err
	}
	defer d.Close()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err := d.Ping(ctx)
		cancel()
		if err == nil {
			return host, stop, nil
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(logPath)
			stop()
			return "", nil, fmt.Errorf("dockerd did not start: %v\n%s", err, b)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// imageFiles reads the files of an image in a registry: path → content (last layer wins).
func imageFiles(t *testing.T, ref string) (map[string]string, *v1.ConfigFile) {
	t.Helper()
	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	img, err := remote.Image(r)
	if err != nil {
		t.Fatalf("reading %s: %v", ref, err)
	}
	rc := mutate.Extract(img)
	defer rc.Close()
	files := map[string]string{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			b, _ := io.ReadAll(tr)
			files[strings.TrimPrefix(h.Name, "/")] = string(b)
		}
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	return files, cf
}

func digestOf(t *testing.T, ref string) string {
	t.Helper()
	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	d, err := remote.Head(r)
	if err != nil {
		t.Fatalf("HEAD %s: %v", ref, err)
	}
	return d.Digest.String()
}

// Accessors for the external test package (the `devtool build` command tests).

// HarnessBuildKit returns the test buildkitd's address, or ends the test when there is none.
func HarnessBuildKit(t testing.TB) string { needDaemons(t); return env.buildkit }

// HarnessRegistry returns the in-process registry's host:port.
func HarnessRegistry() string { return env.regHost }

// HarnessBusybox returns the busybox base image in the in-process registry.
func HarnessBusybox() string { return env.busyboxBase }

// HarnessImageFiles reads the files of an image.
func HarnessImageFiles(t *testing.T, ref string) map[string]string {
	f, _ := imageFiles(t, ref)
	return f
}

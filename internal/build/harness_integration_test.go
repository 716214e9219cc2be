//go:build integration

package build

// The integration harness: an in-process OCI registry (go-containerregistry's pkg/registry on
// 127.0.0.1), a private buildkitd (v0.33.1 from hack/buildkit/build.sh, runc worker, on a free loopback
// port) started once for the package, and a private dockerd (Debian's docker.io, unix socket in a temp
// folder, no bridge or iptables) started by the first test that needs it. When the daemons cannot be
// run (binaries missing, not root), the tests fail under CI=true and skip with the reason otherwise.

import (
	"archive/tar"
	"context"
	"fmt"
	"io"
	"log"
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
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/devtool/devtool/internal/buildtest"
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

func startBuildkitd() (func(), error) {
	addr, stop, err := buildtest.StartBuildkitd(env.regHost, clusterRegistry)
	if err != nil {
		return nil, err
	}
	env.buildkit, env.buildctl = addr, filepath.Join(buildtest.BinDir(), "buildctl")
	return stop, nil
}

func pushBusyboxBase(ref string) (string, error) { return buildtest.PushBusyboxBase(ref) }

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

// HarnessDocker returns the private dockerd's host (unix://…), starting it, or ends the test when there is none.
// Its RUN steps have no network unless the build forces "none" (the daemon has no bridge).
func HarnessDocker(t *testing.T) string { return dockerd(t) }

// HarnessRegistry returns the in-process registry's host:port.
func HarnessRegistry() string { return env.regHost }

// HarnessBusybox returns the busybox base image in the in-process registry.
func HarnessBusybox() string { return env.busyboxBase }

// HarnessImageFiles reads the files of an image.
func HarnessImageFiles(t *testing.T, ref string) map[string]string {
	f, _ := imageFiles(t, ref)
	return f
}

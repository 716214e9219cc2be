// Package buildtest starts the image tooling integration tests need: a private buildkitd on a free
// loopback port and a small busybox base image pushed to a registry without any daemon. It is used
// only by tests (internal/build, test/e2e).
package buildtest

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// BinDir is where tests find buildkitd and buildctl: DEVTOOL_BUILDKIT_BIN, else the
// cache folder hack/buildkit/build.sh fills.
func BinDir() string {
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

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// StartBuildkitd runs a private buildkitd (runc worker) on a free loopback port, trusting the given
// plain-HTTP registries, and returns its address and a stop function. Needs root, runc and the
// binaries from hack/buildkit/build.sh.
func StartBuildkitd(insecureRegistries ...string) (addr string, stop func(), err error) {
	dir := BinDir()
	bin := filepath.Join(dir, "buildkitd")
	if _, err := os.Stat(bin); err != nil {
		return "", nil, fmt.Errorf("no buildkitd in %s (run hack/buildkit/build.sh, or set DEVTOOL_BUILDKIT_BIN)", dir)
	}
	runc, err := exec.LookPath("runc")
	if err != nil {
		return "", nil, fmt.Errorf("runc not installed (hack/buildkit/build.sh installs it)")
	}
	if os.Geteuid() != 0 {
		return "", nil, fmt.Errorf("buildkitd's runc worker needs root")
	}
	port, err := freePort()
	if err != nil {
		return "", nil, err
	}
	// Not t.TempDir: the daemon must unmount its overlays before the folder goes.
	root, err := os.MkdirTemp("", "devtool-buildkitd-")
	if err != nil {
		return "", nil, err
	}
	addr = fmt.Sprintf("tcp://127.0.0.1:%d", port)
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
`, filepath.Join(root, "root"), addr, runc)
	for _, r := range insecureRegistries {
		cfg += fmt.Sprintf("[registry.%q]\n  http = true\n  insecure = true\n", r)
	}
	if err := os.WriteFile(filepath.Join(root, "buildkitd.toml"), []byte(cfg), 0o644); err != nil {
		return "", nil, err
	}
	logPath := filepath.Join(root, "buildkitd.log")
	logf, err := os.Create(logPath)
	if err != nil {
		return "", nil, err
	}
	cmd := exec.Command(bin, "--config", filepath.Join(root, "buildkitd.toml"))
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	stop = func() {
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
	buildctl := filepath.Join(dir, "buildctl")
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err = exec.CommandContext(ctx, buildctl, "--addr", addr, "debug", "workers").Run()
		cancel()
		if err == nil {
			return addr, stop, nil
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(logPath)
			stop()
			return "", nil, fmt.Errorf("buildkitd did not start: %v\n%s", err, b)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// PushBusyboxBase makes a small base image without any daemon: Debian's static /bin/busybox with its
// applet links, in one layer on an empty image.
func PushBusyboxBase(ref string) (string, error) {
	return pushBusybox(ref, nil)
}

// PushSleepingBusybox is PushBusyboxBase whose entrypoint sleeps for an hour whatever the arguments
// (a Compose command: becomes arguments it ignores): a stand-in for a real-world service's image
// whose container stays running, as the real one would.
func PushSleepingBusybox(ref string) (string, error) {
	return pushBusybox(ref, []string{"/bin/sh", "-c", "exec sleep 3600", "stand-in"})
}

func pushBusybox(ref string, entrypoint []string) (string, error) {
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
	if entrypoint != nil {
		cf.Config.Entrypoint, cf.Config.Cmd = entrypoint, nil
	}
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

//go:build linux

package main

import (
	"archive/zip"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/devtool/devtool/internal/dev"
)

// TestDevFiles is issue 18's table for the dev commands' own files (~/.devtool/dev/<hash>/<dev>/),
// run on the built binary with a temporary HOME: each case puts a special file, a symbolic link or
// broken content in place of one of them and runs up, status or doctor, which must fail at once
// naming the path (a hang fails the case at its deadline), leave any link's target as it was, and
// stay within a bounded memory (the peak RSS) and, where it matters, bounded reads (rchar of
// /proc/<pid>/io, read when the process has exited and before it is reaped).
func TestDevFiles(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := devtoolBinary(t)
	type special struct {
		name string
		make func(t *testing.T, p string)
		want string
	}
	specials := []special{
		{"a FIFO", func(t *testing.T, p string) { mkfifo(t, p) }, "a named pipe"},
		{"a symlink to /dev/zero", func(t *testing.T, p string) { symlink(t, "/dev/zero", p) }, "a symbolic link"},
		{"a character device (/dev/zero's numbers)", func(t *testing.T, p string) {
			if err := syscall.Mknod(p, syscall.S_IFCHR|0o600, int(unix.Mkdev(1, 5))); err != nil {
				t.Skipf("mknod needs root: %v", err)
			}
		}, "a device"},
	}
	files := map[string]func(sd *dev.StateDir) string{
		"state.json":  (*dev.StateDir).StateFile,
		"status.json": (*dev.StateDir).StatusFile,
		"devtool.log": (*dev.StateDir).LogFile,
		"id_ed25519":  (*dev.StateDir).KeyFile,
	}
	for _, file := range []string{"state.json", "status.json", "devtool.log", "id_ed25519"} {
		for _, sp := range specials {
			for _, cmd := range []string{"up", "status", "doctor"} {
				t.Run(file+"/"+sp.name+"/"+cmd, func(t *testing.T) {
					f := newDevFixture(t)
					p := files[file](f.state)
					sp.make(t, p)
					r := f.run(t, bin, cmd)
					r.wantFailure(t, p, sp.want)
				})
			}
		}
	}

	t.Run("pid file a symlink: up fails, the target untouched", func(t *testing.T) {
		f := newDevFixture(t)
		victim := filepath.Join(t.TempDir(), "precious")
		write(t, victim, "data that must survive\n")
		symlink(t, victim, f.state.PIDFile())
		r := f.run(t, bin, "up")
		r.wantFailure(t, f.state.PIDFile(), "a symbolic link")
		if b, _ := os.ReadFile(victim); string(b) != "data that must survive\n" {
			t.Fatalf("the link's target now holds %q", b)
		}
	})

	for _, cmd := range []string{"up", "doctor"} {
		t.Run("state folder a symlink: "+cmd+" fails, the target's mode untouched", func(t *testing.T) {
			f := newDevFixture(t)
			target := filepath.Join(t.TempDir(), "target")
			if err := os.Mkdir(target, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(target, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Remove(f.state.Path); err != nil {
				t.Fatal(err)
			}
			symlink(t, target, f.state.Path)
			r := f.run(t, bin, cmd)
			r.wantFailure(t, f.state.Path, "symbolic link")
			if fi, _ := os.Stat(target); fi.Mode().Perm() != 0o755 {
				t.Fatalf("the target's mode is now %04o", fi.Mode().Perm())
			}
			if ents, _ := os.ReadDir(target); len(ents) != 0 {
				t.Fatalf("files written in the target: %v", ents)
			}
		})
	}

	t.Run("a 300 MB log: doctor reads its end only", func(t *testing.T) {
		f := newDevFixture(t)
		const size = 300 << 20
		lf, err := os.Create(f.state.LogFile())
		if err != nil {
			t.Fatal(err)
		}
		// Real lines at both ends, a sparse middle: 300 MB to read for a reader that reads it all.
		lf.WriteString("time=first level=INFO msg=start component=sync\n")
		if err := lf.Truncate(size); err != nil {
			t.Fatal(err)
		}
		lf.WriteAt([]byte("\ntime=last level=INFO msg=end component=sync\n"), size)
		lf.Close()
		r := f.run(t, bin, "doctor")
		if r.err != nil {
			t.Fatalf("doctor: %v\n%s", r.err, r.stderr)
		}
		t.Logf("doctor on a %d MB log: %v, peak RSS %d MiB, %d MiB read", size>>20, r.took, r.maxRSS>>20, r.rchar>>20)
		if r.rchar > 32<<20 {
			t.Errorf("doctor read %d bytes of a %d-byte log (want its end only)", r.rchar, size)
		}
		if r.maxRSS > 200<<20 {
			t.Errorf("doctor's peak RSS %d MiB", r.maxRSS>>20)
		}
		log := f.zipEntry(t, "devtool.log")
		if len(log) > 4<<20+512 || !strings.Contains(log, "msg=end") || strings.Contains(log, "msg=start") {
			t.Errorf("the report's devtool.log: %d bytes, end %v, start %v", len(log), strings.Contains(log, "msg=end"), strings.Contains(log, "msg=start"))
		}
		if !strings.Contains(log, "(the last 4 MiB of "+f.state.LogFile()+")") {
			t.Errorf("the report does not say the log was cut: %.200q", log)
		}
	})

	t.Run("status.json broken: status names it", func(t *testing.T) {
		f := newDevFixture(t)
		write(t, f.state.StatusFile(), `{"addr": "127.0.0.1:1", "user": `)
		r := f.run(t, bin, "status")
		r.wantFailure(t, f.state.StatusFile(), "broken")
	})

	t.Run("an endless sync status answer: status stops at the cap and names the address", func(t *testing.T) {
		f := newDevFixture(t)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"folders": [`)
			chunk := bytes.Repeat([]byte(`{"local": "x", "pending": 1}, `), 4096)
			for r.Context().Err() == nil {
				if _, err := w.Write(chunk); err != nil {
					return
				}
			}
		}))
		defer srv.Close()
		addr := strings.TrimPrefix(srv.URL, "http://")
		write(t, f.state.StatusFile(), fmt.Sprintf(`{"addr": %q, "user": "devtool", "password": "x"}`, addr))
		// The status needs a running up: hold the pid file's lock as up does.
		pf, err := os.OpenFile(f.state.PIDFile(), os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		defer pf.Close()
		if err := unix.Flock(int(pf.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
			t.Fatal(err)
		}
		pf.WriteString(strconv.Itoa(os.Getpid()) + "\n")
		r := f.run(t, bin, "status")
		r.wantFailure(t, addr, "more than 8 MiB")
		t.Logf("status on an endless answer: %v, peak RSS %d MiB", r.took, r.maxRSS>>20)
		if r.maxRSS > 200<<20 {
			t.Errorf("status's peak RSS %d MiB", r.maxRSS>>20)
		}
	})
}

// devFixture is a project folder with one Compose service (dev container "web"), a kubeconfig
// pointing at a closed loopback port, a temporary HOME and the dev container's state folder.
type devFixture struct {
	dir, home string
	env       []string
	state     *dev.StateDir
}

func newDevFixture(t *testing.T) *devFixture {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	f := &devFixture{dir: filepath.Join(root, "project"), home: filepath.Join(root, "home")}
	write(t, filepath.Join(f.dir, "compose.yml"), "services:\n  web:\n    image: busybox\n")
	kc := writeKubeconfig(t, filepath.Join(root, "kube", "config"), "")
	f.env = []string{"HOME=" + f.home, "DEVTOOL_HOME=" + f.home, "KUBECONFIG=" + kc, "PATH=" + os.Getenv("PATH")}
	f.state = &dev.StateDir{Path: dev.StateDirPath(f.home, f.dir, "web")}
	if err := os.MkdirAll(f.state.Path, 0o700); err != nil {
		t.Fatal(err)
	}
	return f
}

type runResult struct {
	err           error
	stderr        string
	took          time.Duration
	maxRSS, rchar int64
}

// run runs the built binary with args in the project folder; still running after a minute (a
// blocked open, an endless read) fails the test.
func (f *devFixture) run(t *testing.T, bin string, args ...string) runResult {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir, cmd.Env = f.dir, f.env
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = io.Discard, &stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	exited := make(chan error, 1)
	go func() {
		// Wait for the exit without reaping, so /proc/<pid>/io can still be read.
		var info unix.Siginfo
		exited <- unix.Waitid(unix.P_PID, cmd.Process.Pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
	}()
	var r runResult
	select {
	case err := <-exited:
		if err != nil {
			t.Fatal(err)
		}
	case <-ctx.Done():
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("devtool %v still running after a minute (blocked on a special file?); stderr:\n%s", args, stderr.String())
	}
	r.took = time.Since(start)
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", cmd.Process.Pid)); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "rchar: "); ok {
				r.rchar, _ = strconv.ParseInt(v, 10, 64)
			}
		}
	}
	r.err = cmd.Wait()
	r.stderr = stderr.String()
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		r.maxRSS = ru.Maxrss << 10 // KiB on Linux
	}
	return r
}

// wantFailure asserts a failing exit (not an interruption) whose message names path and want.
func (r runResult) wantFailure(t *testing.T, path, want string) {
	t.Helper()
	if r.err == nil {
		t.Fatalf("succeeded; stderr:\n%s", r.stderr)
	}
	if code := r.err.(*exec.ExitError).ExitCode(); code == 130 || code <= 0 {
		t.Errorf("exit code %d", code)
	}
	if !strings.Contains(r.stderr, path) || !strings.Contains(r.stderr, want) {
		t.Fatalf("stderr %q\nwant %s and %q", r.stderr, path, want)
	}
	if r.maxRSS > 200<<20 {
		t.Errorf("peak RSS %d MiB", r.maxRSS>>20)
	}
}

// zipEntry is the named entry of the one doctor report in the project folder.
func (f *devFixture) zipEntry(t *testing.T, name string) string {
	t.Helper()
	zips, _ := filepath.Glob(filepath.Join(f.dir, "devtool-doctor-web-*.zip"))
	if len(zips) != 1 {
		t.Fatalf("reports %v", zips)
	}
	z, err := zip.OpenReader(zips[0])
	if err != nil {
		t.Fatal(err)
	}
	defer z.Close()
	for _, e := range z.File {
		if e.Name == name {
			rc, err := e.Open()
			if err != nil {
				t.Fatal(err)
			}
			defer rc.Close()
			b, err := io.ReadAll(rc)
			if err != nil {
				t.Fatal(err)
			}
			return string(b)
		}
	}
	t.Fatalf("no %s in %s", name, zips[0])
	return ""
}

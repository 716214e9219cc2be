//go:build integration

// Package e2e runs the built devtool binary against a real cluster, as a user would.
package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/devtool/devtool/internal/testcluster"
)

var devtoolBin string

// cleanups run after all tests (daemons started once for the package).
var cleanups []func()

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "devtool-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	devtoolBin = filepath.Join(dir, "devtool")
	_, here, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(here), "..", "..")
	build := exec.Command("go", "build", "-o", devtoolBin, "./cmd/devtool")
	build.Dir = root
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building devtool:", err)
		os.Exit(1)
	}
	code := m.Run()
	for _, f := range cleanups {
		f()
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// user is one developer's machine: a home, a working folder, and the cluster's kubeconfig.
type user struct {
	t       testing.TB
	c       *testcluster.Cluster
	dir     string
	home    string
	extra   []string
	timeout time.Duration
	// wrap, when set, runs devtool through this command line (setpriv, to drop capabilities).
	wrap []string
}

// command is devtool with args, run through u.wrap when set.
func (u *user) command(ctx context.Context, args ...string) *exec.Cmd {
	if len(u.wrap) > 0 {
		return exec.CommandContext(ctx, u.wrap[0], append(append(append([]string(nil), u.wrap[1:]...), devtoolBin), args...)...)
	}
	return exec.CommandContext(ctx, devtoolBin, args...)
}

func newUser(t testing.TB, c *testcluster.Cluster) *user {
	return &user{t: t, c: c, dir: t.TempDir(), home: t.TempDir(), timeout: 4 * time.Minute}
}

func (u *user) write(name, content string) {
	u.t.Helper()
	p := filepath.Join(u.dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		u.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		u.t.Fatal(err)
	}
}

// run executes devtool and returns stdout, stderr and the error.
func (u *user) run(args ...string) (string, string, error) {
	u.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), u.timeout)
	defer cancel()
	cmd := u.command(ctx, args...)
	cmd.Dir = u.dir
	cmd.Env = append([]string{
		"HOME=" + u.home, "DEVTOOL_HOME=" + u.home, "KUBECONFIG=" + u.c.Kubeconfig,
		"PATH=" + os.Getenv("PATH"), "NO_COLOR=1",
	}, u.extra...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	u.t.Logf("$ devtool %s\n%s%s", strings.Join(args, " "), out.String(), errOut.String())
	return out.String(), errOut.String(), err
}

func (u *user) mustRun(args ...string) string {
	u.t.Helper()
	out, errOut, err := u.run(args...)
	if err != nil {
		u.t.Fatalf("devtool %s: %v\nstderr:\n%s", strings.Join(args, " "), err, errOut)
	}
	return out
}

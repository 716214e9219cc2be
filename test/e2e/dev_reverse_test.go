//go:build integration

package e2e

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/devtool/devtool/internal/testcluster"
)

// TestDevUpReverseForward: a reverse entry (remote:local) makes a local HTTP server on
// 127.0.0.1 answer inside the pod on 127.0.0.1:<remote> (wget run with exec).
func TestDevUpReverseForward(t *testing.T) {
	c := testcluster.Connect(t)
	ns := c.Namespace(t)
	u := newUser(t, c)
	port := freePort(t)
	writeHello(t, u, port)
	withAgent(t, u)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "hello from the developer's machine")
	})}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	local := ln.Addr().(*net.TCPAddr).Port
	const remote = 19090
	dy := strings.Replace(readFile(t, filepath.Join(u.dir, "devtool.yml")), "    forward:\n", fmt.Sprintf("    reverse:\n      - %d:%d\n    forward:\n", remote, local), 1)
	u.write("devtool.yml", dy)

	u.mustRun("deploy", "--namespace", ns, "--wait", "--timeout", "4m")
	up := u.start("up", "web", "--namespace", ns)
	up.waitLine(t, "ready", 3*time.Minute)
	eventually(t, time.Minute, "the reverse forward answers inside the pod", func() error {
		out, _, err := u.run("exec", "web", "--namespace", ns, "--", "wget", "-q", "-O", "-", fmt.Sprintf("http://127.0.0.1:%d/", remote))
		if err != nil || !strings.Contains(out, "hello from the developer's machine") {
			return fmt.Errorf("%q %v", out, err)
		}
		return nil
	})
	u.mustRun("down", "web", "--namespace", ns)
	_ = up.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-up.done:
	case <-time.After(time.Minute):
		t.Error("up did not end after down")
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

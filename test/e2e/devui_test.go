//go:build integration

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/devtool/devtool/internal/testcluster"
)

// TestDevtoolUI: `devtool ui` in examples/hello's folder while `devtool up web` runs. It prints a
// loopback URL with a token; without the token (or with another) it refuses; a foreign Host name
// is refused; in Chromium the page lists the environment, its pods and the up's sync state (100 %
// synchronized, files counted, the forward listening) and its logs; Ctrl-C stops it at once (exit
// 0) and the port is closed.
func TestDevtoolUI(t *testing.T) {
	c := testcluster.Connect(t)
	ns := c.Namespace(t)
	u := newUser(t, c)
	port := freePort(t)
	writeHello(t, u, port)
	withAgent(t, u)
	u.mustRun("deploy", "--namespace", ns, "--wait", "--timeout", "4m")
	up := u.start("up", "web", "--namespace", ns)
	up.waitLine(t, "ready", 3*time.Minute)

	ui, addr := startUI(t, u, "ui", "--namespace", ns)
	if !strings.HasPrefix(addr, "http://127.0.0.1:") || !strings.Contains(addr, "/?token=") {
		t.Fatalf("devtool ui printed %q", addr)
	}
	base, _ := url.Parse(addr)
	tok := base.Query().Get("token")
	for _, tc := range []struct {
		url, host string
		want      int
	}{
		{"http://" + base.Host + "/", "", http.StatusUnauthorized},
		{"http://" + base.Host + "/logs", "", http.StatusUnauthorized},
		{"http://" + base.Host + "/?token=" + strings.Repeat("0", len(tok)), "", http.StatusUnauthorized},
		{addr, "attacker.example", http.StatusMisdirectedRequest},
	} {
		req, _ := http.NewRequest("GET", tc.url, nil)
		if tc.host != "" {
			req.Host = tc.host
		}
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("GET %s (Host %q): %d, want %d", tc.url, tc.host, resp.StatusCode, tc.want)
		}
	}

	b := newBrowser(t, "devtool-ui")
	tab := b.tab()
	st, text := b.open(tab, addr)
	if st != 200 || !strings.Contains(text, "Environment hello") || !strings.Contains(text, ns) {
		t.Fatalf("devtool ui page: %d\n%s", st, text)
	}
	if loc := b.location(tab); loc.Query().Get("token") != "" {
		t.Errorf("the token stays in the address bar: %s", loc)
	}
	deadline := time.Now().Add(90 * time.Second)
	for {
		_, text = b.open(tab, "http://"+base.Host+"/")
		if strings.Contains(text, "100.0%") && strings.Contains(text, "listening") && !strings.Contains(text, "not listening") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the page never showed the up's sync state at 100%%:\n%s", text)
		}
		time.Sleep(time.Second)
	}
	for _, want := range []string{"Synchronized", "Files", "Pending", "Conflicts", "Sent", "Received", fmt.Sprintf("127.0.0.1:%d", port), "listening", "web", "db"} {
		if !strings.Contains(text, want) {
			t.Errorf("devtool ui page: no %q\n%s", want, text)
		}
	}
	b.shot(tab, "environment")
	if st, text := b.open(tab, "http://"+base.Host+"/logs?tail=20"); st != 200 || !strings.Contains(text, "Logs of hello") {
		t.Errorf("logs page: %d\n%s", st, text)
	}
	b.shot(tab, "logs")

	// Ctrl-C: exits 0 at once, the port closed, even with the logs page's stream open.
	start := time.Now()
	if err := ui.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- ui.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("devtool ui after Ctrl-C: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("devtool ui did not stop within 20 s of Ctrl-C")
	}
	t.Logf("devtool ui stopped %s after Ctrl-C", time.Since(start).Round(time.Millisecond))
	if conn, err := net.DialTimeout("tcp", base.Host, time.Second); err == nil {
		conn.Close()
		t.Errorf("%s still accepts connections after devtool ui stopped", base.Host)
	}
}

// startUI starts devtool ui in the background and returns it with the first line it printed (the URL).
func startUI(t *testing.T, u *user, args ...string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(devtoolBin, args...)
	cmd.Dir = u.dir
	cmd.Env = append([]string{"HOME=" + u.home, "DEVTOOL_HOME=" + u.home, "KUBECONFIG=" + u.c.Kubeconfig,
		"PATH=" + os.Getenv("PATH"), "NO_COLOR=1"}, u.extra...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var errOut strings.Builder
	cmd.Stderr = &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_, _ = cmd.Process.Wait()
		t.Logf("$ devtool %s\n%s", strings.Join(args, " "), errOut.String())
	})
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		if sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		_, _ = io.Copy(io.Discard, out)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	select {
	case l, ok := <-lines:
		if !ok {
			t.Fatalf("devtool ui printed no URL:\n%s", errOut.String())
		}
		return cmd, strings.TrimSpace(l)
	case <-ctx.Done():
		t.Fatalf("devtool ui printed no URL within a minute:\n%s", errOut.String())
	}
	return nil, ""
}

//go:build integration

package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/devtool/devtool/internal/testcluster"
)

// bg is a devtool process running in the background (up), its stderr read line by line.
type bg struct {
	cmd   *exec.Cmd
	mu    sync.Mutex
	lines []string
	seen  chan string
	done  chan error
}

func (u *user) start(args ...string) *bg {
	u.t.Helper()
	return u.startCmd(u.command(context.Background(), args...), "devtool "+strings.Join(args, " "), u.extra...)
}

// startCmd starts cmd in the user's folder with the user's environment and env, collecting its
// stderr's lines; it is killed and its output logged (as label) when the test ends.
func (u *user) startCmd(cmd *exec.Cmd, label string, env ...string) *bg {
	u.t.Helper()
	cmd.Dir = u.dir
	cmd.Env = append([]string{
		"HOME=" + u.home, "DEVTOOL_HOME=" + u.home, "KUBECONFIG=" + u.c.Kubeconfig,
		"PATH=" + os.Getenv("PATH"), "NO_COLOR=1",
	}, env...)
	errPipe, err := cmd.StderrPipe()
	if err != nil {
		u.t.Fatal(err)
	}
	cmd.Stdout = io.Discard
	if err := cmd.Start(); err != nil {
		u.t.Fatal(err)
	}
	b := &bg{cmd: cmd, seen: make(chan string, 1000), done: make(chan error, 1)}
	go func() {
		sc := bufio.NewScanner(errPipe)
		for sc.Scan() {
			b.mu.Lock()
			b.lines = append(b.lines, sc.Text())
			b.mu.Unlock()
			select {
			case b.seen <- sc.Text():
			default:
			}
		}
		b.done <- cmd.Wait()
	}()
	u.t.Cleanup(func() {
		_ = cmd.Process.Kill()
		u.t.Logf("$ %s\n%s", label, b.output())
	})
	return b
}

func (b *bg) output() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Join(b.lines, "\n")
}

// waitLine waits for a stderr line containing s.
func (b *bg) waitLine(t testing.TB, s string, timeout time.Duration) {
	t.Helper()
	deadline := time.After(timeout)
	for {
		if strings.Contains(b.output(), s) {
			return
		}
		select {
		case <-b.seen:
		case err := <-b.done:
			b.done <- err
			if strings.Contains(b.output(), s) {
				return
			}
			t.Fatalf("devtool exited (%v) before %q:\n%s", err, s, b.output())
		case <-deadline:
			t.Fatalf("no %q within %s:\n%s", s, timeout, b.output())
		}
	}
}

var (
	agentOnce sync.Once
	agentPath string
	agentErr  error
)

// withAgent points the user's devtool at a devtool-agent built for the cluster's nodes (the
// e2e binary is a plain go build, without the agents make build embeds).
func withAgent(t *testing.T, u *user) {
	agentOnce.Do(func() {
		dir, err := os.MkdirTemp("", "devtool-agent-")
		if err != nil {
			agentErr = err
			return
		}
		cleanups = append(cleanups, func() { os.RemoveAll(dir) })
		agentPath = filepath.Join(dir, "devtool-agent")
		cmd := exec.Command("go", "build", "-o", agentPath, "./cmd/devtool-agent")
		cmd.Dir = filepath.Join("..", "..")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
		if out, err := cmd.CombinedOutput(); err != nil {
			agentErr = fmt.Errorf("building devtool-agent: %v\n%s", err, out)
		}
	})
	if agentErr != nil {
		t.Fatal(agentErr)
	}
	u.extra = append(u.extra, "DEVTOOL_AGENT_BINARY="+agentPath)
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// eventually retries f until it returns nil or the timeout passes (not a timing assertion:
// the timeout only bounds a hung test).
func eventually(t *testing.T, timeout time.Duration, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var err error
	for time.Now().Before(deadline) {
		if err = f(); err == nil {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("%s: %v", what, err)
}

func httpGet(port int) (string, error) {
	c := http.Client{Timeout: 3 * time.Second}
	resp, err := c.Get(fmt.Sprintf("http://127.0.0.1:%d/", port))
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// deleteDevPod deletes the one live pod of dev container dev (one already being deleted does not
// count; none or several fail the test).
func deleteDevPod(t *testing.T, cs kubernetes.Interface, ns, dev string) {
	t.Helper()
	ctx := context.Background()
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "dev.devtool/dev=" + dev})
	if err != nil {
		t.Fatal(err)
	}
	var live []string
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			live = append(live, p.Name)
		}
	}
	if len(live) != 1 {
		t.Fatalf("live pods of dev container %s: %v, want one", dev, live)
	}
	if err := cs.CoreV1().Pods(ns).Delete(ctx, live[0], metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

// mirrorHasEnv checks that the dev container (the first) of the mirror, a "deployment" or a
// "statefulset", has name=value in its environment.
func mirrorHasEnv(cs kubernetes.Interface, ns, kind, mirror, name, value string) func() error {
	return func() error {
		ctx := context.Background()
		var tmpl corev1.PodTemplateSpec
		switch kind {
		case "deployment":
			d, err := cs.AppsV1().Deployments(ns).Get(ctx, mirror, metav1.GetOptions{})
			if err != nil {
				return err
			}
			tmpl = d.Spec.Template
		case "statefulset":
			s, err := cs.AppsV1().StatefulSets(ns).Get(ctx, mirror, metav1.GetOptions{})
			if err != nil {
				return err
			}
			tmpl = s.Spec.Template
		default:
			return fmt.Errorf("mirrorHasEnv: unknown kind %q", kind)
		}
		for _, e := range tmpl.Spec.Containers[0].Env {
			if e.Name == name && e.Value == value {
				return nil
			}
		}
		return fmt.Errorf("mirror env %v, want %s=%s", tmpl.Spec.Containers[0].Env, name, value)
	}
}

func bodyContains(port int, want string) func() error {
	return func() error {
		got, err := httpGet(port)
		if err != nil {
			return err
		}
		if !strings.Contains(got, want) {
			return fmt.Errorf("body %q, want %q", got, want)
		}
		return nil
	}
}

// writeHello copies examples/hello into the user's folder with the forward on port.
func writeHello(t *testing.T, u *user, port int) {
	for _, f := range []string{"compose.yml", "devtool.yml", "web/index.html"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "examples", "hello", f))
		if err != nil {
			t.Fatal(err)
		}
		s := strings.ReplaceAll(string(b), "18080:8080", fmt.Sprintf("%d:8080", port))
		u.write(f, s)
	}
}

// TestDevUpHello is the main job: deploy examples/hello, up web without a terminal, a local
// edit served through the forward, exec from a second process with its exit code, the pod
// deleted and the forward back on the same port, the original redeployed and the mirror
// following, SIGINT leaving the dev container active, down restoring the spec exactly.
func TestDevUpHello(t *testing.T) {
	c := testcluster.Connect(t)
	ns := c.Namespace(t)
	u := newUser(t, c)
	port := freePort(t)
	writeHello(t, u, port)
	withAgent(t, u)
	ctx := context.Background()
	cs := c.Clientset
	u.mustRun("deploy", "--namespace", ns, "--wait", "--timeout", "4m")
	orig, err := cs.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	up := u.start("up", "web", "--namespace", ns)
	up.waitLine(t, "ready", 3*time.Minute)
	eventually(t, time.Minute, "the forward serves the synced file", bodyContains(port, "hello from the dev container"))

	// status: the percentage from the local sync service; --info names a loopback address.
	eventually(t, time.Minute, "status 100.00%", func() error {
		out, _, err := u.run("status", "web")
		if err != nil || strings.TrimSpace(out) != "100.00%" {
			return fmt.Errorf("%q %v", out, err)
		}
		return nil
	})
	if info := u.mustRun("status", "web", "--info"); !strings.Contains(info, "http://127.0.0.1:") || !strings.Contains(info, "password: ") {
		t.Errorf("status --info: %q", info)
	}
	if !strings.Contains(up.output(), fmt.Sprintf("forwarding 127.0.0.1:%d -> 8080", port)) {
		t.Errorf("the forward is not announced on loopback:\n%s", up.output())
	}

	u.write("web/index.html", "<h1>edited locally</h1>\n")
	eventually(t, time.Minute, "the local edit is served", bodyContains(port, "edited locally"))

	out, _, err := u.run("exec", "web", "--namespace", ns, "--", "sh", "-c", "cat /app/index.html; exit 7")
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 7 || !strings.Contains(out, "edited locally") {
		t.Errorf("exec: exit %v, output %q", err, out)
	}

	// Delete the dev pod: the forward answers again on the same port.
	deleteDevPod(t, cs, ns, "web")
	up.waitLine(t, "reconnected", 3*time.Minute)
	eventually(t, time.Minute, "the forward after the pod was deleted", bodyContains(port, "edited locally"))

	// Redeploy the original with another environment: the mirror follows.
	compose, _ := os.ReadFile(filepath.Join(u.dir, "compose.yml"))
	u.write("compose.yml", strings.Replace(string(compose), "    stop_grace_period: 2s\n    healthcheck:\n      http:",
		"    stop_grace_period: 2s\n    environment: {GREETING: redeployed}\n    healthcheck:\n      http:", 1))
	u.mustRun("deploy", "--namespace", ns, "--timeout", "4m")
	eventually(t, 3*time.Minute, "the mirror follows the redeploy", mirrorHasEnv(cs, ns, "deployment", "web-devtool", "GREETING", "redeployed"))
	eventually(t, 2*time.Minute, "the forward after the rebuild", bodyContains(port, "edited locally"))
	// Ready again once connected to the rebuilt pod (a Ctrl-C before that interrupts the rebuild).
	up.waitLine(t, "ready: rebuilt; the dev container is ready", 3*time.Minute)
	redeployed, _ := cs.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
	if *redeployed.Spec.Replicas != 0 {
		t.Errorf("the original runs again next to the dev container: replicas %d", *redeployed.Spec.Replicas)
	}

	// SIGINT: up ends, the dev container stays (exec still works).
	_ = up.cmd.Process.Signal(syscall.SIGINT)
	select {
	case err := <-up.done:
		if err != nil || !strings.Contains(up.output(), "stays active") {
			t.Errorf("up after SIGINT: %v\n%s", err, up.output())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("up did not end after SIGINT")
	}
	if _, _, err := u.run("exec", "web", "--namespace", ns, "--", "true"); err != nil {
		t.Errorf("exec after up ended: %v", err)
	}

	u.mustRun("down", "web", "--namespace", ns)
	after, err := cs.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The redeploy changed the template on purpose; everything else is as deployed.
	want := redeployed.Spec.DeepCopy()
	want.Replicas = orig.Spec.Replicas
	if !equality.Semantic.DeepEqual(*want, after.Spec) {
		t.Errorf("spec after down differs:\nwant %+v\ngot  %+v", *want, after.Spec)
	}
	for _, k := range []string{"dev.devtool/replicas", "dev.devtool/spec-digest", "dev.devtool/dev-active"} {
		if _, ok := after.Annotations[k]; ok {
			t.Errorf("annotation %s left", k)
		}
	}
	if _, _, err := u.run("exec", "web", "--namespace", ns, "--", "true"); err == nil {
		t.Error("exec after down: want an error")
	}
}

// TestDevDownAfterKill: up killed with SIGKILL and its state folder removed; down restores.
func TestDevDownAfterKill(t *testing.T) {
	c := testcluster.Connect(t)
	ns := c.Namespace(t)
	u := newUser(t, c)
	writeHello(t, u, freePort(t))
	withAgent(t, u)
	ctx := context.Background()
	cs := c.Clientset
	u.mustRun("deploy", "--namespace", ns, "--wait", "--timeout", "4m")
	before, err := cs.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	up := u.start("up", "web", "--namespace", ns)
	up.waitLine(t, "ready", 3*time.Minute)
	_ = up.cmd.Process.Kill()
	<-up.done
	if err := os.RemoveAll(filepath.Join(u.home, ".devtool", "dev")); err != nil {
		t.Fatal(err)
	}
	u.mustRun("down", "web", "--namespace", ns, "--volumes")
	after, err := cs.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(before.Spec, after.Spec) {
		t.Errorf("spec after down differs:\nbefore %+v\nafter  %+v", before.Spec, after.Spec)
	}
	if _, err := cs.AppsV1().Deployments(ns).Get(ctx, "web-devtool", metav1.GetOptions{}); err == nil {
		t.Error("mirror left")
	}
}

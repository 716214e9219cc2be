//go:build integration

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devtool/devtool/internal/agentbin"
	"github.com/devtool/devtool/internal/dev"
	"github.com/devtool/devtool/internal/devssh"
	"github.com/devtool/devtool/internal/filesync"
	"github.com/devtool/devtool/internal/kube"
	"github.com/devtool/devtool/internal/manifest"
	"github.com/devtool/devtool/internal/testcluster"
)

// The sync tests and benchmarks drive internal/dev directly (Activate, Install, PodDialer)
// instead of the devtool binary, so they can cut the port-forward stream themselves, run
// remote commands over the same SSH connection and time the engine precisely.

// syncAgent builds devtool-agent for the cluster's nodes once per test binary (as withAgent
// does for the e2e user, but usable from benchmarks).
func syncAgent(tb testing.TB) string {
	agentOnce.Do(func() {
		dir, err := os.MkdirTemp("", "devtool-agent-")
		if err != nil {
			agentErr = err
			return
		}
		cleanups = append(cleanups, func() { os.RemoveAll(dir) })
		agentPath = filepath.Join(dir, "devtool-agent")
		cmd := exec.Command("go", "build", "-trimpath", "-o", agentPath, "./cmd/devtool-agent")
		cmd.Dir = filepath.Join("..", "..")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
		if out, err := cmd.CombinedOutput(); err != nil {
			agentErr = fmt.Errorf("building devtool-agent: %v\n%s", err, out)
		}
	})
	if agentErr != nil {
		tb.Fatal(agentErr)
	}
	if p := os.Getenv(agentbin.EnvBinary); p != "" {
		return p
	}
	return agentPath
}

// syncEnv is one dev container with the agent running, reached through a real port-forward.
type syncEnv struct {
	tb     testing.TB
	c      *testcluster.Cluster
	ns     string
	up     *dev.Up
	active *dev.Active
	dialer *dev.PodDialer
	signer ssh.Signer
	known  string

	mu   sync.Mutex
	conn net.Conn // the newest port-forward stream
}

// newSyncEnv deploys a busybox Deployment "web" and activates its dev container with the
// remote folder /app (on the dev volume) and the agent installed.
func newSyncEnv(tb testing.TB, ctx context.Context, localRoot string) *syncEnv {
	tb.Helper()
	c := testcluster.Connect(tb)
	ns := c.Namespace(tb)
	agent := syncAgent(tb)
	grace := int64(1)
	replicas := int32(1)
	labels := map[string]string{"app": "web"}
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
				TerminationGracePeriodSeconds: &grace,
				Containers: []corev1.Container{{Name: "web", Image: testcluster.Image, ImagePullPolicy: corev1.PullIfNotPresent,
					Command: []string{"sh", "-c", "exec httpd -f -p 8080 -h /tmp"}}},
			}}}}
	if _, err := c.Clientset.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		tb.Fatal(err)
	}
	keyDir := tb.TempDir()
	signer, err := devssh.LoadOrCreateKey(filepath.Join(keyDir, "id_ed25519"))
	if err != nil {
		tb.Fatal(err)
	}
	d := &manifest.Dev{Name: "web", Sync: []manifest.Sync{{Local: localRoot, Remote: "/app"}},
		PersistentVolume: &manifest.PersistentVolume{Enabled: true, Size: "4Gi"}}
	getenv := func(k string) string {
		if k == agentbin.EnvBinary {
			return agent
		}
		return ""
	}
	u := &dev.Up{Kube: c.Client, Namespace: ns, Dev: d,
		Agent:         func(arch string) ([]byte, string, error) { return agentbin.ForEnv(arch, getenv) },
		AuthorizedKey: ssh.MarshalAuthorizedKey(signer.PublicKey())}
	a, dialer, err := u.Start(ctx)
	if err != nil {
		tb.Fatalf("activating the dev container: %v", err)
	}
	return &syncEnv{tb: tb, c: c, ns: ns, up: u, active: a, dialer: dialer, signer: signer, known: filepath.Join(keyDir, "known_hosts")}
}

// dial opens a port-forward stream to the agent, remembering it so cut can close it.
func (e *syncEnv) dial(ctx context.Context) (net.Conn, error) {
	conn, err := e.dialer.Dial(ctx)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	e.conn = conn
	e.mu.Unlock()
	return conn, nil
}

// cut closes the current port-forward stream (what a network drop does to the connection).
func (e *syncEnv) cut() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.conn != nil {
		e.conn.Close()
	}
}

func (e *syncEnv) clientConfig() devssh.ClientConfig {
	return devssh.ClientConfig{Signer: e.signer, KnownHostsFile: e.known, KeepaliveInterval: time.Second}
}

// sshClient dials one SSH connection (no reconnection), closed when the test ends.
func (e *syncEnv) sshClient(ctx context.Context) *devssh.Client {
	e.tb.Helper()
	// The agent starts in the background after its upload: retry until it listens.
	deadline := time.Now().Add(time.Minute)
	for {
		conn, err := e.dial(ctx)
		if err == nil {
			var cl *devssh.Client
			if cl, err = devssh.Dial(ctx, conn, e.clientConfig()); err == nil {
				e.tb.Cleanup(func() { cl.Close() })
				return cl
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			e.tb.Fatalf("connecting to the agent: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// pod is the dev container's current pod.
func (e *syncEnv) pod() string { return e.dialer.Pod() }

// kexec runs a shell script in the dev container through the Kubernetes exec API (independent
// of the port-forward), returning stdout.
func (e *syncEnv) kexec(ctx context.Context, pod, script string, stdin io.Reader) (string, error) {
	var out, errb bytes.Buffer
	err := e.c.Exec(ctx, kube.ExecOptions{Namespace: e.ns, Pod: pod, Container: e.active.Container,
		Command: []string{"sh", "-c", script}, Stdin: stdin, Stdout: &out, Stderr: &errb})
	if err != nil {
		return out.String(), fmt.Errorf("%w: %s", err, errb.String())
	}
	return out.String(), nil
}

// sshRun runs a shell script over an SSH connection and returns its stdout; a non-zero exit
// is an error carrying stderr.
func sshRun(ctx context.Context, cl *devssh.Client, script string, stdin io.Reader) (string, error) {
	var out, errb bytes.Buffer
	code, err := cl.Exec(ctx, devssh.ExecOptions{Command: []string{"sh", "-c", script}, Stdin: stdin, Stdout: &out, Stderr: &errb})
	if err == nil && code != 0 {
		err = fmt.Errorf("exit %d: %s", code, errb.String())
	}
	return out.String(), err
}

// syncRunner runs a filesync client over a devssh Session (reconnecting) until stopped.
type syncRunner struct {
	sess   *devssh.Session
	client *filesync.Client
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	events []devssh.Event
}

func (e *syncEnv) startSync(ctx context.Context, sc *filesync.Client) *syncRunner {
	ctx, cancel := context.WithCancel(ctx)
	r := &syncRunner{client: sc, cancel: cancel}
	cfg := e.clientConfig()
	cfg.OnEvent = func(ev devssh.Event) {
		r.mu.Lock()
		r.events = append(r.events, ev)
		r.mu.Unlock()
	}
	r.sess = devssh.NewSession(e.dial, cfg)
	conns := make(chan dev.Opener, 1)
	r.wg.Add(3)
	go func() { defer r.wg.Done(); _ = r.sess.Run(ctx) }()
	go func() {
		defer r.wg.Done()
		loop := &dev.SyncLoop{Client: sc}
		_ = loop.Run(ctx, conns)
	}()
	go func() {
		defer r.wg.Done()
		for {
			select {
			case <-ctx.Done():
				return
			case ev := <-r.sess.Events():
				if ev.Client == nil {
					continue
				}
				cl := ev.Client
				select {
				case conns <- func() (io.ReadWriteCloser, error) { return cl.OpenSubsystem(dev.SyncSubsystem) }:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return r
}

func (r *syncRunner) stop() {
	r.cancel()
	r.wg.Wait()
}

func (r *syncRunner) eventLog() []devssh.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]devssh.Event(nil), r.events...)
}

func kubeExecOpts(e *syncEnv, pod string, cmd []string, stdin io.Reader, stdout io.Writer, stderr ...io.Writer) kube.ExecOptions {
	o := kube.ExecOptions{Namespace: e.ns, Pod: pod, Container: e.active.Container, Command: cmd, Stdin: stdin, Stdout: stdout, Stderr: io.Discard}
	if len(stderr) > 0 {
		o.Stderr = stderr[0]
	}
	return o
}

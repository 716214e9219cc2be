//go:build integration

package e2e

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devtool/devtool/internal/deploy"
	"github.com/devtool/devtool/internal/testcluster"
)

// TestManifestComposeSubset: deploy.compose with a subset of services is applied after the
// commands, into the same environment and state record.
func TestManifestComposeSubset(t *testing.T) {
	c := testcluster.Connect(t)
	ns := c.Namespace(t)
	u := newUser(t, c)
	u.write("compose.yml", `services:
  web:
    image: docker.io/library/busybox:local
    command: sleep 3600
  worker:
    image: docker.io/library/busybox:local
    command: sleep 3600
`)
	u.write("devtool.yml", `name: mixed
deploy:
  commands:
    - name: cm
      command: kubectl create configmap from-command --dry-run=client -o yaml | kubectl apply -f -
  compose:
    - {file: compose.yml, services: [web]}
`)
	ctx := context.Background()
	cs := c.Clientset
	u.mustRun("deploy", "--namespace", ns, "--wait", "--timeout", "4m")
	if _, err := cs.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{}); err != nil {
		t.Errorf("deployment web: %v", err)
	}
	if _, err := cs.AppsV1().Deployments(ns).Get(ctx, "worker", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("worker is not in the subset but was deployed: %v", err)
	}
	if _, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "from-command", metav1.GetOptions{}); err != nil {
		t.Errorf("configmap from the command: %v", err)
	}
	st, err := (&deploy.StateStore{Clientset: cs, Namespace: ns}).Get(ctx, "mixed")
	if err != nil || st == nil || st.Status != deploy.StatusDeployed || !strings.Contains(st.Manifest, "compose.yml") {
		t.Fatalf("state: %v %+v", err, st)
	}
	u.mustRun("destroy", "--namespace", ns, "--wait")
	if _, err := cs.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("deployment web after destroy: %v", err)
	}
}

// TestManifestInterrupt: Ctrl-C (SIGINT) stops the running command; the state records the
// cancellation and the lock is released.
func TestManifestInterrupt(t *testing.T) {
	c := testcluster.Connect(t)
	ns := c.Namespace(t)
	u := newUser(t, c)
	u.write("devtool.yml", `name: long
deploy:
  - name: sleeper
    command: echo started; sleep 120
  - name: after
    command: kubectl create configmap after
`)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, devtoolBin, "deploy", "--namespace", ns)
	cmd.Dir = u.dir
	cmd.Env = []string{"HOME=" + u.home, "DEVTOOL_HOME=" + u.home, "KUBECONFIG=" + c.Kubeconfig, "PATH=" + os.Getenv("PATH"), "NO_COLOR=1"}
	var errOut syncBuffer
	cmd.Stderr = &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for !strings.Contains(errOut.String(), "sleeper | started") {
		if ctx.Err() != nil {
			t.Fatalf("the command never started:\n%s", errOut.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	start := time.Now()
	_ = cmd.Process.Signal(syscall.SIGINT)
	err := cmd.Wait()
	t.Logf("stderr:\n%s", errOut.String())
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 130 {
		t.Errorf("exit: %v, want 130", err)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("Ctrl-C took %s", d)
	}
	st, err := (&deploy.StateStore{Clientset: c.Clientset, Namespace: ns}).Get(context.Background(), "long")
	if err != nil || st == nil || st.Status != deploy.StatusError || !strings.Contains(st.Error, "cancelled") {
		t.Errorf("state: %v %+v", err, st)
	}
	if _, err := c.Clientset.CoordinationV1().Leases(ns).Get(context.Background(), deploy.LockName("long"), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the lock was not released: %v", err)
	}
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

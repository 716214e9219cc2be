//go:build integration

package e2e

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devtool/devtool/internal/testcluster"
)

// TestDevUpOneOwner: a dev container has one owner. A second up of it from another home and
// folder is refused naming the first (its folder), leaving the first running; --force takes it
// over and the first up stops saying by whom; both machines' keys are in the dev container's
// authorized_keys (the second's up added its key, it used to replace the file).
func TestDevUpOneOwner(t *testing.T) {
	c := testcluster.Connect(t)
	ns := c.Namespace(t)
	cs := c.Clientset
	a, b := newUser(t, c), newUser(t, c)
	writeHello(t, a, freePort(t))
	writeHello(t, b, freePort(t))
	withAgent(t, a)
	withAgent(t, b)
	a.mustRun("deploy", "--namespace", ns, "--wait", "--timeout", "4m")

	upA := a.start("up", "web", "--namespace", ns)
	upA.waitLine(t, "ready", 3*time.Minute)

	_, errOut, err := b.run("up", "web", "--namespace", ns)
	if err == nil || !strings.Contains(errOut, "held by another 'devtool up'") || !strings.Contains(errOut, a.dir) || !strings.Contains(errOut, "--force") {
		t.Fatalf("a second up: %v, want a refusal naming %s and --force:\n%s", err, a.dir, errOut)
	}
	select {
	case err := <-upA.done:
		t.Fatalf("the first up ended when the second was refused: %v\n%s", err, upA.output())
	default:
	}

	upB := b.start("up", "web", "--namespace", ns, "--force")
	upB.waitLine(t, "ready", 3*time.Minute)
	upA.waitLine(t, "was taken over by", 2*time.Minute)
	select {
	case err := <-upA.done:
		if err == nil {
			t.Errorf("the up taken over ended with success:\n%s", upA.output())
		}
	case <-time.After(time.Minute):
		t.Fatalf("the up taken over did not end:\n%s", upA.output())
	}
	l, err := cs.CoordinationV1().Leases(ns).Get(context.Background(), "devtool-dev-web", metav1.GetOptions{})
	if err != nil || l.Annotations["dev.devtool/holder-folder"] != b.dir {
		t.Errorf("the lease after --force: %v, holder folder %q, want %q", err, l.Annotations["dev.devtool/holder-folder"], b.dir)
	}

	keys, _, err := b.run("exec", "web", "--namespace", ns, "--", "cat", "/devtool/ssh/authorized_keys")
	if err != nil || len(strings.Fields(keys)) != 4 {
		t.Errorf("authorized_keys after two machines' ups: %v\n%s", err, keys)
	}

	_ = upB.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-upB.done:
	case <-time.After(30 * time.Second):
		t.Fatal("up did not end after SIGINT")
	}
	if _, err := cs.CoordinationV1().Leases(ns).Get(context.Background(), "devtool-dev-web", metav1.GetOptions{}); err == nil {
		t.Error("the lease is left after its up ended")
	}
	b.mustRun("down", "web", "--namespace", ns, "--volumes")
}

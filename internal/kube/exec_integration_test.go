//go:build integration

package kube_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/devtool/devtool/internal/kube"
	"github.com/devtool/devtool/internal/testcluster"
)

// TestExecOneWriterForBothStreams: one buffer given as both Stdout and Stderr (as os/exec allows)
// gets every byte of a command that writes to both. The exec client copies the two streams in two
// goroutines; before kube.Exec serialized them, a shared bytes.Buffer came back empty or zeroed in
// about a quarter of quick execs on a loaded machine.
func TestExecOneWriterForBothStreams(t *testing.T) {
	c := testcluster.Connect(t)
	ns := c.Namespace(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, err := kube.Load(kube.LoadOptions{Kubeconfig: c.Kubeconfig})
	if err != nil {
		t.Fatal(err)
	}
	startPod(t, ctx, cl.Clientset, ns, "sh", "sleep", "3600")
	for i := 0; i < 20; i++ {
		var out bytes.Buffer
		err := cl.Exec(ctx, kube.ExecOptions{Namespace: ns, Pod: "sh",
			Command: []string{"sh", "-c", "echo o1; echo e1 >&2; echo o2; echo e2 >&2"}, Stdout: &out, Stderr: &out})
		if err != nil {
			t.Fatalf("exec %d: %v", i, err)
		}
		for _, l := range []string{"o1\n", "e1\n", "o2\n", "e2\n"} {
			if !strings.Contains(out.String(), l) {
				t.Fatalf("exec %d: output %q lacks %q", i, out.String(), l)
			}
		}
		if out.Len() != 12 {
			t.Fatalf("exec %d: output %q", i, out.String())
		}
	}
}

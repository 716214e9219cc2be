//go:build unix

package initcmd

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestDetectSpecialFiles: the files init scans (YAML manifests in sub-folders) may be FIFOs,
// devices or huge; the scan neither blocks nor reads them, and still finds the real manifests.
func TestDetectSpecialFiles(t *testing.T) {
	dir := t.TempDir()
	k8s := filepath.Join(dir, "k8s")
	if err := os.MkdirAll(k8s, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(k8s, "ok.yaml"), []byte("apiVersion: v1\nkind: ConfigMap\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"fifo", "zero", "big", "linkfifo"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo", "a.yaml"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/dev/zero", filepath.Join(dir, "zero", "a.yaml")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "linkfifo", "p"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "linkfifo", "p"), filepath.Join(dir, "linkfifo", "a.yaml")); err != nil {
		t.Fatal(err)
	}
	big, err := os.Create(filepath.Join(dir, "big", "a.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := big.Truncate(maxScannedBytes + 1); err != nil {
		t.Fatal(err)
	}
	big.Close()

	done := make(chan struct{})
	var g *Guesses
	go func() {
		defer close(done)
		g, err = Detect(context.Background(), dir, "shop")
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Detect still running after 30s (blocked on a FIFO or reading /dev/zero?)")
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(g.Manifests) != 1 || g.Manifests[0] != "k8s" { // the special files are not manifests
		t.Fatalf("manifests %v", g.Manifests)
	}
}

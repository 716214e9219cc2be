package filesync

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestInitialSyncBothWays(t *testing.T) {
	p := newPair(t, ClientOptions{})
	write(t, p.local, "a.txt", "local a")
	write(t, p.local, "dir/sub/b.txt", "local b")
	write(t, p.remote, "c.txt", "remote c")
	write(t, p.remote, "rdir/d.txt", "remote d")
	must(t, os.Symlink("a.txt", filepath.Join(p.local, "link")))
	must(t, os.Chmod(filepath.Join(p.local, "a.txt"), 0o755))
	p.start(ClientOptions{})
	defer p.stop()
	select {
	case <-p.c.Synced():
	case <-time.After(10 * time.Second):
		t.Fatalf("not synced: %+v", p.c.Status())
	}
	p.waitEqual(5 * time.Second)
	write(t, p.local, "dir/new.txt", "new local")
	p.waitEqual(5 * time.Second)
	write(t, p.remote, "rdir/new.txt", "new remote")
	p.waitEqual(5 * time.Second)
	must(t, os.Remove(filepath.Join(p.remote, "a.txt")))
	p.waitEqual(5 * time.Second)
	if _, err := os.Lstat(filepath.Join(p.local, "a.txt")); !os.IsNotExist(err) {
		t.Fatalf("delete not propagated: %v", err)
	}
}

package filesync

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestChangesBelowRenamedFolder: after a folder is renamed on either side, a
// change in one of its subfolders is seen by the watcher under the new path
// (and synchronized at once, not at the next full rescan minutes later). Found
// by the churn test on the cluster (test/e2e/sync_churn_test.go): inotify
// keeps the subfolders' watches, still named by their old path.
func TestChangesBelowRenamedFolder(t *testing.T) {
	p := newPair(t, ClientOptions{})
	write(t, p.local, "a/sub/deep/x.txt", "x")
	write(t, p.remote, "c/sub/deep/z.txt", "z")
	p.start(ClientOptions{})
	defer p.stop()
	synced(t, p)
	p.waitEqual(10 * time.Second)

	must(t, os.Rename(filepath.Join(p.local, "a"), filepath.Join(p.local, "b")))
	must(t, os.Rename(filepath.Join(p.remote, "c"), filepath.Join(p.remote, "d")))
	p.waitEqual(10 * time.Second)

	write(t, p.local, "b/sub/deep/y.txt", "y")
	write(t, p.local, "b/sub/x2.txt", "x2")
	write(t, p.remote, "d/sub/deep/w.txt", "w")
	p.waitEqual(10 * time.Second)
	for _, f := range []string{"b/sub/deep/y.txt", "b/sub/x2.txt", "d/sub/deep/w.txt"} {
		if _, err := os.Stat(filepath.Join(p.remote, f)); err != nil {
			t.Errorf("remote %s: %v", f, err)
		}
		if _, err := os.Stat(filepath.Join(p.local, f)); err != nil {
			t.Errorf("local %s: %v", f, err)
		}
	}
}

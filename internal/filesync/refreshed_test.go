package filesync

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A file hashed within the racy window of its mtime (every file this side just received) is
// hashed again by the next scan; once that scan trusts the hash, the tree says so, so that the
// index is saved and later starts do not hash the file again (they did, every time: the warm
// start took 1.8× as long).
func TestScanReportsClearedRacyFlags(t *testing.T) {
	root := t.TempDir()
	must(t, os.WriteFile(filepath.Join(root, "a"), []byte("just written"), 0o644))
	tr, err := openTree(root, false, testLogger(t))
	must(t, err)
	defer tr.close()
	if _, err := tr.scanAll(false, nil); err != nil {
		t.Fatal(err)
	}
	if !tr.idx["a"].racy {
		t.Skip("the file's mtime is not within the racy window of its first hash (a slow machine)")
	}
	if tr.takeRefreshed() {
		t.Fatal("a new entry counted as refreshed")
	}
	time.Sleep(time.Duration(racyWindow) + 50*time.Millisecond) // out of the racy window
	changed, err := tr.scanAll(false, nil)
	if err != nil || len(changed) != 0 {
		t.Fatalf("second scan: %v %v", changed, err)
	}
	if tr.idx["a"].racy {
		t.Fatal("the second scan kept the racy flag")
	}
	if !tr.takeRefreshed() {
		t.Fatal("the cleared racy flag was not reported: the index would not be saved")
	}
	if tr.takeRefreshed() {
		t.Fatal("reported twice")
	}
}

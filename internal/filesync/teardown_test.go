package filesync

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// TestStoppedScanEndsAndKeepsTheIndex: a scan of a tree whose session is
// ending stops at once, and what it did not see is kept in the index (not
// taken for removed).
func TestStoppedScanEndsAndKeepsTheIndex(t *testing.T) {
	root := t.TempDir()
	for i := 0; i < 20; i++ {
		write(t, root, fmt.Sprintf("d%d/f", i), "x")
	}
	tr, err := openTree(root, false, testLogger(t))
	must(t, err)
	defer tr.close()
	_, err = tr.scanAll(false, nil)
	must(t, err)
	before := len(tr.snapshot())
	walked := 0
	stopAt := 3
	onDir := func(string) {
		walked++
		if walked == stopAt {
			tr.stopped.Store(true)
		}
	}
	_, err = tr.scanAll(false, onDir)
	if !errors.Is(err, errStopped) {
		t.Fatalf("stopped scan: %v, want errStopped", err)
	}
	if walked != stopAt {
		t.Fatalf("the scan went on for %d folders after it was stopped", walked-stopAt)
	}
	if n := len(tr.snapshot()); n != before {
		t.Fatalf("index has %d entries after a stopped scan, %d before", n, before)
	}
}

// TestSaveIndexConcurrently: two sessions saving the same index file at
// once (one ending while the next starts) each write their own temporary
// file: no save fails, the file is whole, and no temporary file is left.
func TestSaveIndexConcurrently(t *testing.T) {
	dir := t.TempDir()
	file := indexFile(dir, "remote", "/src")
	idx := map[string]Entry{"a": {Kind: KindFile, Size: 1, Hash: 1}}
	var wg sync.WaitGroup
	errs := make(chan error, 200)
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				if err := saveIndex(file, "/src", "id", idx); err != nil {
					errs <- err
				}
				if err := saveRules(file+".rules", []ruleFile{{Dir: "", Content: "x\n"}}); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	maps, id, err := loadIndex(file, "/src", 1)
	must(t, err)
	if id != "id" || len(maps[0]) != 1 {
		t.Fatalf("index read back: %v %q", maps, id)
	}
	if _, err := loadRules(file + ".rules"); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".tmp") {
			t.Errorf("temporary file left: %s", filepath.Join(dir, e.Name()))
		}
	}
}

// TestParentBecameAFileIsAChange: a folder above a received path that is a
// file on this side is a change (errVanished: rescanned and reconciled
// again), never an error reported in the status.
func TestParentBecameAFileIsAChange(t *testing.T) {
	root := t.TempDir()
	write(t, root, "a", "a file, not a folder")
	tr, err := openTree(root, false, testLogger(t))
	must(t, err)
	defer tr.close()
	data := []byte("x")
	e := Entry{Kind: KindFile, Size: 1, Hash: newHasherSum(data)}
	_, err = tr.beginPut("a/b", e, Entry{})
	if !errors.Is(err, errVanished) {
		t.Fatalf("put below a file: %v, want errVanished", err)
	}
	if !strings.Contains(err.Error(), "a is a file on this side") {
		t.Fatalf("error does not say what is in the way: %v", err)
	}
}

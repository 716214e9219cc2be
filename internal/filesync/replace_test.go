package filesync

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPutKeepsAFileCreatedMeanwhile: a file created at a path after the
// engine checked that the path was free, just before the received file is
// put there, is kept (the put is refused as a change, and reconciled again).
// Before, the rename replaced it and the person's new file was lost; the
// churn test on the cluster (test/e2e/sync_churn_test.go) lost a content that
// way now and then.
func TestPutKeepsAFileCreatedMeanwhile(t *testing.T) {
	root := t.TempDir()
	tr, err := openTree(root, false, testLogger(t))
	must(t, err)
	defer tr.close()
	data := []byte("from the peer")
	e := Entry{Kind: KindFile, Size: int64(len(data)), Hash: newHasherSum(data)}

	pf, err := tr.beginPut("new.txt", e, Entry{})
	must(t, err)
	must(t, pf.write(data))
	testHookBeforeReplace = func(p string) {
		must(t, os.WriteFile(filepath.Join(root, p), []byte("written meanwhile"), 0o644))
	}
	_, err = pf.commit()
	testHookBeforeReplace = nil
	if !errors.Is(err, errChanged) {
		t.Fatalf("commit over a file created meanwhile: %v, want errChanged", err)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "new.txt")); string(b) != "written meanwhile" {
		t.Fatalf("the file created meanwhile was replaced: %q", b)
	}

	// Without a concurrent writer the put lands, and no temporary file is left.
	pf, err = tr.beginPut("other.txt", e, Entry{})
	must(t, err)
	must(t, pf.write(data))
	if _, err := pf.commit(); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "other.txt")); string(b) != string(data) {
		t.Fatalf("other.txt = %q", b)
	}
	ents, _ := os.ReadDir(root)
	for _, en := range ents {
		if strings.HasPrefix(en.Name(), tmpPrefix) {
			t.Errorf("temporary file left: %s", en.Name())
		}
	}
}

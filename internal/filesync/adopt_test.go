package filesync

import (
	"os"
	"path/filepath"
	"testing"
)

// TestPeerMkdirOfAFolderMadeHere: a user makes d/sub/x on this side; before the watcher's rescan
// of d runs, the peer's mkdir of d finds d already there and takes it into the index. The batch of
// d's Create event still reports d/sub and d/sub/x (the rescan of a known folder does not walk it,
// and x, made before d's watch took, has no event of its own: the sides stayed different with
// nothing pending; found by the long property run, seed 38).
func TestPeerMkdirOfAFolderMadeHere(t *testing.T) {
	root := t.TempDir()
	tr, err := openTree(root, false, testLogger(t))
	must(t, err)
	defer tr.close()
	if _, err := tr.scanAll(false, nil); err != nil {
		t.Fatal(err)
	}
	w, err := newWatcher(root, func(string) bool { return false })
	must(t, err)
	defer w.close()
	must(t, os.MkdirAll(filepath.Join(root, "d", "sub"), 0o755))
	must(t, os.WriteFile(filepath.Join(root, "d", "sub", "x"), []byte("made here"), 0o644))
	if e, err := tr.mkdir("d", Entry{}); err != nil || e.Kind != KindDir {
		t.Fatalf("mkdir of a folder already made: %v %v", e, err)
	}
	batch := map[string]struct{}{"d": {}}
	w.addNewTree("d", 0, batch) // what the watcher does on d's Create event
	paths := make([]string, 0, len(batch))
	for p := range batch {
		paths = append(paths, p)
	}
	changed, _ := tr.scanPaths(paths)
	got := map[string]Kind{}
	for _, it := range changed {
		got[it.Path] = it.E.Kind
	}
	if got["d/sub"] != KindDir || got["d/sub/x"] != KindFile {
		t.Fatalf("the rescan of d's batch reported %v, want d/sub and d/sub/x", got)
	}
	// Once scanned, a later rescan of d (nothing changed) reports nothing.
	if changed, _ := tr.scanPaths([]string{"d"}); len(changed) != 0 {
		t.Fatalf("a second rescan reported %v", changed)
	}
}

// TestNewFolderContentIsRescanned: when a new folder's Create event is handled, everything it
// already holds goes into the batch (made before its watch took, those paths have no event of
// their own), except temporary files; ignored folders are not descended into.
func TestNewFolderContentIsRescanned(t *testing.T) {
	root := t.TempDir()
	w, err := newWatcher(root, func(rel string) bool { return rel == "d/ignored" })
	must(t, err)
	defer w.close()
	for _, p := range []string{"d/x", "d/sub/y", "d/sub/deeper/z", "d/ignored/q", "d/" + tmpPrefix + "partial"} {
		must(t, os.MkdirAll(filepath.Join(root, filepath.Dir(p)), 0o755))
		must(t, os.WriteFile(filepath.Join(root, p), []byte("x"), 0o644))
	}
	pending := map[string]struct{}{}
	w.addNewTree("d", 0, pending)
	for _, p := range []string{"d/x", "d/sub", "d/sub/y", "d/sub/deeper", "d/sub/deeper/z", "d/ignored"} {
		if _, ok := pending[p]; !ok {
			t.Errorf("%s is not in the batch (batch %v)", p, pending)
		}
	}
	for _, p := range []string{"d/ignored/q", "d/" + tmpPrefix + "partial"} {
		if _, ok := pending[p]; ok {
			t.Errorf("%s is in the batch", p)
		}
	}
}

package filesync

import (
	"crypto/rand"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func writeRandom(t *testing.T, p string, n int) {
	t.Helper()
	b := make([]byte, n)
	_, _ = rand.Read(b)
	must(t, os.MkdirAll(filepath.Dir(p), 0o755))
	must(t, os.WriteFile(p, b, 0o644))
}

// TestRenameIsAMove: files renamed or moved (a folder moved) on either side are moved on the
// other, not sent again: the bytes that cross are a small part of their content. Two files with
// the same content renamed together, and an empty file, end right too.
func TestRenameIsAMove(t *testing.T) {
	p := newPair(t, ClientOptions{})
	writeRandom(t, filepath.Join(p.local, "big.bin"), 512<<10)
	writeRandom(t, filepath.Join(p.local, "dir/a.bin"), 256<<10)
	writeRandom(t, filepath.Join(p.local, "dir/sub/b.bin"), 256<<10)
	writeRandom(t, filepath.Join(p.remote, "theirs.bin"), 512<<10)
	writeRandom(t, filepath.Join(p.local, "twin1"), 128<<10)
	b, err := os.ReadFile(filepath.Join(p.local, "twin1"))
	must(t, err)
	must(t, os.WriteFile(filepath.Join(p.local, "twin2"), b, 0o644))
	must(t, os.WriteFile(filepath.Join(p.local, "empty"), nil, 0o644))
	p.start(ClientOptions{})
	defer p.stop()
	synced(t, p)

	// Local renames: 1.25 MiB of files moved on the remote.
	sent := p.sent.Load()
	must(t, os.Rename(filepath.Join(p.local, "big.bin"), filepath.Join(p.local, "renamed.bin")))
	must(t, os.Rename(filepath.Join(p.local, "dir"), filepath.Join(p.local, "moved")))
	must(t, os.Rename(filepath.Join(p.local, "twin1"), filepath.Join(p.local, "twin1.new")))
	must(t, os.Rename(filepath.Join(p.local, "twin2"), filepath.Join(p.local, "twin2.new")))
	must(t, os.Rename(filepath.Join(p.local, "empty"), filepath.Join(p.local, "empty.new")))
	p.waitEqual(10 * time.Second)
	if n := p.sent.Load() - sent; n > 64<<10 {
		t.Errorf("local renames sent %d bytes: the files were sent again", n)
	}
	if _, err := os.Lstat(filepath.Join(p.remote, "dir")); !os.IsNotExist(err) {
		t.Errorf("the moved folder's old name is still on the remote: %v", err)
	}

	// A remote rename into a new folder: the local file is moved.
	received := p.received.Load()
	must(t, os.Mkdir(filepath.Join(p.remote, "sub2"), 0o755))
	must(t, os.Rename(filepath.Join(p.remote, "theirs.bin"), filepath.Join(p.remote, "sub2/theirs.bin")))
	p.waitEqual(10 * time.Second)
	if n := p.received.Load() - received; n > 64<<10 {
		t.Errorf("a remote rename received %d bytes: the file was fetched again", n)
	}
	if st := p.c.Status().Folders[0]; len(st.Conflicts) != 0 || len(st.Errors) != 0 || st.Pending != 0 {
		t.Errorf("renames left conflicts, errors or pending paths: %+v", st)
	}
}

// TestRenameSeenInTwoBatches: a file moved on one side whose removal reaches the engine before
// its creation (a watcher batch apart, as when it is moved into a folder made just before) is
// still moved on the other side, not fetched again: the removal, held, pairs with the creation
// that comes within the hold. Without heldPartners it was fetched whole.
func TestRenameSeenInTwoBatches(t *testing.T) {
	p, received, sent := twoFilesSynced(t)
	stash := filepath.Join(filepath.Dir(p.remote), "stash.bin")
	must(t, os.Rename(filepath.Join(p.remote, "theirs.bin"), stash))
	stashL := filepath.Join(filepath.Dir(p.local), "stashL.bin")
	must(t, os.Rename(filepath.Join(p.local, "mine.bin"), stashL))
	time.Sleep(holdQuiet / 3) // the removals are seen and held
	must(t, os.Mkdir(filepath.Join(p.remote, "sub"), 0o755))
	must(t, os.Rename(stash, filepath.Join(p.remote, "sub/theirs.bin")))
	must(t, os.Mkdir(filepath.Join(p.local, "sub"), 0o755))
	must(t, os.Rename(stashL, filepath.Join(p.local, "sub/mine.bin")))
	movedNotSent(t, p, received, sent, "a rename seen in two batches")
}

// TestRenameSeenCreationFirst: a file moved into a folder made just before whose creation
// reaches the engine before its removal (the watcher read the new folder before it processed the
// removal's event) is moved on the other side, not sent again: the creation waits newFolderHold
// (holdCreations) and pairs with the removal that comes meanwhile. Both directions. The test
// makes that order certain: a new folder holding a copy, the original removed later.
func TestRenameSeenCreationFirst(t *testing.T) {
	p, received, sent := twoFilesSynced(t)
	// A folder holding a copy of each file arrives whole (the watcher finds the copy by reading
	// it, with the folder); the original is removed a watcher batch later.
	for _, side := range []struct{ root, name, dir string }{{p.remote, "theirs.bin", "sub-r"}, {p.local, "mine.bin", "sub-l"}} {
		b, err := os.ReadFile(filepath.Join(side.root, side.name))
		must(t, err)
		stash := filepath.Join(filepath.Dir(side.root), "stash-"+side.dir)
		must(t, os.Mkdir(stash, 0o755))
		must(t, os.WriteFile(filepath.Join(stash, side.name), b, 0o644))
		must(t, os.Rename(stash, filepath.Join(side.root, side.dir)))
	}
	time.Sleep(newFolderHold / 4) // the creations are seen first
	must(t, os.Remove(filepath.Join(p.remote, "theirs.bin")))
	must(t, os.Remove(filepath.Join(p.local, "mine.bin")))
	movedNotSent(t, p, received, sent, "a move seen creation first")
	for _, q := range []string{"theirs.bin", "mine.bin"} {
		if _, err := os.Lstat(filepath.Join(p.local, q)); !os.IsNotExist(err) {
			t.Errorf("%s is still here: %v", q, err)
		}
	}
}

// twoFilesSynced is a synchronized pair holding theirs.bin, made on the remote, and mine.bin, made
// here (512 KiB each), and the bytes received and sent so far; it stops when the test ends.
func twoFilesSynced(t *testing.T) (p *pair, received, sent int64) {
	t.Helper()
	p = newPair(t, ClientOptions{})
	writeRandom(t, filepath.Join(p.remote, "theirs.bin"), 512<<10)
	writeRandom(t, filepath.Join(p.local, "mine.bin"), 512<<10)
	p.start(ClientOptions{})
	t.Cleanup(p.stop)
	synced(t, p)
	return p, p.received.Load(), p.sent.Load()
}

// movedNotSent waits for p's sides to agree and fails the test if what moved the two files
// fetched or sent either of them again (more than 64 KiB either way since received and sent).
func movedNotSent(t *testing.T, p *pair, received, sent int64, what string) {
	t.Helper()
	p.waitEqual(10 * time.Second)
	if n := p.received.Load() - received; n > 64<<10 {
		t.Errorf("%s: the remote move received %d bytes: the file was fetched again", what, n)
	}
	if n := p.sent.Load() - sent; n > 64<<10 {
		t.Errorf("%s: the local move sent %d bytes: the file was sent again", what, n)
	}
}

// TestPairRenames: which removals and creations become moves.
func TestPairRenames(t *testing.T) {
	file := func(h uint64, size int64, exec bool) Entry {
		return Entry{Kind: KindFile, Hash: h, Size: size, Exec: exec}
	}
	a, b, exe, empty := file(1, 10, false), file(2, 10, false), file(1, 10, true), file(3, 0, false)
	none := Entry{}
	plan := []action{
		{do: actRemoteRm, p: "old", l: none, r: a, remove: true},
		{do: actPush, p: "new", l: a, r: none},
		{do: actRemoteRm, p: "x", l: none, r: b, remove: true},
		{do: actPush, p: "y", l: exe, r: none}, // another mode: not x's content
		{do: actRemoteRm, p: "e1", l: none, r: empty, remove: true},
		{do: actPush, p: "e2", l: empty, r: none}, // empty: nothing to save
		{do: actLocalRm, p: "theirs-old", l: b, r: none, remove: true},
		{do: actPull, p: "theirs-new", l: none, r: b},
		{do: actRemoteRm, p: "failed-before", l: none, r: file(9, 5, false), remove: true},
		{do: actPush, p: "after", l: file(9, 5, false), r: none},
		{do: actPush, p: "replace", l: a, r: b}, // an update, not a creation
	}
	f := &cfolder{log: testLogger(t), noRename: map[string]struct{}{"failed-before": {}}}
	out := pairRenames(f, plan)
	got := map[string]string{}
	for _, x := range out {
		switch x.do {
		case actRemoteRename:
			got["remote "+x.p] = x.to
		case actLocalRename:
			got["local "+x.p] = x.to
		default:
			got[x.p] = "kept"
		}
	}
	want := map[string]string{
		"remote old": "new", "local theirs-old": "theirs-new",
		"x": "kept", "y": "kept", "e1": "kept", "e2": "kept", "failed-before": "kept", "after": "kept", "replace": "kept",
	}
	if len(got) != len(want) {
		t.Errorf("plan %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %q, want %q (plan %v)", k, got[k], v, got)
		}
	}
	for _, x := range out {
		if x.do == actRemoteRename && (x.r != a || x.l != none) {
			t.Errorf("the move expects %+v there and %+v here, want the removal's", x.r, x.l)
		}
	}
}

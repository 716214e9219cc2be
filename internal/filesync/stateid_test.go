package filesync

import (
	"bytes"
	"encoding/binary"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/cespare/xxhash/v2"
)

// lockedBuf collects log output from several goroutines.
type lockedBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func logTo(buf *lockedBuf) *slog.Logger {
	return slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

const resyncLine = "is new (volume replaced?): resynchronizing without deletes"

// stateIDTree writes the tree every test below starts from.
func stateIDTree(t *testing.T, root string) map[string]string {
	files := map[string]string{"a.txt": "a", "dir/b.txt": "b", "dir/sub/c.txt": "c", "d.txt": "d"}
	for p, c := range files {
		write(t, root, p, c)
	}
	return files
}

func wantFile(t *testing.T, root, rel, content string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(rel)))
	if err != nil {
		t.Fatalf("%s lost: %v", rel, err)
	}
	if string(b) != content {
		t.Fatalf("%s holds %q, want %q", rel, b, content)
	}
}

// A fresh volume (remote root and agent state wiped) under a client that
// keeps its base: no local file is deleted, the files go up again.
func TestStateIDFreshRemoteDeletesNothing(t *testing.T) {
	p := newPair(t, ClientOptions{})
	files := stateIDTree(t, p.local)
	p.start(ClientOptions{})
	synced(t, p)
	p.stop()

	must(t, os.RemoveAll(p.remote))
	must(t, os.RemoveAll(p.serverDir))
	write(t, p.local, "new-local.txt", "made while away")
	files["new-local.txt"] = "made while away"

	var logs lockedBuf
	p.start(ClientOptions{Logger: logTo(&logs)})
	defer p.stop()
	synced(t, p)
	for rel, c := range files {
		wantFile(t, p.local, rel, c)
		wantFile(t, p.remote, rel, c)
	}
	if n := strings.Count(logs.String(), resyncLine); n != 1 {
		t.Fatalf("want one resync line, got %d:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), "remote state for "+p.remote) {
		t.Fatalf("resync line does not name the folder:\n%s", logs.String())
	}
	if st := p.c.Status(); len(st.Folders[0].Conflicts) != 0 {
		t.Fatalf("conflicts on a plain re-upload: %+v", st.Folders[0].Conflicts)
	}
}

// A new volume holding some of the files with other content: each
// difference becomes a conflict with both versions kept; nothing is lost.
func TestStateIDFreshRemoteKeepsConflicts(t *testing.T) {
	p := newPair(t, ClientOptions{})
	files := stateIDTree(t, p.local)
	p.start(ClientOptions{})
	synced(t, p)
	p.stop()

	must(t, os.RemoveAll(p.remote))
	must(t, os.RemoveAll(p.serverDir))
	write(t, p.remote, "a.txt", "remote a")
	write(t, p.remote, "dir/sub/c.txt", "remote c")
	write(t, p.remote, "only-remote.txt", "r")

	p.start(ClientOptions{})
	defer p.stop()
	synced(t, p)
	for rel, c := range files {
		wantFile(t, p.local, rel, c) // the local version keeps the name
	}
	wantFile(t, p.local, "only-remote.txt", "r")
	for rel, remote := range map[string]string{"a.txt": "remote a", "dir/sub/c.txt": "remote c"} {
		dir, name := filepath.Split(filepath.Join(p.local, filepath.FromSlash(rel)))
		cc := conflictCopies(t, dir, strings.TrimSuffix(name, ".txt"))
		if len(cc) != 1 || readFile(t, cc[0]) != remote {
			t.Fatalf("%s: conflict copies %v, want one holding %q", rel, cc, remote)
		}
	}
	if st := p.c.Status(); len(st.Folders[0].Conflicts) != 2 {
		t.Fatalf("want 2 conflicts reported, got %+v", st.Folders[0].Conflicts)
	}
}

// The same agent state (a warm volume): a file deleted remotely between
// sessions is deleted locally, so the guard is no blanket "never delete".
func TestStateIDWarmRemotePropagatesDeletes(t *testing.T) {
	p := newPair(t, ClientOptions{})
	stateIDTree(t, p.local)
	p.start(ClientOptions{})
	synced(t, p)
	p.stop()

	must(t, os.Remove(filepath.Join(p.remote, "a.txt")))
	must(t, os.RemoveAll(filepath.Join(p.remote, "dir/sub")))
	must(t, os.Remove(filepath.Join(p.local, "d.txt")))

	var logs lockedBuf
	p.start(ClientOptions{Logger: logTo(&logs)})
	defer p.stop()
	synced(t, p)
	for _, rel := range []string{"a.txt", "dir/sub/c.txt", "dir/sub", "d.txt"} {
		for _, root := range []string{p.local, p.remote} {
			if _, err := os.Lstat(filepath.Join(root, rel)); !os.IsNotExist(err) {
				t.Fatalf("%s: delete not propagated (%v)", filepath.Join(root, rel), err)
			}
		}
	}
	wantFile(t, p.local, "dir/b.txt", "b")
	if strings.Contains(logs.String(), resyncLine) {
		t.Fatalf("warm session resynchronized:\n%s", logs.String())
	}
}

// The agent's state folder lost, its files kept: a resync without deletes;
// a local delete made meanwhile is undone (the file comes back), the safe
// side of not knowing the base.
func TestStateIDRemoteStateLostFilesKept(t *testing.T) {
	p := newPair(t, ClientOptions{})
	files := stateIDTree(t, p.local)
	p.start(ClientOptions{})
	synced(t, p)
	p.stop()

	must(t, os.RemoveAll(p.serverDir))
	must(t, os.Remove(filepath.Join(p.local, "d.txt")))
	write(t, p.remote, "new-remote.txt", "nr")
	write(t, p.local, "new-local.txt", "nl")

	var logs lockedBuf
	p.start(ClientOptions{Logger: logTo(&logs)})
	synced(t, p)
	for rel, c := range files {
		wantFile(t, p.local, rel, c)
		wantFile(t, p.remote, rel, c)
	}
	wantFile(t, p.local, "new-remote.txt", "nr")
	wantFile(t, p.remote, "new-local.txt", "nl")
	if !strings.Contains(logs.String(), resyncLine) {
		t.Fatalf("no resync line:\n%s", logs.String())
	}
	if st := p.c.Status(); len(st.Folders[0].Conflicts) != 0 {
		t.Fatalf("conflicts for equal files: %+v", st.Folders[0].Conflicts)
	}
	p.stop()

	// The new ID was saved on both sides: the next session is warm again
	// and carries deletes.
	must(t, os.Remove(filepath.Join(p.remote, "a.txt")))
	logs = lockedBuf{}
	p.start(ClientOptions{Logger: logTo(&logs)})
	defer p.stop()
	synced(t, p)
	if _, err := os.Lstat(filepath.Join(p.local, "a.txt")); !os.IsNotExist(err) {
		t.Fatalf("delete not propagated after the resync session (%v)", err)
	}
	if strings.Contains(logs.String(), resyncLine) {
		t.Fatalf("second session resynchronized again:\n%s", logs.String())
	}
}

// The agent's index kept but its folder emptied (the files on another
// volume than the state): a new ID, no local file deleted.
func TestStateIDRemoteRootEmptiedStateKept(t *testing.T) {
	p := newPair(t, ClientOptions{})
	files := stateIDTree(t, p.local)
	p.start(ClientOptions{})
	synced(t, p)
	p.stop()

	must(t, os.RemoveAll(p.remote))
	p.start(ClientOptions{})
	defer p.stop()
	synced(t, p)
	for rel, c := range files {
		wantFile(t, p.local, rel, c)
		wantFile(t, p.remote, rel, c)
	}
}

// The server keeps one ID per index: loaded when readable, new (and saved
// at once) otherwise.
func TestStateIDServerLoad(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	state := filepath.Join(dir, "state")
	write(t, root, "f", "x")
	load := func(reset bool) string {
		tr, err := openTree(root, true, slog.New(slog.DiscardHandler))
		must(t, err)
		defer tr.close()
		s := &server{opts: ServerOptions{StateDir: state}, reset: reset, ids: make([]string, 1)}
		s.load(0, tr)
		if len(s.ids[0]) != 32 {
			t.Fatalf("state ID %q", s.ids[0])
		}
		return s.ids[0]
	}
	a := load(false)
	if b := load(false); b != a {
		t.Fatalf("ID not kept: %s then %s", a, b)
	}
	file := indexFile(state, "remote", root)
	must(t, os.WriteFile(file, []byte("garbage"), 0o600))
	b := load(false)
	if b == a {
		t.Fatal("unreadable index kept its ID")
	}
	if c := load(true); c == b {
		t.Fatal("reset kept the ID")
	}
}

// An index of the previous layout (no state ID) is still read, with no ID:
// a client upgraded with a base resynchronizes once without deletes.
func TestStateIDReadsIndexV1(t *testing.T) {
	file := filepath.Join(t.TempDir(), "x.idx")
	e := &encoder{}
	e.b = append(e.b, indexMagicV1...)
	e.str("root")
	e.uvarint(1)
	e.uvarint(1)
	e.str("a")
	e.entry(Entry{Kind: KindFile, Size: 1, Hash: 2})
	e.b = binary.LittleEndian.AppendUint64(e.b, xxhash.Sum64(e.b))
	must(t, os.WriteFile(file, e.b, 0o600))
	maps, id, err := loadIndex(file, "root", 1)
	must(t, err)
	if id != "" || maps[0]["a"].Size != 1 {
		t.Fatalf("id %q, maps %+v", id, maps)
	}
	must(t, saveIndex(file, "root", "abc", maps...))
	if _, id, err = loadIndex(file, "root", 1); err != nil || id != "abc" {
		t.Fatalf("id %q, err %v", id, err)
	}
}

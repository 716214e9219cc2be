package filesync

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// waitHalted waits until the folder's status says it halted and returns why.
func waitHalted(t *testing.T, p *pair) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if h := p.c.Status().Folders[0].Halted; h != "" {
			return h
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("not halted: %+v", p.c.Status())
	return ""
}

// waitSynced waits for Synced (without comparing the trees).
func waitSynced(t *testing.T, p *pair) {
	t.Helper()
	select {
	case <-p.c.Synced():
	case <-time.After(10 * time.Second):
		t.Fatalf("not synced: %+v", p.c.Status())
	}
}

// waitError waits until the status lists an error containing all of subs.
func waitError(t *testing.T, p *pair, subs ...string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		for _, e := range p.c.Status().Folders[0].Errors {
			ok := true
			for _, s := range subs {
				ok = ok && strings.Contains(e.Err, s)
			}
			if ok {
				return
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("no error with %q in the status: %+v", subs, p.c.Status().Folders[0].Errors)
}

func manyFiles(t *testing.T, root string, n int) map[string]string {
	files := map[string]string{}
	for i := 0; i < n; i++ {
		rel := fmt.Sprintf("d%d/f%d.txt", i%4, i)
		files[rel] = fmt.Sprintf("content %d", i)
		write(t, root, rel, files[rel])
	}
	return files
}

func countPresent(root string, files map[string]string) int {
	n := 0
	for rel := range files {
		if _, err := os.Lstat(filepath.Join(root, filepath.FromSlash(rel))); err == nil {
			n++
		}
	}
	return n
}

// A local folder found empty at the next session (a share not mounted, a
// folder restored empty) halts the folder: the dev volume keeps its files.
func TestHaltEmptyLocalAtNewSession(t *testing.T) {
	p := newPair(t, ClientOptions{})
	files := stateIDTree(t, p.local)
	p.start(ClientOptions{})
	synced(t, p)
	p.stop()

	ents, _ := os.ReadDir(p.local)
	for _, e := range ents {
		must(t, os.RemoveAll(filepath.Join(p.local, e.Name())))
	}
	p.start(ClientOptions{})
	defer p.stop()
	why := waitHalted(t, p)
	if !strings.Contains(why, p.local) || !strings.Contains(why, "empty") || !strings.Contains(why, "--reset") {
		t.Fatalf("halt message does not name the folder, what was seen and how to go on: %s", why)
	}
	waitSynced(t, p) // a halted folder does not keep `up` waiting
	for rel, c := range files {
		wantFile(t, p.remote, rel, c)
	}
}

// Restoring from the other side after that halt: --reset gives the empty
// side everything back and deletes nothing.
func TestHaltEmptyLocalResetRestores(t *testing.T) {
	p := newPair(t, ClientOptions{})
	files := stateIDTree(t, p.local)
	p.start(ClientOptions{})
	synced(t, p)
	p.stop()
	ents, _ := os.ReadDir(p.local)
	for _, e := range ents {
		must(t, os.RemoveAll(filepath.Join(p.local, e.Name())))
	}
	p.start(ClientOptions{Reset: true})
	defer p.stop()
	synced(t, p)
	for rel, c := range files {
		wantFile(t, p.local, rel, c)
	}
}

// AcceptDeletions carries a deliberate emptying over.
func TestHaltAcceptDeletions(t *testing.T) {
	p := newPair(t, ClientOptions{})
	stateIDTree(t, p.local)
	p.start(ClientOptions{})
	synced(t, p)
	p.stop()
	ents, _ := os.ReadDir(p.local)
	for _, e := range ents {
		must(t, os.RemoveAll(filepath.Join(p.local, e.Name())))
	}
	p.start(ClientOptions{AcceptDeletions: true})
	defer p.stop()
	synced(t, p)
	if h := p.c.Status().Folders[0].Halted; h != "" {
		t.Fatalf("halted with AcceptDeletions: %s", h)
	}
	if ents, _ := os.ReadDir(p.remote); len(ents) != 0 {
		t.Fatalf("remote not emptied: %v", ents)
	}
}

// Most of the files deleted between sessions: one round would delete most
// of the other side: halted, nothing deleted.
func TestHaltMassDeletionAtNewSession(t *testing.T) {
	p := newPair(t, ClientOptions{})
	files := manyFiles(t, p.local, 40)
	p.start(ClientOptions{})
	synced(t, p)
	p.stop()
	for i := 0; i < 30; i++ {
		must(t, os.Remove(filepath.Join(p.local, fmt.Sprintf("d%d/f%d.txt", i%4, i))))
	}
	p.start(ClientOptions{})
	defer p.stop()
	why := waitHalted(t, p)
	if !strings.Contains(why, "30 of the 40 files") {
		t.Fatalf("halt message: %s", why)
	}
	if n := countPresent(p.remote, files); n != 40 {
		t.Fatalf("%d of 40 files left on the remote", n)
	}
}

// `rm -rf` of the synced folder inside the container halts the folder.
// Removals are held until they stop coming, so normally none goes; when the
// watcher's batches come further apart than holdQuiet (a loaded machine),
// the mass-deletion window still stops them before half the files are gone.
func TestHaltRemoteRootRemoved(t *testing.T) {
	p := newPair(t, ClientOptions{})
	files := manyFiles(t, p.local, 100)
	p.start(ClientOptions{})
	defer p.stop()
	synced(t, p)
	must(t, os.RemoveAll(p.remote))
	why := waitHalted(t, p)
	if !strings.Contains(why, p.local) && !strings.Contains(why, p.remote) {
		t.Fatalf("halt message names no folder: %s", why)
	}
	time.Sleep(100 * time.Millisecond) // nothing more may go; a late deletion would show below
	if n := countPresent(p.local, files); n < 50 {
		t.Fatalf("only %d of 100 local files left after the remote folder was removed", n)
	}
}

// A local folder replaced by another one (deleted and made again) halts:
// its missing files are not deletions.
func TestHaltReplacedLocalRoot(t *testing.T) {
	p := newPair(t, ClientOptions{})
	files := stateIDTree(t, p.local)
	p.start(ClientOptions{})
	synced(t, p)
	p.stop()
	must(t, os.Rename(p.local, p.local+".old"))
	write(t, p.local, "other.txt", "another checkout")
	p.start(ClientOptions{})
	defer p.stop()
	why := waitHalted(t, p)
	if !strings.Contains(why, "another folder") {
		t.Fatalf("halt message: %s", why)
	}
	for rel, c := range files {
		wantFile(t, p.remote, rel, c)
	}
}

// A local folder deleted and made again in place halts too, also where the
// filesystem gives the new folder the freed inode number (ext4 does, at
// once): its birth time tells the two apart.
func TestHaltRecreatedLocalRootSameInode(t *testing.T) {
	p := newPair(t, ClientOptions{})
	files := stateIDTree(t, p.local)
	p.start(ClientOptions{})
	synced(t, p)
	p.stop()
	before, err := os.Stat(p.local)
	must(t, err)
	must(t, os.RemoveAll(p.local))
	must(t, os.Mkdir(p.local, 0o755))
	after, err := os.Stat(p.local)
	must(t, err)
	reused := before.Sys().(*syscall.Stat_t).Ino == after.Sys().(*syscall.Stat_t).Ino
	t.Logf("inode reused by the new folder: %v (ids %q)", reused, rootIdentity(p.local))
	write(t, p.local, "other.txt", "another checkout")
	p.start(ClientOptions{})
	defer p.stop()
	why := waitHalted(t, p)
	if !strings.Contains(why, "another folder") {
		t.Fatalf("halt message: %s", why)
	}
	for rel, c := range files {
		wantFile(t, p.remote, rel, c)
	}
}

func TestSameRoot(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want bool
	}{
		{"dev=1 ino=2 born=3.000000004", "dev=1 ino=2 born=3.000000004", true},
		{"dev=1 ino=2 born=3.000000004", "dev=1 ino=2 born=3.000000005", false}, // inode reused
		{"dev=1 ino=2", "dev=1 ino=2 born=3.000000004", true},                   // saved by an older release
		{"dev=1 ino=2 born=3.000000004", "dev=1 ino=2", true},                   // no birth time now
		{"dev=1 ino=2", "dev=1 ino=3", false},
		{"dev=1 ino=2", "dev=9 ino=2", false},
		{"x", "y", false},
	} {
		if got := sameRoot(c.a, c.b); got != c.want {
			t.Errorf("sameRoot(%q, %q) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
}

// A local folder that is gone: the session does not start, the status says
// why, and nothing is deleted.
func TestHaltMissingLocalRoot(t *testing.T) {
	p := newPair(t, ClientOptions{})
	files := stateIDTree(t, p.local)
	p.start(ClientOptions{})
	synced(t, p)
	p.stop()
	must(t, os.Rename(p.local, p.local+".old"))
	p.start(ClientOptions{})
	defer p.stop()
	why := waitHalted(t, p)
	if !strings.Contains(why, "is gone") {
		t.Fatalf("halt message: %s", why)
	}
	for rel, c := range files {
		wantFile(t, p.remote, rel, c)
	}
}

// A folder that cannot be read during a scan is unknown, not absent: its
// files are not deleted on the other side, and the error is reported.
func TestUnreadableFolderDeletesNothing(t *testing.T) {
	p := newPair(t, ClientOptions{})
	files := stateIDTree(t, p.local)
	p.start(ClientOptions{})
	synced(t, p)
	p.stop()

	var failing atomic.Bool
	failing.Store(true)
	testHookOpenDir = func(root, dir string) error {
		if failing.Load() && root == p.local && dir == "dir" {
			return &os.PathError{Op: "open", Path: dir, Err: syscall.EACCES}
		}
		return nil
	}
	defer func() { testHookOpenDir = nil }()
	write(t, p.local, "new.txt", "new")
	p.start(ClientOptions{})
	defer p.stop()
	waitSynced(t, p)
	wantFile(t, p.remote, "new.txt", "new")
	for rel, c := range files {
		wantFile(t, p.remote, rel, c)
	}
	waitError(t, p, "dir: unreadable", "permission denied")
}

// The same on the agent's side: an unreadable remote folder deletes nothing
// here.
func TestUnreadableRemoteFolderDeletesNothing(t *testing.T) {
	p := newPair(t, ClientOptions{})
	files := stateIDTree(t, p.local)
	p.start(ClientOptions{})
	synced(t, p)
	p.stop()
	testHookOpenDir = func(root, dir string) error {
		if root == p.remote && dir == "dir" {
			return &os.PathError{Op: "open", Path: dir, Err: syscall.EIO}
		}
		return nil
	}
	defer func() { testHookOpenDir = nil }()
	p.start(ClientOptions{})
	defer p.stop()
	waitSynced(t, p)
	waitError(t, p, "agent: dir: unreadable", "input/output error")
	for rel, c := range files {
		wantFile(t, p.local, rel, c)
	}
}

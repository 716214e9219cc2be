package filesync

import (
	"os"
	"path/filepath"
	"strings"
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

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	must(t, err)
	return string(b)
}

// conflictCopies lists the conflict copies of name in dir.
func conflictCopies(t *testing.T, dir, stem string) []string {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(dir, stem+".conflict-*"))
	return m
}

func synced(t *testing.T, p *pair) {
	t.Helper()
	select {
	case <-p.c.Synced():
	case <-time.After(10 * time.Second):
		t.Fatalf("not synced: %+v", p.c.Status())
	}
	p.waitEqual(10 * time.Second)
}

func TestConflictKeepsBothAndDeleteYieldsToEdit(t *testing.T) {
	p := newPair(t, ClientOptions{})
	write(t, p.local, "a.txt", "base")
	write(t, p.local, "b.txt", "base b")
	write(t, p.local, "c.txt", "base c")
	p.start(ClientOptions{})
	synced(t, p)
	p.stop()

	write(t, p.local, "a.txt", "local edit")
	write(t, p.remote, "a.txt", "remote edit")
	must(t, os.Remove(filepath.Join(p.local, "b.txt")))
	write(t, p.remote, "b.txt", "remote edit b")
	write(t, p.local, "c.txt", "local edit c")
	must(t, os.Remove(filepath.Join(p.remote, "c.txt")))

	p.connect()
	defer p.stop()
	p.waitEqual(10 * time.Second)
	if got := readFile(t, filepath.Join(p.local, "a.txt")); got != "local edit" {
		t.Errorf("a.txt = %q", got)
	}
	cc := conflictCopies(t, p.local, "a")
	if len(cc) != 1 || readFile(t, cc[0]) != "remote edit" {
		t.Fatalf("conflict copies %v", cc)
	}
	if got := readFile(t, filepath.Join(p.local, "b.txt")); got != "remote edit b" {
		t.Errorf("b.txt = %q (an edit must win over a delete)", got)
	}
	if got := readFile(t, filepath.Join(p.remote, "c.txt")); got != "local edit c" {
		t.Errorf("c.txt = %q (an edit must win over a delete)", got)
	}
	if st := p.c.Status(); len(st.Folders[0].Conflicts) != 1 {
		t.Errorf("status conflicts: %+v", st.Folders[0].Conflicts)
	}
}

func TestTypeChangesAndSymlinks(t *testing.T) {
	p := newPair(t, ClientOptions{})
	write(t, p.local, "x", "file x")
	write(t, p.local, "d/y", "y")
	p.start(ClientOptions{})
	defer p.stop()
	synced(t, p)
	// file -> folder
	must(t, os.Remove(filepath.Join(p.local, "x")))
	write(t, p.local, "x/inside", "now a folder")
	p.waitEqual(5 * time.Second)
	// folder -> symlink, on the remote (inside the folder: see
	// TestSymlinkLeavingTheRootNotCreated for one that leaves it)
	must(t, os.RemoveAll(filepath.Join(p.remote, "d")))
	must(t, os.Symlink("x", filepath.Join(p.remote, "d")))
	p.waitEqual(5 * time.Second)
	if tg, err := os.Readlink(filepath.Join(p.local, "d")); err != nil || tg != "x" {
		t.Fatalf("symlink not synced as a link: %q %v", tg, err)
	}
	// symlink -> file
	must(t, os.Remove(filepath.Join(p.local, "d")))
	write(t, p.local, "d", "file d")
	p.waitEqual(5 * time.Second)
	// case-only rename
	write(t, p.local, "Readme.md", "hello")
	p.waitEqual(5 * time.Second)
	must(t, os.Rename(filepath.Join(p.local, "Readme.md"), filepath.Join(p.local, "README.md")))
	p.waitEqual(5 * time.Second)
	// executable bit
	must(t, os.Chmod(filepath.Join(p.local, "README.md"), 0o755))
	p.waitEqual(5 * time.Second)
}

func TestIgnoreRules(t *testing.T) {
	p := newPair(t, ClientOptions{})
	write(t, p.local, ".gitignore", "*.log\n/build/\n")
	write(t, p.local, "sub/.gitignore", "secret.txt\n!keep.log\n")
	write(t, p.local, ".devtoolignore", "node_modules/\n")
	write(t, p.local, "a.log", "ignored")
	write(t, p.local, "sub/keep.log", "kept")
	write(t, p.local, "sub/secret.txt", "ignored")
	write(t, p.local, "build/out", "ignored")
	write(t, p.local, "node_modules/x/y.js", "ignored")
	write(t, p.local, "tmp/excluded", "ignored")
	write(t, p.local, ".git/HEAD", "never")
	write(t, p.local, "src/main.go", "package main")
	write(t, p.remote, "remote.log", "remote ignored")
	p.start(ClientOptions{Excludes: []string{"tmp/"}})
	defer p.stop()
	select {
	case <-p.c.Synced():
	case <-time.After(10 * time.Second):
		t.Fatal("not synced")
	}
	time.Sleep(100 * time.Millisecond)
	got := snapshotDir(t, p.remote)
	for _, want := range []string{"src/main.go", "sub/keep.log", ".gitignore", "sub/.gitignore", ".devtoolignore", "remote.log"} {
		if _, ok := got[want]; !ok {
			t.Errorf("%s missing on the remote", want)
		}
	}
	for _, not := range []string{"a.log", "sub/secret.txt", "build/out", "node_modules/x/y.js", "tmp/excluded", ".git/HEAD"} {
		if _, ok := got[not]; ok {
			t.Errorf("%s synced though ignored", not)
		}
	}
	if _, err := os.Stat(filepath.Join(p.local, "remote.log")); err == nil {
		t.Error("ignored remote file pulled")
	}
	// A new rule makes a synced file ignored: it is left alone on both sides.
	write(t, p.local, ".gitignore", "*.log\n/build/\nsrc/\n")
	time.Sleep(300 * time.Millisecond)
	if _, err := os.Stat(filepath.Join(p.remote, "src/main.go")); err != nil {
		t.Errorf("newly ignored file deleted on the remote: %v", err)
	}
	if _, err := os.Stat(filepath.Join(p.local, "src/main.go")); err != nil {
		t.Errorf("newly ignored file deleted locally: %v", err)
	}
}

func TestWarmRestartAndReset(t *testing.T) {
	p := newPair(t, ClientOptions{})
	for i := 0; i < 200; i++ {
		write(t, p.local, filepath.Join("d", string(rune('a'+i%20)), "f"+string(rune('a'+i/20))), "content")
	}
	p.start(ClientOptions{})
	synced(t, p)
	p.stop()
	// A new process with the persisted indexes: nothing to move.
	p.start(ClientOptions{})
	synced(t, p)
	p.stop()
	// Differences made while disconnected, then a reset: both kept.
	write(t, p.local, "d/a/fa", "local version")
	write(t, p.remote, "d/a/fa", "remote version")
	p.start(ClientOptions{Reset: true})
	defer p.stop()
	synced(t, p)
	cc := conflictCopies(t, filepath.Join(p.local, "d/a"), "fa")
	if len(cc) != 1 || readFile(t, cc[0]) != "remote version" || readFile(t, filepath.Join(p.local, "d/a/fa")) != "local version" {
		t.Fatalf("reset lost a version: copies %v", cc)
	}
	// Reset while running.
	write(t, p.remote, "late.txt", "late")
	p.c.Reset()
	p.waitEqual(10 * time.Second)
}

func TestStateDirInsideFolderNeverSynced(t *testing.T) {
	p := newPair(t, ClientOptions{})
	p.clientDir = filepath.Join(p.local, ".devtool-state")
	p.serverDir = filepath.Join(p.remote, ".devtool-state")
	write(t, p.local, "a", "x")
	for i := 0; i < 2; i++ {
		p.start(ClientOptions{})
		<-p.c.Synced()
		time.Sleep(50 * time.Millisecond)
		p.stop()
	}
	// Each state dir holds its own side's files only (the client's index and
	// rules, the agent's index), never the other's.
	for d, own := range map[string]string{p.clientDir: "local-", p.serverDir: "remote-"} {
		ents, _ := os.ReadDir(d)
		if len(ents) == 0 {
			t.Fatalf("%s is empty", d)
		}
		for _, e := range ents {
			if !strings.HasPrefix(e.Name(), own) {
				t.Fatalf("%s holds %v: a state dir inside the folder was synced", d, ents)
			}
		}
	}
	if readFile(t, filepath.Join(p.remote, "a")) != "x" {
		t.Fatal("a not synced")
	}
}

//go:build linux

package filesync

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// putNew receives a new file p with data through beginPut/commit.
func putNew(t *testing.T, tr *tree, p string, data []byte) (*putFile, Entry, error) {
	t.Helper()
	e := Entry{Kind: KindFile, Size: int64(len(data)), Hash: newHasherSum(data)}
	pf, err := tr.beginPut(p, e, Entry{})
	if err != nil {
		return nil, Entry{}, err
	}
	must(t, pf.write(data))
	got, err := pf.commit()
	return pf, got, err
}

// TestFastPutWithoutNoReplaceNorLinks: on a filesystem with neither
// renameat2(RENAME_NOREPLACE) nor hard links (CIFS, Azure Files, FUSE, 9p,
// vfat), a new file still lands (a plain rename after checking the path is
// free), and a file that appeared meanwhile is still kept.
func TestFastPutWithoutNoReplaceNorLinks(t *testing.T) {
	root := t.TempDir()
	tr, err := openTree(root, false, testLogger(t))
	must(t, err)
	defer tr.close()
	if tr.rootfd < 0 {
		t.Skip("no fast path here")
	}
	renames := 0
	testHookRenameErr = func() error { renames++; return unix.EINVAL }
	testHookLinkErr = func() error { return unix.EPERM }
	defer func() { testHookRenameErr, testHookLinkErr = nil, nil }()

	for _, lerr := range []error{unix.EPERM, unix.EOPNOTSUPP, unix.EMLINK} {
		testHookLinkErr = func() error { return lerr }
		p := "new-" + strings.ReplaceAll(lerr.Error(), " ", "_") + ".txt"
		data := []byte("from the peer: " + p)
		pf, e, err := putNew(t, tr, p, data)
		if err != nil {
			t.Fatalf("link %v: %v", lerr, err)
		}
		if pf.ff == nil {
			t.Fatal("the fast path was not taken")
		}
		if b, _ := os.ReadFile(filepath.Join(root, p)); string(b) != string(data) {
			t.Fatalf("link %v: %s = %q", lerr, p, b)
		}
		if e.Kind != KindFile || e.Size != int64(len(data)) {
			t.Fatalf("entry %+v", e)
		}
	}
	if renames != 3 {
		t.Fatalf("renameat2 tried %d times, want 3", renames)
	}

	// A file created meanwhile is kept.
	testHookLinkErr = func() error { return unix.EPERM }
	testHookBeforeReplace = func(p string) {
		must(t, os.WriteFile(filepath.Join(root, p), []byte("written meanwhile"), 0o644))
	}
	_, _, err = putNew(t, tr, "raced.txt", []byte("from the peer"))
	testHookBeforeReplace = nil
	if !errors.Is(err, errChanged) {
		t.Fatalf("commit over a file created meanwhile: %v, want errChanged", err)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "raced.txt")); string(b) != "written meanwhile" {
		t.Fatalf("the file created meanwhile was replaced: %q", b)
	}
	ents, _ := os.ReadDir(root)
	for _, en := range ents {
		if strings.HasPrefix(en.Name(), tmpPrefix) {
			t.Errorf("temporary file left: %s", en.Name())
		}
	}
}

// TestFastPutWithoutOpenat2: where openat2 is missing (ENOSYS: a kernel
// before 5.6) the put takes the os.Root path, and the file lands.
func TestFastPutWithoutOpenat2(t *testing.T) {
	root := t.TempDir()
	must(t, os.Mkdir(filepath.Join(root, "sub"), 0o755))
	tr, err := openTree(root, false, testLogger(t))
	must(t, err)
	defer tr.close()
	if tr.rootfd < 0 {
		t.Skip("no fast path here")
	}
	calls := 0
	testHookOpenat2Err = func() error { calls++; return unix.ENOSYS }
	defer func() { testHookOpenat2Err = nil }()
	data := []byte("from the peer")
	pf, _, err := putNew(t, tr, "sub/new.txt", data)
	must(t, err)
	if calls == 0 {
		t.Fatal("openat2 was not tried")
	}
	if pf.ff != nil || pf.f == nil {
		t.Fatal("the fast path was taken although openat2 failed")
	}
	if !tr.noFast.Load() {
		t.Fatal("the fast path is not turned off")
	}
	if b, _ := os.ReadFile(filepath.Join(root, "sub/new.txt")); string(b) != string(data) {
		t.Fatalf("sub/new.txt = %q", b)
	}
	// Reads take the os.Root path too.
	before := calls
	r, err := tr.open("sub/new.txt")
	must(t, err)
	r.Close()
	if calls != before {
		t.Fatal("openat2 tried again after it turned out missing")
	}
}

// TestFastPutEntryIsWhatIsOnDisk: the index entry of a file put on the fast
// path records the mode and mtime on disk, not the requested ones: under a
// umask that takes the exec bits away, a rescan finds nothing changed.
func TestFastPutEntryIsWhatIsOnDisk(t *testing.T) {
	root := t.TempDir()
	tr, err := openTree(root, false, testLogger(t))
	must(t, err)
	defer tr.close()
	if tr.rootfd < 0 {
		t.Skip("no fast path here")
	}
	old := unix.Umask(0o177)
	defer unix.Umask(old)
	data := []byte("#!/bin/sh\n")
	e := Entry{Kind: KindFile, Exec: true, Size: int64(len(data)), Hash: newHasherSum(data), MTime: 1_700_000_000_123_456_789}
	pf, err := tr.beginPut("run.sh", e, Entry{})
	must(t, err)
	must(t, pf.write(data))
	got, err := pf.commit()
	must(t, err)
	unix.Umask(old)
	if pf.ff == nil {
		t.Fatal("the fast path was not taken")
	}
	fi, err := os.Lstat(filepath.Join(root, "run.sh"))
	must(t, err)
	if got.Exec != (fi.Mode()&0o111 != 0) || got.MTime != fi.ModTime().UnixNano() || got.Size != fi.Size() {
		t.Fatalf("entry %+v, on disk mode %v mtime %d", got, fi.Mode(), fi.ModTime().UnixNano())
	}
	changed, err := tr.scanAll(false, nil)
	must(t, err)
	if len(changed) != 0 {
		t.Fatalf("a rescan after the put found changes: %+v", changed)
	}
}

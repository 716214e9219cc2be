package filesync

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestConflictNameNeverNests(t *testing.T) {
	at := time.Date(2026, 11, 23, 10, 15, 0, 0, time.UTC)
	for _, c := range []struct{ p, want string }{
		{"src/a.go", "src/a.conflict-remote-20261123-101500.go"},
		{"src/a.conflict-local-20250101-000000.go", "src/a.conflict-remote-20261123-101500.go"},
		{"src/a.conflict-remote-20250101-000000-3.go", "src/a.conflict-remote-20261123-101500.go"},
		{".bashrc", ".bashrc.conflict-remote-20261123-101500"},
		{".bashrc.conflict-local-20250101-000000", ".bashrc.conflict-remote-20261123-101500"},
		{"Makefile", "Makefile.conflict-remote-20261123-101500"},
	} {
		if got := conflictName(c.p, "remote", at, 1); got != c.want {
			t.Errorf("conflictName(%q) = %q, want %q", c.p, got, c.want)
		}
		if got := conflictName(c.p, "remote", at, 1); strings.Count(got, ".conflict-") != 1 || !isConflictCopy(got) {
			t.Errorf("conflictName(%q) = %q: not exactly one tag", c.p, got)
		}
	}
}

func TestNameKey(t *testing.T) {
	nfd, nfc := "cafe\u0301/Read.md", "caf\u00e9/Read.md"
	for _, c := range []struct {
		caps caps
		a, b string
		one  bool
	}{
		{caps{}, "Readme", "README", false},
		{caps{foldCase: true}, "Readme", "README", true},
		{caps{}, nfd, nfc, false},
		{caps{foldNorm: true}, nfd, nfc, true},
		{caps{foldNorm: true, foldCase: true}, nfd, strings.ToUpper(nfc), true},
		{caps{foldNorm: true, foldCase: true}, "a", "b", false},
	} {
		if got := c.caps.nameKey(c.a) == c.caps.nameKey(c.b); got != c.one {
			t.Errorf("%+v: %q and %q one name: %v, want %v", c.caps, c.a, c.b, got, c.one)
		}
	}
}

func TestLinkEscapes(t *testing.T) {
	for _, c := range []struct {
		p, target string
		out       bool
	}{
		{"l", "a", false}, {"d/l", "../a", false}, {"d/e/l", "../../a", false}, {"l", ".", false}, {"d/l", "..", false},
		{"l", "/etc/passwd", true}, {"l", "..", true}, {"l", "../x", true}, {"d/l", "../../x", true},
		{"d/l", "x/../../../y", true}, {"l", "C:\\x", true},
	} {
		if got := linkEscapes(c.p, c.target); got != c.out {
			t.Errorf("linkEscapes(%q, %q) = %v, want %v", c.p, c.target, got, c.out)
		}
	}
}

// A symlink made in the container that points outside the folder
// (/etc/passwd, ~/.ssh) is not recreated here, and is reported; a link that
// stays inside is synced. The same holds the other way.
func TestSymlinkLeavingTheRootNotCreated(t *testing.T) {
	p := newPair(t, ClientOptions{})
	write(t, p.local, "sub/f", "x")
	p.start(ClientOptions{})
	defer p.stop()
	synced(t, p)
	must(t, os.Symlink("/etc/passwd", filepath.Join(p.remote, "pw")))
	must(t, os.Symlink("../../../root/.ssh/id_ed25519", filepath.Join(p.remote, "sub", "key")))
	must(t, os.Symlink("/root", filepath.Join(p.local, "home")))
	must(t, os.Symlink("sub/f", filepath.Join(p.remote, "ok")))
	deadline := time.Now().Add(10 * time.Second)
	for {
		if tg, err := os.Readlink(filepath.Join(p.local, "ok")); err == nil && tg == "sub/f" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("inside link not synced: %+v", p.c.Status())
		}
		time.Sleep(5 * time.Millisecond)
	}
	waitError(t, p, "/etc/passwd", "leaves the synchronized folder")
	waitError(t, p, "../../../root/.ssh/id_ed25519", "leaves the synchronized folder")
	waitError(t, p, "/root", "leaves the synchronized folder")
	for _, rel := range []string{"pw", "sub/key"} {
		if _, err := os.Lstat(filepath.Join(p.local, rel)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s was created locally: %v", rel, err)
		}
	}
	if _, err := os.Lstat(filepath.Join(p.remote, "home")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("home was created remotely: %v", err)
	}
}

// The applier refuses a link leaving the root whatever the peer asks.
func TestTreeRefusesEscapingLink(t *testing.T) {
	tr, err := openTree(t.TempDir(), false, testLogger(t))
	must(t, err)
	defer tr.close()
	for _, tg := range []string{"/etc/passwd", "../x", "a/../../x"} {
		if _, err := tr.symlink("l", tg, Entry{}); !errors.Is(err, errEscape) {
			t.Errorf("symlink to %q: %v", tg, err)
		}
	}
	if _, err := tr.symlink("l", "a/b", Entry{}); err != nil {
		t.Errorf("inside link refused: %v", err)
	}
}

// Received files get the receiver's clock, not the sender's mtime, on both
// the fast path (a new file) and the portable one (a replacement).
func TestReceivedFileGetsReceiversTime(t *testing.T) {
	root := t.TempDir()
	tr, err := openTree(root, false, testLogger(t))
	must(t, err)
	defer tr.close()
	at := time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC)
	tr.now = func() time.Time { return at }
	sent := time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano() // the sender's (skewed) mtime
	put := func(p string, content string, expect Entry) Entry {
		e := Entry{Kind: KindFile, Size: int64(len(content)), Hash: newHasherSum([]byte(content)), MTime: sent}
		pf, err := tr.beginPut(p, e, expect)
		must(t, err)
		must(t, pf.write([]byte(content)))
		got, err := pf.commit()
		must(t, err)
		return got
	}
	first := put("a", "one", Entry{})
	second := put("a", "two", first)
	for _, e := range []Entry{first, second} {
		if e.MTime != at.UnixNano() {
			t.Errorf("index mtime %v, want the receiver's %v", time.Unix(0, e.MTime).UTC(), at)
		}
	}
	fi, err := os.Stat(filepath.Join(root, "a"))
	must(t, err)
	if !fi.ModTime().Equal(at) {
		t.Fatalf("file mtime %v, want the receiver's %v", fi.ModTime().UTC(), at)
	}
}

// mountExFAT mounts a fresh exFAT image (FUSE) and returns its folder,
// unmounted in cleanup. Without FUSE in the kernel the test is skipped;
// with it, missing tools or a failing mount fail under CI=true (.ci/run
// installs them) and skip elsewhere.
func mountExFAT(t *testing.T) string {
	t.Helper()
	unavailable := func(format string, args ...any) {
		t.Helper()
		if os.Getenv("CI") == "true" {
			t.Fatalf(format, args...)
		}
		t.Skipf(format, args...)
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skipf("no FUSE here (%v): exFAT test skipped", err)
	}
	for _, tool := range []string{"mkfs.exfat", "mount.exfat-fuse", "fusermount", "losetup"} {
		if _, err := exec.LookPath(tool); err != nil {
			unavailable("%s not installed (apt-get install exfat-fuse exfatprogs fuse): %v", tool, err)
		}
	}
	dir := t.TempDir()
	img, mnt := filepath.Join(dir, "img"), filepath.Join(dir, "mnt")
	must(t, os.Mkdir(mnt, 0o755))
	must(t, os.WriteFile(img, nil, 0o600))
	must(t, os.Truncate(img, 64<<20))
	if out, err := exec.Command("mkfs.exfat", img).CombinedOutput(); err != nil {
		unavailable("mkfs.exfat: %v\n%s", err, out)
	}
	// As root, exfat-fuse wants a block device: a loop device over the image.
	out, err := exec.Command("losetup", "-f", "--show", img).CombinedOutput()
	if err != nil {
		unavailable("losetup: %v\n%s", err, out)
	}
	dev := strings.TrimSpace(string(out))
	t.Cleanup(func() {
		if out, err := exec.Command("losetup", "-d", dev).CombinedOutput(); err != nil {
			t.Errorf("detaching %s: %v\n%s", dev, err, out)
		}
	})
	if out, err := exec.Command("mount.exfat-fuse", dev, mnt).CombinedOutput(); err != nil {
		unavailable("mount.exfat-fuse: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("fusermount", "-u", mnt).CombinedOutput(); err != nil {
			t.Errorf("unmounting %s: %v\n%s", mnt, err, out)
		}
	})
	return mnt
}

// waitConflict waits until the status lists a conflict whose reason holds sub.
func waitConflict(t *testing.T, p *pair, sub string) Conflict {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		for _, c := range p.c.Status().Folders[0].Conflicts {
			if strings.Contains(c.Reason, sub) {
				return c
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no conflict with %q in the status: %+v", sub, p.c.Status())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A local folder on exFAT (no exec bits, case-insensitive, no symlinks):
// exec bits made in the container are neither lost nor flipped there, no
// conflict copy is ever made, two names that differ only in case are
// reported once as a conflict (one of them kept), and a symlink is not
// created there.
func TestExFATNoExecNoCaseNoConflictLoop(t *testing.T) {
	mnt := mountExFAT(t)
	tr, err := openTree(mnt, false, testLogger(t))
	must(t, err)
	if want := (caps{noExec: true, foldCase: true, noLinks: true}); tr.caps != want {
		t.Errorf("exFAT probed as %+v, want %+v", tr.caps, want)
	}
	tr.close()

	base := t.TempDir()
	p := &pair{t: t, local: filepath.Join(mnt, "local"), remote: filepath.Join(base, "remote"),
		clientDir: filepath.Join(base, "cstate"), serverDir: filepath.Join(base, "sstate")}
	must(t, os.MkdirAll(p.local, 0o755))
	must(t, os.MkdirAll(p.remote, 0o755))
	write(t, p.remote, "a.txt", "plain")
	write(t, p.remote, "run.sh", "#!/bin/sh\n")
	must(t, os.Chmod(filepath.Join(p.remote, "run.sh"), 0o755))
	write(t, p.remote, "Readme", "one")
	write(t, p.remote, "README", "two")
	must(t, os.Symlink("a.txt", filepath.Join(p.remote, "ln")))
	p.start(ClientOptions{})
	defer p.stop()
	select {
	case <-p.c.Synced():
	case <-time.After(10 * time.Second):
		t.Fatalf("not synced: %+v", p.c.Status())
	}
	c := waitConflict(t, p, "differ only in case")
	if c.Copy != "" || (c.Path != "Readme" && c.Path != "README") {
		t.Errorf("case clash listed as %+v", c)
	}
	waitError(t, p, "cannot hold symlinks")

	// Edits on the exFAT side go up with the container's exec bits as they were.
	write(t, p.local, "a.txt", "plain edited")
	write(t, p.local, "run.sh", "#!/bin/sh\necho edited\n")
	write(t, p.remote, "b.txt", "after")
	deadline := time.Now().Add(10 * time.Second)
	for {
		a, _ := os.ReadFile(filepath.Join(p.remote, "a.txt"))
		r, _ := os.ReadFile(filepath.Join(p.remote, "run.sh"))
		_, berr := os.Stat(filepath.Join(p.local, "b.txt"))
		st := p.c.Status().Folders[0]
		if string(a) == "plain edited" && strings.Contains(string(r), "edited") && berr == nil && st.Pending <= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("edits not synced: %+v", st)
		}
		time.Sleep(5 * time.Millisecond)
	}
	for rel, want := range map[string]bool{"a.txt": false, "run.sh": true} {
		fi, err := os.Stat(filepath.Join(p.remote, rel))
		must(t, err)
		if got := fi.Mode()&0o100 != 0; got != want {
			t.Errorf("remote %s exec bit %v, want %v (flipped by the exFAT side)", rel, got, want)
		}
	}
	st := p.c.Status().Folders[0]
	n := 0
	for _, c := range st.Conflicts {
		if c.Copy != "" {
			t.Errorf("conflict copy on exFAT: %+v", c)
		}
		if strings.Contains(c.Reason, "differ only in case") {
			n++
		}
	}
	if n != 1 {
		t.Errorf("case clash reported %d times, want once: %+v", n, st.Conflicts)
	}
	for _, root := range []string{p.local, p.remote} {
		m, _ := filepath.Glob(filepath.Join(root, "*.conflict-*"))
		if len(m) != 0 {
			t.Errorf("conflict copies in %s: %v", root, m)
		}
	}
	if _, err := os.Lstat(filepath.Join(p.local, "ln")); err == nil {
		t.Error("a symlink was made on exFAT")
	}
}

// A first sync onto an exFAT folder that already holds the same files as
// the container (a project copied onto an external disk) sends nothing and
// makes no conflict: its files all read as executable there.
func TestExFATFirstSyncOfTheSameFilesSendsNothing(t *testing.T) {
	mnt := mountExFAT(t)
	base := t.TempDir()
	p := &pair{t: t, local: filepath.Join(mnt, "local"), remote: filepath.Join(base, "remote"),
		clientDir: filepath.Join(base, "cstate"), serverDir: filepath.Join(base, "sstate")}
	for _, root := range []string{p.local, p.remote} {
		write(t, root, "src/main.go", "package main\n")
		write(t, root, "build.sh", "#!/bin/sh\n")
	}
	must(t, os.Chmod(filepath.Join(p.remote, "build.sh"), 0o755))
	p.start(ClientOptions{})
	defer p.stop()
	select {
	case <-p.c.Synced():
	case <-time.After(10 * time.Second):
		t.Fatalf("not synced: %+v", p.c.Status())
	}
	st := p.c.Status().Folders[0]
	if len(st.Conflicts) != 0 || len(st.Errors) != 0 || st.Pending != 0 {
		t.Fatalf("status %+v", st)
	}
	if n := p.sent.Load(); n > 4<<10 {
		t.Errorf("%d bytes sent for a tree both sides held", n)
	}
	for rel, want := range map[string]bool{"src/main.go": false, "build.sh": true} {
		fi, err := os.Stat(filepath.Join(p.remote, rel))
		must(t, err)
		if got := fi.Mode()&0o100 != 0; got != want {
			t.Errorf("remote %s exec bit %v, want %v", rel, got, want)
		}
	}
}

// Through the engine, both ways: files whose mtimes come from a skewed clock
// (far past, far future) arrive dated by the receiver's clock, so build
// tools there see them as new.
func TestSkewedSenderClockNotCopied(t *testing.T) {
	p := newPair(t, ClientOptions{})
	past, future := time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC), time.Now().Add(100*24*time.Hour)
	for i, root := range []string{p.local, p.remote} {
		for j, mt := range []time.Time{past, future} {
			rel := fmt.Sprintf("side%d-%d", i, j)
			write(t, root, rel, rel)
			must(t, os.Chtimes(filepath.Join(root, rel), mt, mt))
		}
	}
	start := time.Now().Add(-time.Second) // coarse filesystem clocks
	p.start(ClientOptions{})
	defer p.stop()
	p.waitEqual(10 * time.Second)
	end := time.Now().Add(time.Second)
	for i, root := range []string{p.remote, p.local} { // each file's receiving side
		for j := range 2 {
			rel := fmt.Sprintf("side%d-%d", i, j)
			fi, err := os.Stat(filepath.Join(root, rel))
			must(t, err)
			if mt := fi.ModTime(); mt.Before(start) || mt.After(end) {
				t.Errorf("%s received with mtime %v, not the receiver's time (%v..%v)", rel, mt, start, end)
			}
		}
	}
}

// The caps' wire form (the protocol 3 hello answer): every combination
// round-trips, bits a later release may add are ignored, and an agent that
// reports no caps is taken for a Linux filesystem (the zero caps).
func TestCapsBits(t *testing.T) {
	for b := uint64(0); b < 16; b++ {
		c := capsFromBits(b)
		if capsBits(c) != b {
			t.Errorf("caps %+v: bits %#x, want %#x", c, capsBits(c), b)
		}
		if got := capsFromBits(b | 0xf0); got != c {
			t.Errorf("unknown bits changed %+v to %+v", c, got)
		}
	}
	if defaultRemoteCaps != (caps{}) || capsFromBits(capExec) != (caps{}) {
		t.Errorf("default remote caps %+v, Linux %+v", defaultRemoteCaps, capsFromBits(capExec))
	}
}

// A name held back as the case twin of another on a case-insensitive local
// folder is synced once its twin is gone, without touching it again.
func TestExFATCaseTwinSyncedOnceItsTwinIsGone(t *testing.T) {
	mnt := mountExFAT(t)
	base := t.TempDir()
	p := &pair{t: t, local: filepath.Join(mnt, "local"), remote: filepath.Join(base, "remote"),
		clientDir: filepath.Join(base, "cstate"), serverDir: filepath.Join(base, "sstate")}
	must(t, os.MkdirAll(p.local, 0o755))
	write(t, p.remote, "Readme", "one")
	write(t, p.remote, "README", "two")
	p.start(ClientOptions{})
	defer p.stop()
	c := waitConflict(t, p, "differ only in case")
	kept := map[string]string{"Readme": "README", "README": "Readme"}[c.Path]
	must(t, os.Remove(filepath.Join(p.remote, kept)))
	deadline := time.Now().Add(15 * time.Second)
	for {
		ents, _ := os.ReadDir(p.local)
		if len(ents) == 1 && ents[0].Name() == c.Path {
			if b, _ := os.ReadFile(filepath.Join(p.local, c.Path)); string(b) == map[string]string{"Readme": "one", "README": "two"}[c.Path] {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not synced after its twin %s was removed: local %v, status %+v", c.Path, kept, ents, p.c.Status())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

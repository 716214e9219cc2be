package filesync

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

func TestCheckPath(t *testing.T) {
	long := strings.Repeat("a", 256)
	for _, bad := range []string{"", ".", "..", "../x", "a/../../x", "a/..", "/etc/passwd", "a//b", "a/./b", "./a",
		"a/", "x\x00y", "C:\\x", "a\\b", long, strings.Repeat("a/", 2100) + "a", ".git", "a/.git/config", tmpPrefix + "1"} {
		if err := checkPath(bad); err == nil || !errors.Is(err, errEscape) {
			t.Errorf("checkPath(%.40q) = %v, want refused", bad, err)
		}
	}
	for _, good := range []string{"a", "a/b", ".gitignore", "a b/c..d", "..a", "a..", strings.Repeat("a", 255)} {
		if err := checkPath(good); err != nil {
			t.Errorf("checkPath(%q) = %v", good, err)
		}
	}
}

// The remote end refuses writes through a symlink, out of the root, or into
// .git, whatever the client sends.
func TestTreeRefusesEscapes(t *testing.T) {
	root := t.TempDir()
	outside := t.TempDir()
	must(t, os.Symlink(outside, filepath.Join(root, "out")))
	must(t, os.MkdirAll(filepath.Join(root, "in"), 0o755))
	must(t, os.Symlink("in", filepath.Join(root, "inlink")))
	tr, err := openTree(root, false, testLogger(t))
	must(t, err)
	defer tr.close()
	e := Entry{Kind: KindFile, Size: 1, Hash: newHasherSum([]byte("x"))}
	for _, p := range []string{"out/pwned", "inlink/x", "../pwned", "/tmp/pwned", ".git/hooks/x", "a/../../pwned"} {
		if pf, err := tr.beginPut(p, e, Entry{}); err == nil {
			pf.abort()
			t.Errorf("beginPut(%q) accepted", p)
		}
		if _, err := tr.mkdir(p, Entry{}); err == nil {
			t.Errorf("mkdir(%q) accepted", p)
		}
		if _, err := tr.symlink(p, "/etc", Entry{}); err == nil {
			t.Errorf("symlink(%q) accepted", p)
		}
	}
	if _, _, err := tr.move("in", "../moved", Entry{Kind: KindDir}); err == nil {
		t.Error("move out of the root accepted")
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Fatalf("something was written outside the root: %v", ents)
	}
	// A put replaces a symlink itself, never its target.
	must(t, os.WriteFile(filepath.Join(outside, "target"), []byte("keep"), 0o644))
	must(t, os.Symlink(filepath.Join(outside, "target"), filepath.Join(root, "l")))
	tr.scanAll(false, nil)
	pf, err := tr.beginPut("l", e, tr.get("l"))
	must(t, err)
	must(t, pf.write([]byte("x")))
	if _, err := pf.commit(); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(outside, "target")); string(b) != "keep" {
		t.Fatalf("write followed a symlink out of the root: %q", b)
	}
	// A stale expectation refuses the write (a concurrent edit is kept).
	must(t, os.WriteFile(filepath.Join(root, "c"), []byte("new"), 0o644))
	if _, err := tr.beginPut("c", e, Entry{}); !errors.Is(err, errChanged) {
		t.Fatalf("put over an unseen file: %v", err)
	}
	if _, err := tr.remove("c", Entry{Kind: KindFile, Size: 3, Hash: 1}); !errors.Is(err, errChanged) {
		t.Fatalf("remove of a changed file: %v", err)
	}
}

func newHasherSum(b []byte) uint64 { h := newHasher(); h.Write(b); return h.Sum64() }

func TestVersionMismatchIsClear(t *testing.T) {
	var buf bytes.Buffer
	buf.WriteString("DTSY\x00\x63")
	err := readHello(&buf, "devtool agent")
	if !errors.Is(err, ErrVersion) || !strings.Contains(err.Error(), "version 99") {
		t.Fatalf("got %v", err)
	}
	buf.Reset()
	buf.WriteString("SSH-2.0")
	if err := readHello(&buf, "devtool agent"); !errors.Is(err, ErrVersion) {
		t.Fatalf("got %v", err)
	}
}

func openFDs(t *testing.T) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd")
	}
	return len(ents)
}

// Run and Serve leave no goroutine, watcher or file behind.
func TestNoLeaks(t *testing.T) {
	p := newPair(t, ClientOptions{})
	write(t, p.local, "a/b/c", "x")
	write(t, p.remote, "r/s", "y")
	// warm up lazily started runtime goroutines
	p.start(ClientOptions{})
	synced(t, p)
	p.stop()
	runtime.GC()
	g0, f0 := runtime.NumGoroutine(), openFDs(t)
	for i := 0; i < 3; i++ {
		p.connect()
		write(t, p.local, "a/new", strings.Repeat("z", i))
		p.waitEqual(5 * time.Second)
		p.stop()
	}
	deadline := time.Now().Add(3 * time.Second)
	for {
		g, f := runtime.NumGoroutine(), openFDs(t)
		if g <= g0 && f <= f0 {
			return
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			n := runtime.Stack(buf, true)
			t.Fatalf("goroutines %d -> %d, fds %d -> %d\n%s", g0, g, f0, f, buf[:n])
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A hostile agent: paths leaving the folder are refused and reported, and
// nothing is written outside the local folder.
func TestClientRefusesEscapingPathsFromAgent(t *testing.T) {
	dir := t.TempDir()
	local := filepath.Join(dir, "local")
	must(t, os.MkdirAll(local, 0o755))
	c, err := NewClient(ClientOptions{Folders: []Folder{{Local: local, Remote: "/r"}}, StateDir: filepath.Join(dir, "state")})
	must(t, err)
	a, b := net.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx, func() (io.ReadWriteCloser, error) { return a, nil }) }()
	// the fake agent
	go func() {
		_ = readHello(b, "cli")
		_ = writeHello(b)
		fr := newFrameReader(b)
		defer fr.close()
		fr.next() // hello
		out := newSender(b, newQueue[any](), nil, nil)
		defer out.fw.close()
		out.send(&helloOKMsg{IDs: []string{"agent-state"}})
		out.fw.flush()
		fr.next() // rules
		out.send(&entriesMsg{Folder: 0, Full: true, Done: true, Items: []item{
			{Path: "../evil", E: Entry{Kind: KindFile, Size: 1}},
			{Path: "/etc/evil", E: Entry{Kind: KindFile, Size: 1}},
			{Path: "a/../../evil", E: Entry{Kind: KindDir}},
			{Path: ".git/hooks/pre-commit", E: Entry{Kind: KindFile, Size: 1}},
		}})
		out.fw.flush()
		for {
			if _, _, err := fr.next(); err != nil {
				return
			}
		}
	}()
	deadline := time.Now().Add(5 * time.Second)
	for {
		st := c.Status()
		if len(st.Folders[0].Errors) == 4 {
			for _, e := range st.Folders[0].Errors {
				if !strings.Contains(e.Err, "refused") {
					t.Errorf("error %+v", e)
				}
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("refusals not reported: %+v", st)
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done
	b.Close()
	if _, err := os.Lstat(filepath.Join(dir, "evil")); err == nil {
		t.Fatal("written outside the folder")
	}
}

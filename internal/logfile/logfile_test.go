//go:build unix

package logfile

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/devtool/devtool/internal/safefile"
)

func TestRotatesAtTheCap(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "devtool.log")
	l, err := Open(p, 100)
	if err != nil {
		t.Fatal(err)
	}
	line := []byte(strings.Repeat("x", 29) + "\n") // 30 bytes
	for i := 0; i < 10; i++ {
		if _, err := l.Write(line); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// 300 bytes in lines of 30 with a cap of 100: three lines a file, the last in the log, the
	// three before in .1, the rest gone.
	cur, _ := os.ReadFile(p)
	old, _ := os.ReadFile(p + ".1")
	if !bytes.Equal(cur, bytes.Repeat(line, 1)) || !bytes.Equal(old, bytes.Repeat(line, 3)) {
		t.Fatalf("log %d bytes, .1 %d bytes", len(cur), len(old))
	}
	for _, f := range []string{p, p + ".1"} {
		if fi, _ := os.Stat(f); fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %04o", f, fi.Mode().Perm())
		}
	}
}

func TestOpenRotatesALogPastTheCap(t *testing.T) {
	p := filepath.Join(t.TempDir(), "devtool.log")
	if err := os.WriteFile(p, bytes.Repeat([]byte("a"), 500), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := Open(p, 100)
	if err != nil {
		t.Fatal(err)
	}
	l.Write([]byte("new\n"))
	l.Close()
	if b, _ := os.ReadFile(p); string(b) != "new\n" {
		t.Fatalf("log %q", b)
	}
	if fi, _ := os.Stat(p + ".1"); fi == nil || fi.Size() != 500 {
		t.Fatalf(".1: %v", fi)
	}
}

func TestRefusesLinksAndSpecialFiles(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(dir, "victim")
	os.WriteFile(victim, []byte("precious"), 0o644)
	link := filepath.Join(dir, "link.log")
	os.Symlink(victim, link)
	if _, err := Open(link, 0); !errors.Is(err, safefile.ErrSymlink) || !strings.Contains(err.Error(), link) {
		t.Fatalf("a link: %v", err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "precious" {
		t.Fatalf("victim %q", b)
	}
	fifo := filepath.Join(dir, "fifo.log")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	// No reader: opening for writing must fail at once, not wait for one.
	if _, err := Open(fifo, 0); !errors.Is(err, safefile.ErrNotRegular) || !strings.Contains(err.Error(), fifo) {
		t.Fatalf("a FIFO: %v", err)
	}
}

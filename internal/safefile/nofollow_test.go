//go:build unix

package safefile

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestNoFollow(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(dir, "victim")
	if err := os.WriteFile(victim, []byte("precious"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "pid")
	if err := os.Symlink(victim, link); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadNoFollow(link, 0); !errors.Is(err, ErrSymlink) || !strings.Contains(err.Error(), link) {
		t.Errorf("ReadNoFollow of a link: %v", err)
	}
	if _, _, err := Tail(link, 0); !errors.Is(err, ErrSymlink) {
		t.Errorf("Tail of a link: %v", err)
	}
	// Writing through the link is refused too (O_CREATE on a dangling link included).
	if _, err := OpenFileNoFollow(link, os.O_RDWR|os.O_CREATE, 0o600); !errors.Is(err, ErrSymlink) {
		t.Errorf("OpenFileNoFollow of a link: %v", err)
	}
	dangling := filepath.Join(dir, "dangling")
	os.Symlink(filepath.Join(dir, "nowhere"), dangling)
	if _, err := OpenFileNoFollow(dangling, os.O_RDWR|os.O_CREATE, 0o600); !errors.Is(err, ErrSymlink) {
		t.Errorf("OpenFileNoFollow of a dangling link: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "nowhere")); err == nil {
		t.Error("the dangling link's target was created")
	}
	if b, _ := os.ReadFile(victim); string(b) != "precious" {
		t.Errorf("victim now %q", b)
	}
	// A plain file still reads.
	if b, err := ReadNoFollow(victim, 0); err != nil || string(b) != "precious" {
		t.Errorf("ReadNoFollow of a file: %q %v", b, err)
	}
}

// A FIFO opened for writing (a log, the pid file) with no reader fails at once naming it.
func TestOpenFileNoFollowFIFO(t *testing.T) {
	p := filepath.Join(t.TempDir(), "devtool.log")
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, flag := range []int{os.O_WRONLY | os.O_APPEND | os.O_CREATE, os.O_RDWR | os.O_CREATE, os.O_RDONLY} {
		within(t, 5*time.Second, func() {
			_, err := OpenFileNoFollow(p, flag, 0o600)
			if !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "named pipe") {
				t.Errorf("flag %#x: %v", flag, err)
			}
		})
	}
}

// Tail reads only the end of a file: a sparse 1 GiB file with a last line gives the last bytes.
func TestTail(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "devtool.log")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(1 << 30); err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte("last line\n"), 1<<30)
	f.Close()
	b, cut, err := Tail(p, 100)
	if err != nil || !cut || len(b) != 100 || !bytes.HasSuffix(b, []byte("last line\n")) {
		t.Fatalf("Tail: %d bytes, cut %v, %v", len(b), cut, err)
	}
	small := filepath.Join(dir, "small")
	os.WriteFile(small, []byte("abc"), 0o600)
	if b, cut, err := Tail(small, 100); err != nil || cut || string(b) != "abc" {
		t.Fatalf("Tail of a small file: %q %v %v", b, cut, err)
	}
	within(t, 5*time.Second, func() {
		fifo := filepath.Join(dir, "fifo")
		syscall.Mkfifo(fifo, 0o600)
		if _, _, err := Tail(fifo, 100); !errors.Is(err, ErrNotRegular) {
			t.Errorf("Tail of a FIFO: %v", err)
		}
	})
}

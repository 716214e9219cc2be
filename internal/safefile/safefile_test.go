package safefile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// within fails the test when f does not return in time: a reader that blocks on a FIFO or
// reads /dev/zero forever must fail, not stall the suite.
func within(t *testing.T, d time.Duration, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("still running after %v (blocked?)", d)
	}
}

func TestRead(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, size int) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(strings.Repeat("a", size)), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	small := write("small", 10)
	exact := write("exact", 100)
	over := write("over", 101)
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	link := func(name, target string) string {
		p := filepath.Join(dir, name)
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	toSmall := link("to-small", small)
	toFifo := link("to-fifo", fifo)
	toZero := link("to-zero", "/dev/zero")
	dangling := link("dangling", filepath.Join(dir, "nothing"))

	for _, tc := range []struct {
		name    string
		path    string
		size    int
		is      error
		message string
	}{
		{name: "regular", path: small, size: 10},
		{name: "exactly the cap", path: exact, size: 100},
		{name: "over the cap", path: over, is: ErrTooLarge, message: over + ": file too large: larger than the limit of 100 bytes"},
		{name: "symlink to a regular file", path: toSmall, size: 10},
		{name: "fifo without writer", path: fifo, is: ErrNotRegular, message: "a named pipe"},
		{name: "symlink to a fifo", path: toFifo, is: ErrNotRegular, message: "a named pipe"},
		{name: "/dev/zero", path: "/dev/zero", is: ErrNotRegular, message: "a character device"},
		{name: "symlink to /dev/zero", path: toZero, is: ErrNotRegular, message: toZero},
		{name: "folder", path: dir, is: ErrNotRegular, message: "a folder"},
		{name: "missing", path: filepath.Join(dir, "nothing"), is: fs.ErrNotExist},
		{name: "dangling symlink", path: dangling, is: fs.ErrNotExist},
	} {
		t.Run(tc.name, func(t *testing.T) {
			within(t, 10*time.Second, func() {
				data, err := Read(tc.path, 100)
				if tc.is == nil {
					if err != nil || len(data) != tc.size {
						t.Errorf("Read = %d bytes, %v; want %d bytes", len(data), err, tc.size)
					}
					return
				}
				if !errors.Is(err, tc.is) {
					t.Fatalf("Read error = %v; want %v", err, tc.is)
				}
				if !strings.Contains(err.Error(), tc.path) || !strings.Contains(err.Error(), tc.message) {
					t.Errorf("error %q should name %s and say %q", err, tc.path, tc.message)
				}
			})
		})
	}
}

func TestReadDefaultCap(t *testing.T) {
	p := filepath.Join(t.TempDir(), "big")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	// A sparse file just over the default cap costs no disk.
	if err := f.Truncate(DefaultMax + 1); err != nil {
		t.Fatal(err)
	}
	f.Close()
	within(t, 10*time.Second, func() {
		_, err := Read(p, 0)
		if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "16 MiB") {
			t.Errorf("Read = %v; want too large with the 16 MiB cap named", err)
		}
	})
}

func TestReadAllBoundsAStream(t *testing.T) {
	f, err := os.Open("/dev/zero")
	if err != nil {
		t.Skip(err)
	}
	defer f.Close()
	within(t, 10*time.Second, func() {
		_, err := ReadAll(f, "/dev/zero", 1<<10)
		if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "1 KiB") {
			t.Errorf("ReadAll = %v", err)
		}
	})
}

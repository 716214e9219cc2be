//go:build unix

package build

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestContextTarSpecialFiles: the classic builder's context tar sends symbolic links as links
// (to a secret outside the context, to a FIFO, to /dev/zero: never followed, nothing read), and a
// file replaced between the walk and its reading (by a FIFO, or by a link to a file elsewhere)
// is an error at once, neither waited for nor followed. Each case has a 30 s guard.
func TestContextTarSpecialFiles(t *testing.T) {
	guard := func(t *testing.T, f func()) {
		t.Helper()
		done := make(chan struct{})
		go func() { defer close(done); f() }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatal("hung")
		}
	}
	outside := filepath.Join(t.TempDir(), "secret")
	writeFiles(t, filepath.Dir(outside), map[string]string{"secret": "TOPSECRET"})
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"Dockerfile": "FROM x\n", "a.txt": "a"})
	if err := syscall.Mkfifo(filepath.Join(dir, "pipe"), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{"to-secret": outside, "to-pipe": "pipe", "to-zero": "/dev/zero"} {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("links sent as links", func(t *testing.T) {
		var buf bytes.Buffer
		guard(t, func() {
			if err := writeContextTar(&buf, dir, nil, filepath.Join(dir, "Dockerfile"), "Dockerfile"); err != nil {
				t.Error(err)
			}
		})
		got := tarListing(t, buf.Bytes())
		for _, want := range []string{`to-secret 2 777 "` + outside + `"`, `to-pipe 2 777 "pipe"`, `to-zero 2 777 "/dev/zero"`, `a.txt 0 644 "" 0:0 "":"" "a"`} {
			if !strings.Contains(got, want) {
				t.Errorf("missing %s in\n%s", want, got)
			}
		}
		if strings.Contains(got, "TOPSECRET") || strings.Contains(got, "pipe 0") {
			t.Errorf("a link was followed or a FIFO sent:\n%s", got)
		}
	})
	t.Run("replaced after the walk", func(t *testing.T) {
		for _, c := range []struct {
			name    string
			replace func(p string) error
			want    string
		}{
			{"by a FIFO", func(p string) error { return syscall.Mkfifo(p, 0o644) }, "not a regular file"},
			{"by a link to a file elsewhere", func(p string) error { return os.Symlink(outside, p) }, "changed while reading"},
			{"by a link to /dev/zero", func(p string) error { return os.Symlink("/dev/zero", p) }, "not a regular file"},
		} {
			t.Run(c.name, func(t *testing.T) {
				d := t.TempDir()
				p := filepath.Join(d, "f")
				writeFiles(t, d, map[string]string{"f": "TOPSECRET"}) // same size as the secret
				des, err := os.ReadDir(d)
				if err != nil {
					t.Fatal(err)
				}
				hdr, info, err := entryHeader(p, des[0])
				if err != nil {
					t.Fatal(err)
				}
				if err := os.Remove(p); err != nil {
					t.Fatal(err)
				}
				if err := c.replace(p); err != nil {
					t.Fatal(err)
				}
				var buf bytes.Buffer
				tw := tar.NewWriter(&buf)
				guard(t, func() { err = addToTar(tw, hdr, p, info) })
				if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), p) {
					t.Fatalf("err = %v", err)
				}
				tr := tar.NewReader(bytes.NewReader(buf.Bytes()))
				if _, err := tr.Next(); err != io.EOF && !strings.Contains(err.Error(), "EOF") {
					t.Errorf("a header was written for the refused file: %v", err)
				}
			})
		}
	})
	t.Run("Dockerfile outside the context as a FIFO", func(t *testing.T) {
		df := filepath.Join(t.TempDir(), "Dockerfile")
		if err := syscall.Mkfifo(df, 0o644); err != nil {
			t.Fatal(err)
		}
		var err error
		guard(t, func() { err = writeContextTar(io.Discard, dir, nil, df, "Dockerfile.outside") })
		if err == nil || !strings.Contains(err.Error(), df) {
			t.Fatalf("err = %v", err)
		}
	})
}

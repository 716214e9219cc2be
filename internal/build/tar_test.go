//go:build unix

package build

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// tarListing lists a tar stream one entry a line: name, type, permissions, link target, owner
// and content.
func tarListing(t *testing.T, data []byte) string {
	t.Helper()
	var b strings.Builder
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return b.String()
		}
		if err != nil {
			t.Fatal(err)
		}
		content, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s %c %o %q %d:%d %q:%q %q\n", hdr.Name, hdr.Typeflag, hdr.Mode&0o777, hdr.Linkname,
			hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname, content)
	}
}

// tarSource makes a folder with a file, a nested file, a symbolic link, an ignored file and a
// named pipe (which a tar of files leaves out).
func tarSource(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"a.txt": "a", "sub/b.txt": "bb", "skip.log": "x"})
	if err := os.Chmod(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("a.txt", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "pipe"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestWriteContextTar(t *testing.T) {
	dir := tarSource(t)
	df := filepath.Join(t.TempDir(), "Dockerfile")
	writeFiles(t, filepath.Dir(df), map[string]string{"Dockerfile": "FROM x\n"})
	var buf bytes.Buffer
	if err := writeContextTar(&buf, dir, []string{"*.log"}, df, "build/Dockerfile"); err != nil {
		t.Fatal(err)
	}
	want := `a.txt 0 644 "" 0:0 "":"" "a"
link 2 777 "a.txt" 0:0 "":"" ""
sub/ 5 755 "" 0:0 "":"" ""
sub/b.txt 0 644 "" 0:0 "":"" "bb"
build/Dockerfile 0 644 "" 0:0 "":"" "FROM x\n"
`
	if got := tarListing(t, buf.Bytes()); got != want {
		t.Errorf("context tar:\n%s\nwant:\n%s", got, want)
	}
}

func TestWriteFoldersTar(t *testing.T) {
	dir := tarSource(t)
	var buf bytes.Buffer
	folders := []HostFolder{{Source: dir, Target: "/srv/app/"}, {Source: filepath.Join(dir, "sub"), Target: "/srv/app/sub"}}
	if err := writeFoldersTar(&buf, folders); err != nil {
		t.Fatal(err)
	}
	want := `srv/ 5 755 "" 0:0 "":"" ""
srv/app/ 5 755 "" 0:0 "":"" ""
srv/app/a.txt 0 644 "" 0:0 "":"" "a"
srv/app/link 2 777 "a.txt" 0:0 "":"" ""
srv/app/skip.log 0 644 "" 0:0 "":"" "x"
srv/app/sub/ 5 755 "" 0:0 "":"" ""
srv/app/sub/b.txt 0 644 "" 0:0 "":"" "bb"
srv/app/sub/b.txt 0 644 "" 0:0 "":"" "bb"
`
	if got := tarListing(t, buf.Bytes()); got != want {
		t.Errorf("folders tar:\n%s\nwant:\n%s", got, want)
	}
}

// TestWriteFoldersTarSingleFile: a bind mount of one file (supabase's vector.yml) is baked in at
// its target path, its parents made, through a link to it too; a FIFO is refused, not read.
func TestWriteFoldersTarSingleFile(t *testing.T) {
	dir := tarSource(t)
	if err := os.Chmod(filepath.Join(dir, "a.txt"), 0o640); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	folders := []HostFolder{{Source: filepath.Join(dir, "a.txt"), Target: "/etc/vector/vector.yml"},
		{Source: filepath.Join(dir, "link"), Target: "/etc/vector/linked.yml"}}
	if err := writeFoldersTar(&buf, folders); err != nil {
		t.Fatal(err)
	}
	want := `etc/ 5 755 "" 0:0 "":"" ""
etc/vector/ 5 755 "" 0:0 "":"" ""
etc/vector/vector.yml 0 640 "" 0:0 "":"" "a"
etc/vector/linked.yml 0 640 "" 0:0 "":"" "a"
`
	if got := tarListing(t, buf.Bytes()); got != want {
		t.Errorf("single-file tar:\n%s\nwant:\n%s", got, want)
	}
	buf.Reset()
	err := writeFoldersTar(&buf, []HostFolder{{Source: filepath.Join(dir, "pipe"), Target: "/etc/pipe"}})
	if err == nil || !strings.Contains(err.Error(), "neither a folder nor a regular file") {
		t.Errorf("a FIFO: %v", err)
	}
}

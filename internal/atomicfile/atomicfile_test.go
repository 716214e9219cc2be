package atomicfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
)

// hook replaces the fsyncs with recorders for one test: each call appends what it saw.
func hook(t *testing.T, path string, calls *[]string) {
	t.Helper()
	oldFile, oldDir := syncFile, syncDir
	t.Cleanup(func() { syncFile, syncDir = oldFile, oldDir })
	syncFile = func(f *os.File) error {
		b, err := os.ReadFile(f.Name())
		if err != nil {
			t.Errorf("reading the file being synced: %v", err)
		}
		cur, _ := os.ReadFile(path)
		*calls = append(*calls, "file:"+filepath.Dir(f.Name())+":"+string(b)+":dest="+string(cur))
		return f.Sync()
	}
	syncDir = func(dir string) error {
		cur, _ := os.ReadFile(path)
		*calls = append(*calls, "dir:"+dir+":dest="+string(cur))
		return syncFolder(dir)
	}
}

func TestWriteSyncsFileThenFolder(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.json")
	if err := os.WriteFile(path, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	var calls []string
	hook(t, path, &calls)
	if err := Write(path, []byte("new"), 0o640); err != nil {
		t.Fatal(err)
	}
	// The temporary file is synced with the new content before it replaces the old file; the
	// folder is synced after the rename.
	want := []string{"file:" + dir + ":new:dest=old", "dir:" + dir + ":dest=new"}
	if strings.Join(calls, "\n") != strings.Join(want, "\n") {
		t.Fatalf("calls\n%s\nwant\n%s", strings.Join(calls, "\n"), strings.Join(want, "\n"))
	}
	assertFile(t, path, "new", 0o640)
	assertNoTemp(t, dir)
}

func TestWriteModeIgnoresUmask(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no unix modes")
	}
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	dir := t.TempDir()
	for _, perm := range []fs.FileMode{0o644, 0o600, 0o755} {
		p := filepath.Join(dir, "f")
		if err := Write(p, []byte("x"), perm); err != nil {
			t.Fatal(err)
		}
		assertFile(t, p, "x", perm)
	}
	p := filepath.Join(dir, "default")
	if err := Write(p, []byte("x"), 0); err != nil {
		t.Fatal(err)
	}
	assertFile(t, p, "x", 0o600)
}

func TestWriteFailureKeepsOldFileAndRemovesTemp(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.json")
	if err := os.WriteFile(path, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := map[string]func(){
		"the file's fsync fails":            func() { syncFile = func(*os.File) error { return errors.New("disk on fire") } },
		"the check before the rename fails": func() {},
	}
	for name, set := range cases {
		t.Run(name, func(t *testing.T) {
			oldFile := syncFile
			defer func() { syncFile = oldFile }()
			set()
			var seenTemp string
			err := WriteChecked(path, []byte("new"), 0o600, func(tmp string) error {
				seenTemp = tmp
				if b, _ := os.ReadFile(tmp); string(b) != "new" {
					t.Errorf("the temporary file holds %q before the rename", b)
				}
				return errors.New("disk on fire")
			})
			if err == nil || !strings.Contains(err.Error(), "disk on fire") || !strings.Contains(err.Error(), path) {
				t.Fatalf("error %v: want the injected failure naming %s", err, path)
			}
			if seenTemp != "" && filepath.Dir(seenTemp) != dir {
				t.Errorf("temporary file %s not beside %s", seenTemp, path)
			}
			assertFile(t, path, "old", 0o600)
			assertNoTemp(t, dir)
		})
	}
	// A folder that cannot hold the temporary file: an error naming the destination.
	err := Write(filepath.Join(dir, "missing", "f"), []byte("x"), 0o600)
	if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "missing", "f")) {
		t.Fatalf("error %v", err)
	}
}

// A symbolic link planted at the temporary name is never followed: its target stays as it was
// and another name is used.
func TestWriteNeverFollowsALinkAtTheTempName(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(victim, []byte("precious"), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "state.json")
	planted := filepath.Join(dir, ".state.json.planted.tmp")
	dangling := filepath.Join(dir, ".state.json.dangling.tmp")
	if err := os.Symlink(victim, planted); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "nowhere"), dangling); err != nil {
		t.Fatal(err)
	}
	names := []string{planted, dangling, filepath.Join(dir, ".state.json.free.tmp")}
	old := tempName
	defer func() { tempName = old }()
	var tried []string
	tempName = func(string) string {
		n := names[len(tried)]
		tried = append(tried, n)
		return n
	}
	if err := Write(path, []byte("new"), 0o600); err != nil {
		t.Fatal(err)
	}
	if len(tried) != 3 {
		t.Fatalf("tried %v", tried)
	}
	assertFile(t, victim, "precious", 0o644)
	if _, err := os.Lstat(filepath.Join(dir, "nowhere")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the dangling link's target was created: %v", err)
	}
	assertFile(t, path, "new", 0o600)
}

// A symbolic link at the destination is replaced, not written through.
func TestWriteReplacesALinkAtTheDestination(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(victim, []byte("precious"), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "state.json")
	if err := os.Symlink(victim, path); err != nil {
		t.Fatal(err)
	}
	if err := Write(path, []byte("new"), 0o600); err != nil {
		t.Fatal(err)
	}
	assertFile(t, victim, "precious", 0o644)
	if fi, err := os.Lstat(path); err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("%s: %v %v", path, fi, err)
	}
}

func TestWriteNew(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "id_ed25519")
	var calls []string
	hook(t, path, &calls)
	if err := WriteNew(path, []byte("first"), 0o600); err != nil {
		t.Fatal(err)
	}
	if len(calls) != 2 || !strings.HasPrefix(calls[0], "file:") || calls[1] != "dir:"+dir+":dest=first" {
		t.Fatalf("calls %q", calls)
	}
	err := WriteNew(path, []byte("second"), 0o600)
	if !errors.Is(err, fs.ErrExist) || !strings.Contains(err.Error(), path) {
		t.Fatalf("second WriteNew: %v", err)
	}
	assertFile(t, path, "first", 0o600)
	assertNoTemp(t, dir)
}

func assertFile(t *testing.T, path, content string, perm fs.FileMode) {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != content {
		t.Errorf("%s holds %q, want %q", path, b, content)
	}
	if runtime.GOOS != "windows" && fi.Mode().Perm() != perm {
		t.Errorf("%s has mode %04o, want %04o", path, fi.Mode().Perm(), perm)
	}
}

func assertNoTemp(t *testing.T, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".tmp") {
			t.Errorf("temporary file %s left behind", e.Name())
		}
	}
}

package manifest

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func within(t *testing.T, d time.Duration, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("still running after %v", d)
	}
}

// TestBadInput is issue 12's table for devtool.yml: special and huge files, several
// documents, deep nesting, an empty Compose file given with --file.
func TestBadInput(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "devtool.fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	linkDir := t.TempDir()
	if err := os.Symlink("/dev/zero", filepath.Join(linkDir, "devtool.yml")); err != nil {
		t.Fatal(err)
	}
	huge := filepath.Join(dir, "huge.yml")
	f, err := os.Create(huge)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(maxFileSize + 1); err != nil {
		t.Fatal(err)
	}
	f.Close()
	deep := strings.Repeat("${V:-", 11) + "x" + strings.Repeat("}", 11)

	for _, tc := range []struct {
		name  string
		dir   string
		file  string
		files map[string]string
		want  []string
	}{
		{name: "fifo given with --file", dir: dir, file: fifo, want: []string{fifo, "named pipe"}},
		{name: "devtool.yml found by discovery is a symlink to /dev/zero", dir: linkDir, want: []string{"devtool.yml", "character device"}},
		{name: "over the cap", dir: dir, file: huge, want: []string{huge, "16 MiB"}},
		{name: "two documents", files: map[string]string{"devtool.yml": "deploy:\n  - echo a\n---\ndeploy:\n  - echo b\n"},
			want: []string{"devtool.yml:3:1", "second YAML document"}},
		{name: "nesting over the limit", files: map[string]string{"devtool.yml": "name: \"" + deep + "\"\ndeploy:\n  - echo\n"},
			want: []string{"devtool.yml:1:7", "nested 11 deep"}},
		{name: "empty compose file given with --file", file: "compose.yaml", files: map[string]string{"compose.yaml": "# nothing yet\n"},
			want: []string{"the compose file is empty"}},
		{name: "empty devtool.yml", files: map[string]string{"devtool.yml": ""}, want: []string{"the manifest is empty"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			within(t, 20*time.Second, func() {
				d := tc.dir
				if d == "" {
					d = writeFiles(t, tc.files)
				}
				_, err := Load(LoadOptions{Dir: d, File: tc.file, Environ: map[string]string{}, HomeDir: "/home/dev"})
				if err == nil {
					t.Fatalf("no error; want %q", tc.want)
				}
				for _, w := range tc.want {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not contain %q", err, w)
					}
				}
				if strings.Contains(tc.name, "compose") && strings.Contains(err.Error(), "manifest is empty") {
					t.Errorf("an empty Compose file is called a manifest: %v", err)
				}
			})
		})
	}
}

// TestComposeOverrideDiscovered: a Compose file found by discovery brings its override file.
func TestComposeOverrideDiscovered(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"compose.yaml":          "services:\n  web: {image: w}\n",
		"compose.override.yaml": "services:\n  web: {build: .}\n",
	})
	m, err := Load(LoadOptions{Dir: dir, Environ: map[string]string{}, HomeDir: "/home/dev"})
	if err != nil {
		t.Fatal(err)
	}
	c := m.Deploy.Compose[0]
	if len(c.Files()) != 2 || filepath.Base(c.Merge[0]) != "compose.override.yaml" {
		t.Errorf("compose = %+v", c)
	}
	if len(m.Build) != 1 || m.Build[0].Service != "web" {
		t.Errorf("the override's build section is not seen: %+v", m.Build)
	}
}

package projectpath

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

func TestCheck(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("unix paths and symlinks")
	}
	base := t.TempDir()
	root := filepath.Join(base, "project")
	for _, d := range []string{root + "/src", base + "/sibling"} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for link, target := range map[string]string{
		"shadow": "/etc/shadow", "up": "..", "in": "src", "dangling": "/nonexistent/x",
	} {
		if err := os.Symlink(target, filepath.Join(root, link)); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		path    string
		outside bool
		link    bool
	}{
		{".", false, false},
		{"src", false, false},
		{"src/not-yet/file", false, false},
		{"in/file", false, false},
		{root + "/src", false, false},
		{"..", true, false},
		{"../sibling", true, false},
		{"src/../../sibling", true, false},
		{"/", true, false},
		{"/usr", true, false},
		{"../../../../usr", true, false},
		{"shadow", true, true},
		{"up/sibling", true, true},
		{"dangling", true, true},
	}
	for _, c := range cases {
		err := Check(root, c.path)
		var oe *OutsideError
		if got := errors.As(err, &oe); got != c.outside {
			t.Errorf("Check(%q) = %v, want outside %v", c.path, err, c.outside)
			continue
		}
		if c.outside && (oe.Resolved != "") != c.link {
			t.Errorf("Check(%q): %v, want a link %v", c.path, err, c.link)
		}
	}
	// A project folder reached through a link is still the project folder.
	alias := filepath.Join(base, "alias")
	if err := os.Symlink(root, alias); err != nil {
		t.Fatal(err)
	}
	if err := Check(alias, root+"/src"); err != nil {
		t.Errorf("through the alias: %v", err)
	}
}

func TestIsSystemPath(t *testing.T) {
	for p, want := range map[string]bool{
		"/var/run/docker.sock": true, "/run/docker.sock": true, "/etc/localtime": true,
		"/etc/timezone": true, "/proc": true, "/proc/1/status": true, "/sys/fs/cgroup": true,
		"/dev/shm": true, "/dev": true, "/var/lib/docker/containers": true,
		"/etc": false, "/etc/passwd": false, "/devices": false, "/home/me/.docker": false,
		"./proc": false, "~/.ssh": false, "/var/run": false, "/procfs": false,
	} {
		if got := IsSystemPath(p); got != want {
			t.Errorf("IsSystemPath(%q) = %v, want %v", p, got, want)
		}
	}
}

//go:build unix

package dev

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/devtool/devtool/internal/safefile"
)

func TestLockRefusesALinkedPIDFile(t *testing.T) {
	home := t.TempDir()
	s, err := OpenStateDir(home, "/work/app", "web")
	if err != nil {
		t.Fatal(err)
	}
	victim := filepath.Join(t.TempDir(), "precious")
	if err := os.WriteFile(victim, []byte("data"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, s.PIDFile()); err != nil {
		t.Fatal(err)
	}
	err = s.Lock()
	if !errors.Is(err, safefile.ErrSymlink) || !strings.Contains(err.Error(), s.PIDFile()) {
		t.Fatalf("Lock: %v", err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "data" {
		t.Fatalf("the link's target now holds %q", b)
	}
	if s.Holder() != 0 {
		t.Error("a holder through a link")
	}
	// OpenStateDir (what up and doctor call first) refuses it too.
	if _, err := OpenStateDir(home, "/work/app", "web"); err == nil || !strings.Contains(err.Error(), s.PIDFile()) {
		t.Fatalf("OpenStateDir: %v", err)
	}
}

func TestOpenStateDirRefusesLinkedFolders(t *testing.T) {
	for _, level := range []string{"dev", "hash", "name"} {
		t.Run(level, func(t *testing.T) {
			home := t.TempDir()
			p := StateDirPath(home, "/work/app", "web")
			link := map[string]string{"dev": filepath.Join(home, ".devtool", "dev"), "hash": filepath.Dir(p), "name": p}[level]
			target := filepath.Join(t.TempDir(), "elsewhere")
			if err := os.Mkdir(target, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(filepath.Dir(link), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(target, link); err != nil {
				t.Fatal(err)
			}
			_, err := OpenStateDir(home, "/work/app", "web")
			if err == nil || !strings.Contains(err.Error(), link) || !strings.Contains(err.Error(), "symbolic link") {
				t.Fatalf("OpenStateDir: %v", err)
			}
			fi, _ := os.Stat(target)
			if fi.Mode().Perm() != 0o755 {
				t.Errorf("target mode now %04o", fi.Mode().Perm())
			}
			if ents, _ := os.ReadDir(target); len(ents) != 0 {
				t.Errorf("folders made in the target: %v", ents)
			}
		})
	}
}

func TestStateDirCheck(t *testing.T) {
	home := t.TempDir()
	s, err := OpenStateDir(home, "/work/app", "web")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{s.StateFile(), s.StatusFile(), s.LogFile(), s.KeyFile(), s.KnownHostsFile(), filepath.Join(s.SyncDir(), "local-x")} {
		t.Run(filepath.Base(p), func(t *testing.T) {
			os.MkdirAll(filepath.Dir(p), 0o700)
			if err := syscall.Mkfifo(p, 0o600); err != nil {
				t.Fatal(err)
			}
			defer os.Remove(p)
			err := s.Check()
			if err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "named pipe") {
				t.Fatalf("Check: %v", err)
			}
			if _, err := OpenStateDir(home, "/work/app", "web"); err == nil {
				t.Fatal("OpenStateDir accepts it")
			}
		})
	}
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
}

func TestBrokenStateFilesNamed(t *testing.T) {
	s, err := OpenStateDir(t.TempDir(), "/work/app", "web")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(s.StatusFile(), []byte("{\"addr\": "), 0o600)
	os.WriteFile(s.StateFile(), []byte("nonsense"), 0o600)
	if _, err := s.ReadStatusService(); err == nil || !strings.Contains(err.Error(), s.StatusFile()) {
		t.Errorf("ReadStatusService: %v", err)
	}
	if _, err := s.ReadState(); err == nil || !strings.Contains(err.Error(), s.StateFile()) {
		t.Errorf("ReadState: %v", err)
	}
}

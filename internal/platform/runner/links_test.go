package runner

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/devtool/devtool/internal/gittest"
)

// linkRepo makes repository name on srv whose files are files plus the symbolic links links
// (path -> target).
func linkRepo(t *testing.T, srv *gittest.Server, name string, files, links map[string]string) string {
	t.Helper()
	src := writeFiles(t, files)
	for p, target := range links {
		full := filepath.Join(src, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, full); err != nil {
			t.Fatal(err)
		}
	}
	return srv.Repo(t, name, src, "main", false)
}

// TestCloneRefusesLinksOutOfTheRepository: a repository whose devtool.yml (or a folder on the
// way to a file it names, or its .env) is a relative symbolic link out of the clone would have the
// deploy read the runner's own files (the user's token, the builder's key, the run's secrets):
// the clone fails naming the link, and the checkout is removed. Links that stay inside the clone
// are kept.
func TestCloneRefusesLinksOutOfTheRepository(t *testing.T) {
	srv := gittest.Start(t, gittest.Options{Addr: "127.0.0.1:0"})
	secret := filepath.Join(t.TempDir(), "token")
	os.WriteFile(secret, []byte("the-users-token\n"), 0o600)
	ctx := context.Background()
	for _, c := range []struct {
		name  string
		links map[string]string
		want  string
	}{
		{"relative", map[string]string{".env": "../../../../../../../../../../../../" + secret}, ".env"},
		{"a folder", map[string]string{"deploy/conf": "../../../../../../../../../../../../" + filepath.Dir(secret)}, "deploy/conf"},
		{"dangling out", map[string]string{"x": "../../../../../../../../../../../../nonexistent-devtool-test/x"}, "x"},
		{"through an inner link", map[string]string{"a": "sub", "sub/b": "../a/../../.."}, "sub/b"},
	} {
		t.Run(c.name, func(t *testing.T) {
			repo := linkRepo(t, srv, strings.ReplaceAll(c.name, " ", "-"), map[string]string{"README": "hi\n"}, c.links)
			dir := filepath.Join(t.TempDir(), "c")
			_, err := Clone(ctx, CloneOptions{URL: repo, Dir: dir})
			if !errors.Is(err, ErrLinkOutside) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want ErrLinkOutside naming %s", err, c.want)
			}
			if _, err := os.Lstat(dir); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("the refused checkout is still there (%v)", err)
			}
		})
	}
	t.Run("absolute", func(t *testing.T) {
		// go-git (billy's chroot) writes an absolute link's target inside the clone: refused or
		// rewritten, the secret is never read through it
		repo := linkRepo(t, srv, "absolute", map[string]string{"README": "hi\n"},
			map[string]string{"devtool.yml": secret, "deploy/conf": filepath.Dir(secret)})
		dir := filepath.Join(t.TempDir(), "c")
		_, err := Clone(ctx, CloneOptions{URL: repo, Dir: dir})
		if err != nil && !errors.Is(err, ErrLinkOutside) {
			t.Fatal(err)
		}
		for _, p := range []string{"devtool.yml", "deploy/conf/token"} {
			if b, err := os.ReadFile(filepath.Join(dir, p)); err == nil || strings.Contains(string(b), "the-users-token") {
				t.Fatalf("%s reads %q (%v)", p, b, err)
			}
		}
	})
	t.Run("inside", func(t *testing.T) {
		repo := linkRepo(t, srv, "inside", map[string]string{"conf/app.yml": "name: app\n"},
			map[string]string{"devtool.yml": "conf/app.yml", "sub/up": "..", "dangling": "not-yet"})
		dir := filepath.Join(t.TempDir(), "c")
		if _, err := Clone(ctx, CloneOptions{URL: repo, Dir: dir}); err != nil {
			t.Fatal(err)
		}
		if b, err := os.ReadFile(filepath.Join(dir, "devtool.yml")); err != nil || string(b) != "name: app\n" {
			t.Fatalf("devtool.yml through its link: %q %v", b, err)
		}
	})

	// the run stops at the clone: devtool never reads the link
	o, out := runSpec(t, map[string]string{"devtool.yml": "name: app\n"})
	o.Spec.Repository = linkRepo(t, srv, "run", map[string]string{"README": "hi\n"}, map[string]string{"devtool.yml": "../../../../../../../../../../../.." + o.TokenFile})
	res, err := Run(ctx, o)
	if err == nil || res.Step != "clone" || !strings.Contains(err.Error(), "devtool.yml") || strings.Contains(out.String(), "==> devtool deploy") {
		t.Fatalf("err %v, result %+v\n%s", err, res, out)
	}
}

// TestDotEnvNamesNeverBlocks: a .env that is a FIFO (or a folder) gives no names at once instead
// of blocking the run until its deadline.
func TestDotEnvNamesNeverBlocks(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, ".env")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skip("no FIFOs here:", err)
	}
	done := make(chan map[string]bool, 1)
	go func() { done <- dotEnvNames(fifo) }()
	select {
	case names := <-done:
		if len(names) != 0 {
			t.Fatalf("names %v of a FIFO", names)
		}
	case <-time.After(5 * time.Second):
		// unblock the reader so the test ends
		if w, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			w.Close()
		}
		t.Fatal("dotEnvNames blocked on a FIFO")
	}
	if names := dotEnvNames(dir); len(names) != 0 {
		t.Fatalf("names %v of a folder", names)
	}
	os.WriteFile(filepath.Join(dir, "env"), []byte("export A=1\n# B=2\nC = 3\n"), 0o644)
	if names := dotEnvNames(filepath.Join(dir, "env")); len(names) != 2 || !names["A"] || !names["C"] {
		t.Fatalf("names %v", names)
	}
}

// TestRunTokenFileNeverBlocks: the run's token is read through safefile: a FIFO in its place fails
// the start step at once instead of blocking the run until its deadline.
func TestRunTokenFileNeverBlocks(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "token")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skip("no FIFOs here:", err)
	}
	var out strings.Builder
	done := make(chan error, 1)
	go func() {
		_, err := Run(context.Background(), Options{TokenFile: fifo, WorkDir: t.TempDir(), Out: &out})
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "token") {
			t.Fatalf("err %v", err)
		}
	case <-time.After(5 * time.Second):
		if w, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			w.Close()
		}
		t.Fatal("Run blocked reading a FIFO as its token")
	}
}

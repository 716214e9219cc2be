package manifest

import (
	"os"
	"path/filepath"
	"testing"
)

func TestGitRemoteName(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files map[string]string
		sub   string
		want  string
	}{
		{"origin", map[string]string{".git/config": "[core]\n\tbare = false\n[remote \"upstream\"]\n\turl = https://x/acme/up.git\n[remote \"origin\"]\n\turl = git@github.com:acme/shop.git\n"}, "", "shop"},
		{"first remote without origin", map[string]string{".git/config": "[remote \"fork\"]\n\turl = https://gitlab.com/me/store\n"}, "", "store"},
		{"from a sub-folder", map[string]string{".git/config": "[remote \"origin\"]\n\turl = https://github.com/acme/api.git\n", "svc/a/.keep": ""}, "svc/a", "api"},
		{"no remote", map[string]string{".git/config": "[core]\n"}, "", ""},
		{"no repository", map[string]string{"x": ""}, "", ""},
		{"worktree", map[string]string{".git": "gitdir: main/.git/worktrees/wt\n", "main/.git/worktrees/wt/commondir": "../..\n",
			"main/.git/config": "[remote \"origin\"]\n\turl = https://github.com/acme/web\n"}, "", "web"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeFiles(t, tc.files)
			if err := os.MkdirAll(filepath.Join(dir, tc.sub), 0o755); err != nil {
				t.Fatal(err)
			}
			if got := GitRemoteName(filepath.Join(dir, tc.sub)); got != tc.want && !(tc.want == "" && tc.name == "no repository") {
				t.Errorf("GitRemoteName = %q, want %q", got, tc.want)
			}
		})
	}
}

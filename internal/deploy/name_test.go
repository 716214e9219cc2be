package deploy

import (
	"os"
	"path/filepath"
	"testing"
)

func TestSanitizeName(t *testing.T) {
	cases := map[string]string{
		"My_App":      "my-app",
		"  web.api  ": "web-api",
		"--x--":       "x",
		"ÄÖÜ":         "",
	}
	long := ""
	for i := 0; i < 70; i++ {
		long += "b"
	}
	cases[long] = long[:63]
	for in, want := range cases {
		if got := SanitizeName(in); got != want {
			t.Errorf("SanitizeName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestEnvironmentNamePrecedence(t *testing.T) {
	root := t.TempDir()
	repo := filepath.Join(root, "My_Repo")
	sub := filepath.Join(repo, "svc")
	if err := os.MkdirAll(filepath.Join(repo, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	plain := filepath.Join(root, "Plain.Dir")
	if err := os.MkdirAll(plain, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ flag, manifest, dir, want string }{
		{"Flag", "manifest", sub, "flag"},
		{"", "From_Manifest", sub, "from-manifest"},
		{"", "", sub, "my-repo"},
		{"", "", plain, "plain-dir"},
	} {
		if got := EnvironmentName(c.flag, c.manifest, c.dir); got != c.want {
			t.Errorf("EnvironmentName(%q, %q, %q) = %q, want %q", c.flag, c.manifest, c.dir, got, c.want)
		}
	}
}

func TestEnvironmentNameFromOrigin(t *testing.T) {
	root := t.TempDir()
	repo := filepath.Join(root, "checkout")
	sub := filepath.Join(repo, "services", "web")
	if err := os.MkdirAll(filepath.Join(repo, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := "[core]\n\tbare = false\n[remote \"upstream\"]\n\turl = https://example.test/o/other.git\n[remote \"origin\"]\n\turl = git@example.test:team/Shop.git\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n"
	if err := os.WriteFile(filepath.Join(repo, ".git", "config"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := EnvironmentName("", "", sub); got != "shop" {
		t.Fatalf("subfolder of a repository with origin: %q, want shop", got)
	}
	// A worktree's .git file points to the main repository's config.
	wt := filepath.Join(root, "wt")
	gd := filepath.Join(repo, ".git", "worktrees", "wt")
	if err := os.MkdirAll(gd, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(gd, "commondir"), []byte("../..\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(wt, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(wt, ".git"), []byte("gitdir: "+gd+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := EnvironmentName("", "", wt); got != "shop" {
		t.Fatalf("worktree: %q, want shop", got)
	}
	for in, want := range map[string]string{"https://h/o/shop.git": "shop", "git@h:shop": "shop", "/srv/git/shop/": "shop", "file:///x/y.git": "y"} {
		if got := repoNameFromURL(in); got != want {
			t.Errorf("repoNameFromURL(%q) = %q, want %q", in, got, want)
		}
	}
}

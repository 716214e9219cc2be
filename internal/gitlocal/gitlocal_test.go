package gitlocal

import (
	"context"
	"os/exec"
	"testing"
)

func TestHTTPS(t *testing.T) {
	for in, want := range map[string]string{
		"git@github.com:acme/shop.git":           "https://github.com/acme/shop.git",
		"ssh://git@gitlab.example.com:22/a/b":    "https://gitlab.example.com/a/b",
		"https://github.com/acme/shop":           "https://github.com/acme/shop",
		"https://x-token:abc@github.com/a/b.git": "https://github.com/a/b.git",
		"http://10.0.0.5:8080/a.git":             "http://10.0.0.5:8080/a.git",
	} {
		got, _, err := HTTPS(in)
		if err != nil || got != want {
			t.Errorf("%s: %q %v, want %q", in, got, err, want)
		}
	}
	if _, _, err := HTTPS("file:///srv/repo"); err == nil {
		t.Error("file:// was turned into a URL")
	}
	if RepoName("https://github.com/acme/shop.git") != "shop" || RepoName("git@github.com:acme/shop") != "acme/shop" && RepoName("https://h/x/") != "x" {
		t.Errorf("RepoName: %q %q", RepoName("https://github.com/acme/shop.git"), RepoName("https://h/x/"))
	}
}

func TestOriginAndBranch(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	dir := t.TempDir()
	for _, args := range [][]string{{"init", "-q", "-b", "topic"}, {"remote", "add", "origin", "git@github.com:acme/shop.git"}} {
		if out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
	}
	ctx := context.Background()
	if o, err := Origin(ctx, dir); err != nil || o != "git@github.com:acme/shop.git" {
		t.Fatalf("origin %q %v", o, err)
	}
	if b, err := Branch(ctx, dir); err != nil || b != "topic" {
		// an unborn branch has no HEAD commit: rev-parse --abbrev-ref fails there
		t.Logf("branch of an empty repository: %q %v", b, err)
	}
	if _, err := Origin(ctx, t.TempDir()); err == nil {
		t.Fatal("a folder outside any repository has an origin")
	}
}

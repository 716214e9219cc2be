//go:build integration

package build

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDerivedImage(t *testing.T) {
	needDaemons(t) // for the busybox base in the in-process registry
	ctx := context.Background()
	src := t.TempDir()
	writeFiles(t, src, map[string]string{"index.html": "v1", "css/site.css": "body{}"})
	if err := os.Symlink("index.html", filepath.Join(src, "home.html")); err != nil {
		t.Fatal(err)
	}
	repo := env.regHost + "/ns/proj-web"
	folders := []HostFolder{{Source: src, Target: "/usr/share/www"}}
	ref, err := DerivedImage(ctx, env.busyboxBase, repo, folders)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(ref, repo+":vol-") {
		t.Fatalf("ref %s", ref)
	}
	files, cf := imageFiles(t, ref)
	if files["usr/share/www/index.html"] != "v1" || files["usr/share/www/css/site.css"] != "body{}" || files["bin/busybox"] == "" {
		t.Fatalf("derived image lacks the folder or the base: %d files, index=%q", len(files), files["usr/share/www/index.html"])
	}
	if len(cf.Config.Cmd) != 1 || cf.Config.Cmd[0] != "/bin/sh" {
		t.Errorf("base config lost: %+v", cf.Config)
	}
	again, err := DerivedImage(ctx, env.busyboxBase, repo, folders)
	if err != nil || again != ref {
		t.Errorf("unchanged folder: %s, %v; want %s", again, err, ref)
	}
	writeFiles(t, src, map[string]string{"index.html": "v2"})
	changed, err := DerivedImage(ctx, env.busyboxBase, repo, folders)
	if err != nil || changed == ref {
		t.Fatalf("changed folder kept %s (%v)", changed, err)
	}
	if f, _ := imageFiles(t, changed); f["usr/share/www/index.html"] != "v2" {
		t.Errorf("changed content %q", f["usr/share/www/index.html"])
	}
}

// TestDerivedImageSingleFile: a host volume that is one file is added at its target path (a
// Compose bind mount of a configuration file), and a change to it changes the tag.
func TestDerivedImageSingleFile(t *testing.T) {
	needDaemons(t)
	ctx := context.Background()
	src := t.TempDir()
	writeFiles(t, src, map[string]string{"vector.yml": "sources: {}\n"})
	repo := env.regHost + "/ns/proj-vector"
	folders := []HostFolder{{Source: filepath.Join(src, "vector.yml"), Target: "/etc/vector/vector.yml"}}
	ref, err := DerivedImage(ctx, env.busyboxBase, repo, folders)
	if err != nil {
		t.Fatal(err)
	}
	files, _ := imageFiles(t, ref)
	if files["etc/vector/vector.yml"] != "sources: {}\n" {
		t.Fatalf("derived image's etc/vector/vector.yml: %q", files["etc/vector/vector.yml"])
	}
	writeFiles(t, src, map[string]string{"vector.yml": "sources: {a: 1}\n"})
	changed, err := DerivedImage(ctx, env.busyboxBase, repo, folders)
	if err != nil || changed == ref {
		t.Fatalf("changed file kept %s (%v)", changed, err)
	}
}

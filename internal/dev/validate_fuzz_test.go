package dev

import (
	"errors"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/devtool/devtool/internal/manifest"
)

// FuzzDevSection feeds arbitrary devtool.yml bytes to the loader and every dev entry it accepts
// to Validate (with a file system where the project's paths are folders): neither may panic
// or take long; every refusal names a file and a field; and an entry Validate accepts has
// clean absolute remote folders that neither repeat nor nest, no port twice, valid
// environment names and a parsable image.
func FuzzDevSection(f *testing.F) {
	for _, s := range []string{
		"dev:\n  web:\n    image: busybox:local\n    sync: [.:/app, lib:/opt/lib]\n    forward: [8080:80, 5432:db:5432]\n    reverse: [9000:9001]\n",
		"dev:\n  web:\n    sync: [\"./a:/app/../etc\", \"b:/\", \"c:/app/\"]\n    workdir: /app/./x\n",
		"dev:\n  web:\n    environment: {\"A=B\": x, \"\": y, \"a b\": z, ok: \"v\\0\"}\n    image: \"\"\n",
		"dev:\n  web:\n    environment: [\"X\\nY=1\", A]\n    resources: {requests: {cpu: '2', memory: 1Gi}, limits: {cpu: 500m, memory: 1Mi}}\n",
		"dev:\n  a: {forward: [1, 1, 2:3], reverse: [4:5, 4:6]}\n  b: {sync: [x:/a, y:/a/b, z:/a]}\n",
		"x: &s [.:/app]\ndev:\n  web: {sync: *s, image: Busy/Box, autocreate: true}\n",
	} {
		f.Add([]byte(s))
	}
	dir := f.TempDir()
	file := filepath.Join(dir, "devtool.yml")
	stat := func(p string) (fs.FileInfo, error) {
		if within(p, dir) && !strings.ContainsAny(p, "\x00\n\r") {
			return os.Stat(dir) // every path of the project is a folder
		}
		return nil, &fs.PathError{Op: "stat", Path: p, Err: fs.ErrNotExist}
	}
	identity := func(p string) (string, error) { return p, nil }
	f.Fuzz(func(t *testing.T, data []byte) {
		start := time.Now()
		m, err := manifest.LoadBytes(manifest.LoadOptions{File: file, Environ: map[string]string{"A": "1"}, HomeDir: dir}, data)
		if err != nil {
			return // FuzzLoadManifest checks the loader's errors
		}
		for _, d := range m.Dev {
			err := Validate(d, CheckOptions{ProjectDir: dir, Stat: stat, EvalSymlinks: identity})
			if el := time.Since(start); el > slowCheck {
				t.Fatalf("loading and checking %d bytes took %v", len(data), el)
			}
			if err != nil {
				var es Errors
				if !errors.As(err, &es) || len(es) == 0 {
					t.Fatalf("error is not a non-empty Errors: %T %v", err, err)
				}
				for _, e := range es {
					if e.Pos.File == "" || e.Field == "" || e.Pos.Line == 0 {
						t.Fatalf("error without a file, line or field: %+v", e)
					}
				}
				continue
			}
			accepted(t, d)
		}
	})
}

// slowCheck is far above any real manifest's load and check time.
const slowCheck = 2 * time.Second

// accepted fails unless a dev entry Validate accepted holds its promises.
func accepted(t *testing.T, d *manifest.Dev) {
	t.Helper()
	var remotes []string
	for _, s := range d.Sync {
		r := s.Remote
		if r == "/" || path.Clean(r) != r || !path.IsAbs(r) || strings.ContainsAny(r+s.Local, "\x00\n\r") {
			t.Fatalf("accepted remote folder %q (local %q)", r, s.Local)
		}
		for _, o := range remotes {
			if inside(r, o) || inside(o, r) {
				t.Fatalf("accepted nesting remote folders %q and %q", o, r)
			}
		}
		remotes = append(remotes, r)
	}
	locals := map[int32]bool{}
	for _, fw := range d.Forward {
		if locals[fw.Local] {
			t.Fatalf("accepted local port %d twice", fw.Local)
		}
		locals[fw.Local] = true
	}
	rem := map[int32]bool{}
	for _, r := range d.Reverse {
		if rem[r.Remote] {
			t.Fatalf("accepted remote port %d twice", r.Remote)
		}
		rem[r.Remote] = true
	}
	for k, v := range d.Environment {
		if EnvNameError(k) != "" || strings.ContainsRune(v, 0) {
			t.Fatalf("accepted environment %q=%q", k, v)
		}
	}
	if _, written := d.Sources["image"]; (d.Image != "" || written) && ImageRefError(d.Image) != "" {
		t.Fatalf("accepted image %q", d.Image)
	}
	if d.Workdir != "" && containerPathError(d.Workdir) != "" {
		t.Fatalf("accepted workdir %q", d.Workdir)
	}
}

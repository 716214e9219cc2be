package manifest

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// slowLoad is far above any real manifest's load time; a slower input shows super-linear work.
const slowLoad = 2 * time.Second

// FuzzLoadManifest feeds arbitrary bytes to the loader: it must never panic, and every failure
// must be a non-empty Errors whose entries each name the file.
func FuzzLoadManifest(f *testing.F) {
	seeds, _ := filepath.Glob(filepath.Join("testdata", "*", "*.yml"))
	for _, path := range seeds {
		if data, err := os.ReadFile(path); err == nil {
			f.Add(data)
		}
	}
	for _, s := range []string{
		"x-a: &a {image: a, sync: [.:/app]}\ndev:\n  web:\n    <<: [*a]\n    forward: [8080:80, 1:db:2]\n",
		"deploy:\n  compose: [{file: c.yml, services: a}]\n  endpoints: {web: {labels: {a: b}, rules: [{path: /, service: a, port: 1}]}}\n",
		"dependencies: {a: {repository: ${R:?no}, timeout: 1m, wait: yes, variables: [A=$A]}}\n",
		"a: &a [*a]\ndeploy: *a\n",
		"build: {a: {args: [A], secrets: [x=~/y], cache_from: z}}\ndestroy: [{name: n, command: ${X}}]\n",
	} {
		f.Add([]byte(s))
	}
	dir := f.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "c.yml"), []byte("services: {a: {image: a}}\n"), 0o644); err != nil {
		f.Fatal(err)
	}
	file := filepath.Join(dir, "devtool.yml")
	f.Fuzz(func(t *testing.T, data []byte) {
		start := time.Now()
		m, err := LoadBytes(LoadOptions{File: file, Environ: map[string]string{"A": "1"}, HomeDir: dir}, data)
		if d := time.Since(start); d > slowLoad {
			t.Fatalf("loading %d bytes took %v", len(data), d)
		}
		if err != nil {
			var es Errors
			if !errors.As(err, &es) || len(es) == 0 {
				t.Fatalf("error is not a non-empty manifest.Errors: %T %v", err, err)
			}
			for _, e := range es {
				if e.Pos.File == "" {
					t.Fatalf("error without a file: %v", e)
				}
			}
			return
		}
		if m == nil || m.Dir != dir {
			t.Fatalf("manifest %+v without error", m)
		}
		for _, c := range append(append([]Command{}, m.Deploy.Commands...), m.Destroy...) {
			if c.Command == "" || c.Name == "" {
				t.Fatalf("empty command accepted: %+v", c)
			}
		}
		for _, fw := range m.Dev {
			for _, p := range fw.Forward {
				if p.Local < 1 || p.Remote < 1 {
					t.Fatalf("bad forward %+v", p)
				}
			}
		}
	})
}

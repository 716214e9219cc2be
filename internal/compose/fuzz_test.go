package compose

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// slowLoad is far above any real file's load time (well under a millisecond); an input that
// takes longer shows super-linear work an attacker-written file could trigger.
const slowLoad = 2 * time.Second

// FuzzLoad feeds arbitrary bytes to the loader: it must never panic, and every failure must be
// a list of errors that each name the file.
func FuzzLoad(f *testing.F) {
	seeds, _ := filepath.Glob(filepath.Join("testdata", "corpus", "*", "*", "*.y*ml"))
	more, _ := filepath.Glob(filepath.Join("testdata", "corpus", "*", "*", "*", "*.y*ml"))
	for _, path := range append(seeds, more...) {
		if data, err := os.ReadFile(path); err == nil {
			f.Add(data)
		}
	}
	for _, s := range []string{
		"x-a: &a {image: a, ports: [\"80:8080\"]}\nservices:\n  web:\n    <<: [*a]\n    depends_on: {web: {condition: service_healthy}}\n",
		"services:\n  web:\n    build: {context: ., args: [A=$A]}\n    healthcheck: {http: {path: /, port: 80}, interval: 1m}\nendpoints:\n  - {path: /, service: web, port: 80}\n",
		"services:\n  web:\n    image: ${X:?no}\n    volumes: [v:/v:ro, /a, ./b:/b]\nvolumes: {v: {driver_opts: {size: 2Gi}}}\n",
		"a: &a [*a]\n",
		"services: {web: {image: x, ports: [\"1-999:1-999/udp\"], deploy: {resources: {limits: {cpus: '0.5', memory: 1g}}}}}\n",
	} {
		f.Add([]byte(s))
	}
	dir := f.TempDir()
	file := filepath.Join(dir, "compose.yml")
	f.Fuzz(func(t *testing.T, data []byte) {
		start := time.Now()
		p, err := LoadBytes(LoadOptions{File: file, Environ: map[string]string{"A": "1"}, HomeDir: dir}, data)
		if d := time.Since(start); d > slowLoad {
			t.Fatalf("loading %d bytes took %v", len(data), d)
		}
		if err != nil {
			var es Errors
			if !errors.As(err, &es) || len(es) == 0 {
				t.Fatalf("error is not a non-empty compose.Errors: %T %v", err, err)
			}
			for _, e := range es {
				if e.Pos.File == "" {
					t.Fatalf("error without a file: %v", e)
				}
			}
			return
		}
		if p == nil {
			t.Fatal("nil project without error")
		}
		for _, s := range p.Services {
			if s.Scale < 0 || s.Restart.Policy == "" {
				t.Fatalf("service %s: scale %d restart %q", s.Name, s.Scale, s.Restart.Policy)
			}
		}
	})
}

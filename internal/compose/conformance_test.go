package compose

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// corpusDir is the shared corpus beside the clone (../shared from the repo root). CI always
// has it; DEVTOOL_COMPOSE_CORPUS points elsewhere.
func corpusDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("DEVTOOL_COMPOSE_CORPUS")
	if dir == "" {
		dir = filepath.Join("..", "..", "..", "shared", "corpus", "compose")
	}
	if _, err := os.Stat(dir); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("compose corpus missing in CI: %v", err)
		}
		t.Skipf("compose corpus not found at %s (set DEVTOOL_COMPOSE_CORPUS); testdata/corpus still runs in TestConformanceTestdata", dir)
	}
	return dir
}

// corpusFiles lists the YAML files of a corpus tree, leaving out kompose's Kubernetes outputs
// (they are kompose's results, not compose files).
func corpusFiles(t *testing.T, root string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() || strings.HasPrefix(name, "output-") {
			return nil
		}
		if ext := filepath.Ext(name); ext == ".yaml" || ext == ".yml" {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no compose files under %s", root)
	}
	return files
}

// checkConformance loads each file: it loads, or fails with errors that each name a file and,
// for the compose file itself, a line. A panic fails the test by itself.
func checkConformance(t *testing.T, files []string) {
	loaded, failed := 0, 0
	for _, f := range files {
		p, err := Load(LoadOptions{File: f, Environ: map[string]string{}, HomeDir: "/home/test"})
		if err == nil {
			if p == nil {
				t.Errorf("%s: nil project without error", f)
			}
			loaded++
			continue
		}
		failed++
		var es Errors
		if !errors.As(err, &es) {
			t.Errorf("%s: error is not compose.Errors: %v", f, err)
			continue
		}
		for _, e := range es {
			if e.Pos.File == "" || (e.Pos.File == f && e.Pos.Line == 0) {
				t.Errorf("%s: error without file and line: %v", f, e)
			}
		}
		if testing.Verbose() {
			t.Logf("%s: %v", f, err)
		}
	}
	t.Logf("%d files: %d loaded, %d rejected with positioned errors", len(files), loaded, failed)
}

func TestConformanceCorpus(t *testing.T) {
	checkConformance(t, corpusFiles(t, corpusDir(t)))
}

func TestConformanceTestdata(t *testing.T) {
	checkConformance(t, corpusFiles(t, filepath.Join("testdata", "corpus")))
}

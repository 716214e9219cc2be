package compose

import (
	"errors"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
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
		if os.Getenv("CI") == "true" {
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
// for the compose file itself, a line. A panic fails the test by itself. It returns the files
// that loaded.
func checkConformance(t *testing.T, files []string) []string {
	loaded, failed := 0, 0
	var ok []string
	for _, f := range files {
		var p *Project
		var err error
		within(t, 20*time.Second, func() {
			p, err = Load(LoadOptions{File: f, Environ: map[string]string{}, HomeDir: "/home/test"})
		})
		if err == nil {
			if p == nil {
				t.Errorf("%s: nil project without error", f)
			}
			loaded++
			ok = append(ok, f)
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
	return ok
}

var updateLoads = flag.Bool("update", false, "rewrite the expected-to-load lists in testdata/")

// checkExpected compares the files that loaded (relative to root) with the checked-in list
// at listPath: a listed file that no longer loads fails the test, so the count can only rise;
// a file that loads and is not listed is reported, and -update adds it.
func checkExpected(t *testing.T, root, listPath string, loaded []string) {
	t.Helper()
	got := map[string]bool{}
	for _, f := range loaded {
		rel, err := filepath.Rel(root, f)
		if err != nil {
			t.Fatal(err)
		}
		got[filepath.ToSlash(rel)] = true
	}
	if *updateLoads {
		names := make([]string, 0, len(got))
		for n := range got {
			names = append(names, n)
		}
		sort.Strings(names)
		if err := os.WriteFile(listPath, []byte(strings.Join(names, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	data, err := os.ReadFile(listPath)
	if err != nil {
		t.Fatalf("%v (run go test ./internal/compose -run Conformance -update to create it)", err)
	}
	want := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			want[line] = true
		}
	}
	for n := range want {
		if !got[n] {
			t.Errorf("%s is listed in %s but no longer loads", n, listPath)
		}
	}
	added := 0
	for n := range got {
		if !want[n] {
			added++
			t.Logf("%s loads and is not in %s yet (run with -update to add it)", n, listPath)
		}
	}
	t.Logf("%d files expected to load (%s), %d more load now", len(want), listPath, added)
}

func TestConformanceCorpus(t *testing.T) {
	root := corpusDir(t)
	checkExpected(t, root, filepath.Join("testdata", "corpus-loads.txt"), checkConformance(t, corpusFiles(t, root)))
}

func TestConformanceTestdata(t *testing.T) {
	root := filepath.Join("testdata", "corpus")
	checkExpected(t, root, filepath.Join("testdata", "testdata-loads.txt"), checkConformance(t, corpusFiles(t, root)))
}

package translate

import (
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/devtool/devtool/internal/compose"
)

// corpusDir is the shared Compose corpus beside the clone (../shared from the repo root), or
// DEVTOOL_COMPOSE_CORPUS. Missing: the corpus tests skip (fail under CI).
func corpusDir(t testing.TB) string {
	t.Helper()
	dir := os.Getenv("DEVTOOL_COMPOSE_CORPUS")
	if dir == "" {
		dir = filepath.Join("..", "..", "..", "shared", "corpus", "compose")
	}
	if _, err := os.Stat(dir); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("compose corpus missing in CI: %v", err)
		}
		t.Skipf("compose corpus not found at %s (set DEVTOOL_COMPOSE_CORPUS)", dir)
	}
	return dir
}

// loadCorpus loads every Compose file of the corpus that the loader accepts (kompose's
// Kubernetes outputs, named output-*, are not Compose files).
func loadCorpus(t testing.TB) map[string]*compose.Project {
	root := corpusDir(t)
	out := map[string]*compose.Project{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || strings.HasPrefix(d.Name(), "output-") {
			return nil
		}
		if ext := filepath.Ext(p); ext != ".yaml" && ext != ".yml" {
			return nil
		}
		proj, err := compose.Load(compose.LoadOptions{File: p, Environ: map[string]string{}, HomeDir: "/home/test"})
		if err == nil {
			rel, _ := filepath.Rel(root, p)
			out[rel] = proj
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// corpusRefusals are the loadable corpus files translation refuses, with the reason. Anything
// else refused fails the test.
var corpusRefusals = map[string]string{
	// compose-go's test of non-string keys names a service "123": a Kubernetes Service name must
	// start with a letter (DNS-1035), which the loader does not check.
	"compose-go/loader-inline-tests/loader_test__TestNonStringKeys.yaml": `service name "123" is not valid for Kubernetes`,
}

// corpusTranslates is the checked-in list of corpus files that load and translate: a listed
// file that stops translating fails TestCorpus, so the count can only rise (-update adds the
// new ones).
const corpusTranslates = "testdata/corpus-translates.txt"

// TestCorpus translates every loadable file of the shared corpus and renders it as YAML.
func TestCorpus(t *testing.T) {
	projects := loadCorpus(t)
	ok, refused := 0, 0
	translated := map[string]bool{}
	for name, p := range projects {
		res, err := Translate(p, defaultOpts)
		if err != nil {
			refused++
			if want, known := corpusRefusals[name]; !known || !strings.Contains(err.Error(), want) {
				t.Errorf("%s: %v", name, err)
			}
			continue
		}
		if _, err := ToYAML(res.Objects); err != nil {
			t.Errorf("%s: ToYAML: %v", name, err)
			continue
		}
		translated[filepath.ToSlash(name)] = true
		ok++
	}
	t.Logf("%d loadable files: %d translated, %d refused", len(projects), ok, refused)
	names := slices.Sorted(maps.Keys(translated))
	if *update {
		if err := os.WriteFile(corpusTranslates, []byte(strings.Join(names, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	data, err := os.ReadFile(corpusTranslates)
	if err != nil {
		t.Fatalf("%v (run go test ./internal/translate -run TestCorpus -update to create it)", err)
	}
	listed := 0
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if line = strings.TrimSpace(line); line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		listed++
		if !translated[line] {
			t.Errorf("%s is listed in %s but no longer loads and translates", line, corpusTranslates)
		}
	}
	t.Logf("%d files expected to translate, %d translate now", listed, len(names))
}

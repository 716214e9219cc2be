package translate

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/devtool/devtool/internal/compose"
)

// corpusFiles lists the corpus's Compose files (kompose's Kubernetes outputs left out).
func corpusFiles(b *testing.B) [][2]string {
	root := corpusDir(b)
	var files [][2]string
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasPrefix(d.Name(), "output-") {
			return nil
		}
		if ext := filepath.Ext(p); ext == ".yaml" || ext == ".yml" {
			data, err := os.ReadFile(p)
			if err == nil {
				files = append(files, [2]string{p, string(data)})
			}
		}
		return nil
	})
	return files
}

// BenchmarkCorpus loads and translates every file of the shared corpus (what `deploy --dry-run`
// does, less the writing), and measures in the same run the floor: decoding the same bytes into
// yaml.v3 nodes, which every YAML-based loader must do. The ratio says what validation,
// interpolation and translation cost on top of parsing.
//
//	go test -run '^$' -bench Corpus ./internal/translate/
func BenchmarkCorpus(b *testing.B) {
	files := corpusFiles(b)
	b.Run("yaml-decode", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			for _, f := range files {
				var n yaml.Node
				_ = yaml.Unmarshal([]byte(f[1]), &n)
			}
		}
		b.ReportMetric(float64(len(files)), "files/op")
	})
	b.Run("load+translate", func(b *testing.B) {
		translated := 0
		for i := 0; i < b.N; i++ {
			translated = 0
			for _, f := range files {
				p, err := compose.LoadBytes(compose.LoadOptions{File: f[0], Environ: map[string]string{}, HomeDir: "/home/test"}, []byte(f[1]))
				if err != nil {
					continue
				}
				if res, err := Translate(p, Options{Name: "bench", Namespace: "bench", ClusterDomain: "example.test"}); err == nil {
					if _, err := ToYAML(res.Objects); err == nil {
						translated++
					}
				}
			}
		}
		b.ReportMetric(float64(len(files)), "files/op")
		b.ReportMetric(float64(translated), "translated/op")
	})
}

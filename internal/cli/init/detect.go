package initcmd

import (
	"bufio"
	"bytes"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/devtool/devtool/internal/compose"
	"github.com/devtool/devtool/internal/deploy"
	"github.com/devtool/devtool/internal/safefile"
)

// Guesses is what init found in a folder. Paths are relative to the folder, with forward slashes.
type Guesses struct {
	Compose   string       // a Compose file ("" when none)
	Builds    []BuildGuess // Dockerfiles (only when there is no Compose file: Compose builds its own)
	Manifests []string     // folders of plain Kubernetes manifests
	Charts    []ChartGuess // Helm charts
}

// BuildGuess is one Dockerfile.
type BuildGuess struct {
	Service    string
	Context    string
	Dockerfile string // "" for the default "Dockerfile"
}

// ChartGuess is one Helm chart.
type ChartGuess struct {
	Release string
	Dir     string
}

// Commands are the deploy commands the guesses make, in order: manifests, then charts.
func (g *Guesses) Commands() []string {
	var out []string
	for _, d := range g.Manifests {
		out = append(out, "kubectl apply -f "+d)
	}
	for _, c := range g.Charts {
		out = append(out, "helm upgrade --install "+c.Release+" "+c.Dir)
	}
	return out
}

// Empty reports whether nothing deployable was found.
func (g *Guesses) Empty() bool {
	return g.Compose == "" && len(g.Builds) == 0 && len(g.Manifests) == 0 && len(g.Charts) == 0
}

// maxDepth bounds how deep Detect looks (the folder itself is depth 0).
const maxDepth = 3

// skipDirs are never searched.
// maxScannedBytes caps each file init reads while scanning (YAML manifests, Chart.yaml).
const maxScannedBytes = 4 << 20

var skipDirs = map[string]bool{".git": true, "node_modules": true, "vendor": true, ".devtool": true, "testdata": true, ".venv": true, "target": true}

// Detect looks at dir and guesses what a manifest should hold. name names the project (a
// Dockerfile at the root builds the service of that name).
// It stops with ctx's error when ctx ends (the walk checks it at every entry).
func Detect(ctx context.Context, dir, name string) (*Guesses, error) {
	g := &Guesses{}
	if f, err := compose.FindFile(dir); err == nil {
		g.Compose = filepath.Base(f)
	}
	var charts []string
	yamlDirs := map[string]bool{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		if err != nil {
			if path == dir {
				return err
			}
			return nil // unreadable entries are skipped
		}
		rel, _ := filepath.Rel(dir, path)
		rel = filepath.ToSlash(rel)
		depth := strings.Count(rel, "/") + 1
		if rel == "." {
			depth = 0
		}
		if d.IsDir() {
			if path != dir && (skipDirs[d.Name()] || depth > maxDepth) {
				return filepath.SkipDir
			}
			// Inside a chart everything belongs to the chart.
			for _, c := range charts {
				if c != "." && strings.HasPrefix(rel+"/", c+"/") {
					return filepath.SkipDir
				}
			}
			if isFile(filepath.Join(path, "Chart.yaml")) {
				charts = append(charts, rel)
				g.Charts = append(g.Charts, ChartGuess{Release: chartName(path, name, rel), Dir: chartArg(rel)})
				return filepath.SkipDir
			}
			return nil
		}
		base := d.Name()
		switch {
		case isDockerfile(base):
			g.Builds = append(g.Builds, buildGuess(rel, name))
		case depth >= 1 && (strings.HasSuffix(base, ".yaml") || strings.HasSuffix(base, ".yml")) && isKubernetesYAML(path):
			// Top-level YAML files are the manifest, Compose files and CI: only folders count.
			if depth > 1 {
				yamlDirs[filepath.ToSlash(filepath.Dir(rel))] = true
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for d := range yamlDirs {
		// A folder inside another manifests folder is applied with it (kubectl apply -f only reads one level; keep both).
		g.Manifests = append(g.Manifests, d)
	}
	slices.Sort(g.Manifests)
	if g.Compose != "" {
		g.Builds = nil
	}
	uniqueServices(g.Builds)
	return g, nil
}

func isFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

func isDockerfile(base string) bool {
	return base == "Dockerfile" || strings.HasPrefix(base, "Dockerfile.") || strings.HasSuffix(base, ".Dockerfile") || strings.HasSuffix(base, ".dockerfile")
}

// buildGuess names the service after the Dockerfile's folder (the project for the root), with
// the Dockerfile's variant for Dockerfile.<x> or <x>.Dockerfile.
func buildGuess(rel, project string) BuildGuess {
	dir, base := filepath.Dir(rel), filepath.Base(rel)
	service := project
	if dir != "." {
		service = filepath.Base(dir)
	}
	b := BuildGuess{Context: dir}
	if base != "Dockerfile" {
		b.Dockerfile = base
		variant := strings.TrimSuffix(strings.TrimSuffix(strings.TrimPrefix(base, "Dockerfile."), ".Dockerfile"), ".dockerfile")
		if variant != "" && variant != base {
			service += "-" + variant
		}
	}
	b.Service = deploy.SanitizeName(service)
	if b.Service == "" {
		b.Service = "app"
	}
	return b
}

// uniqueServices suffixes repeated service names with -2, -3, ...
func uniqueServices(bs []BuildGuess) {
	seen := map[string]int{}
	for i := range bs {
		seen[bs[i].Service]++
		if n := seen[bs[i].Service]; n > 1 {
			bs[i].Service = deploy.SanitizeName(bs[i].Service + "-" + string(rune('0'+min(n, 9))))
		}
	}
}

// isKubernetesYAML reports whether a file holds at least one document with apiVersion and kind
// at the top level (plain manifests; Helm templates are never searched).
func isKubernetesYAML(path string) bool {
	data, err := safefile.Read(path, maxScannedBytes) // FIFOs, devices and huge files are not manifests
	if err != nil || bytes.Contains(data, []byte("{{")) {
		return false
	}
	var api, kind bool
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64*1024), 4<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "---":
			if api && kind {
				return true
			}
			api, kind = false, false
		case strings.HasPrefix(line, "apiVersion:"):
			api = true
		case strings.HasPrefix(line, "kind:"):
			kind = true
		}
	}
	return api && kind
}

// chartName is the release name: the chart's name, else its folder's (the project's for the root).
func chartName(dir, project, rel string) string {
	var c struct {
		Name string `yaml:"name"`
	}
	if data, err := safefile.Read(filepath.Join(dir, "Chart.yaml"), maxScannedBytes); err == nil {
		_ = yaml.Unmarshal(data, &c)
	}
	for _, n := range []string{c.Name, filepath.Base(rel), project} {
		if rel == "." && n == "." {
			continue
		}
		if s := deploy.SanitizeName(n); s != "" {
			return s
		}
	}
	return "app"
}

func chartArg(rel string) string {
	if rel == "." {
		return "."
	}
	return "./" + rel
}

package manifest

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/devtool/devtool/internal/compose"
	"github.com/devtool/devtool/internal/safefile"
	"github.com/devtool/devtool/internal/yamlsrc"
)

// LoadOptions say where to look and where variables come from (as compose.LoadOptions).
type LoadOptions struct {
	// Dir is the folder to search and to resolve a relative File against (the working directory).
	Dir string
	// File is --file: a devtool.yml, or a Compose file. "" searches Dir (see Find).
	File string
	// Environ is the shell environment; nothing reads os.Environ behind the caller's back.
	Environ map[string]string
	// Lookups are further variable sources asked after the shell and the .env file, in order
	// (for example the platform's stored secrets).
	Lookups []yamlsrc.Lookup
	// HomeDir expands "~" in local paths. Empty: Environ["HOME"], then the user's home.
	HomeDir string
}

// DefaultFileNames are the manifest names Find looks for in a folder, in order.
var DefaultFileNames = []string{"devtool.yml", "devtool.yaml", ".devtool/devtool.yml", ".devtool/devtool.yaml"}

// maxFileSize bounds what a manifest may hold; a bigger one is a mistake (or a device).
const maxFileSize = safefile.DefaultMax

// NotFoundError says no manifest was found, and every path searched.
type NotFoundError struct {
	Dir      string
	Searched []string
}

func (e *NotFoundError) Error() string {
	return fmt.Sprintf("no devtool manifest or Compose file in %s (searched %s)", e.Dir, strings.Join(e.Searched, ", "))
}

// Find returns the manifest to load: file (relative to dir) when given; else the first of
// DefaultFileNames in dir; else a Compose file in dir (compose.DefaultFileNames), in which case
// isCompose is true. Nothing found is a *NotFoundError listing every path searched.
func Find(dir, file string) (path string, isCompose bool, err error) {
	if file != "" {
		if !filepath.IsAbs(file) {
			file = filepath.Join(dir, file)
		}
		st, err := os.Stat(file)
		if err != nil {
			return "", false, fmt.Errorf("manifest %s: %w", file, yamlsrc.UnwrapPathError(err))
		}
		if st.IsDir() {
			return "", false, fmt.Errorf("manifest %s is a folder, not a file", file)
		}
		return file, false, nil
	}
	var searched []string
	for _, group := range []struct {
		names   []string
		compose bool
	}{{DefaultFileNames, false}, {compose.DefaultFileNames, true}} {
		for _, name := range group.names {
			p := filepath.Join(dir, name)
			searched = append(searched, p)
			st, err := os.Stat(p)
			if err == nil && !st.IsDir() {
				return p, group.compose, nil
			}
			if err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, fs.ErrPermission) {
				return "", false, fmt.Errorf("looking for a manifest: %w", err)
			}
		}
	}
	return "", false, &NotFoundError{Dir: dir, Searched: searched}
}

// Load finds and loads the manifest. On invalid input it returns Errors listing every problem,
// each with file:line:column, in file order.
func Load(opts LoadOptions) (*Manifest, error) {
	path, isCompose, err := Find(opts.Dir, opts.File)
	if err != nil {
		return nil, err
	}
	if isCompose {
		return fromCompose(opts, path)
	}
	data, err := readRegularFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading manifest %s: %w", path, err)
	}
	if looksLikeCompose(data) || (isEmptyYAML(data) && isComposeName(path)) {
		return fromCompose(opts, path)
	}
	opts.File = path
	return LoadBytes(opts, data)
}

// LoadBytes parses a manifest whose content is already read; opts.File names it (for errors)
// and locates its folder, relative paths and the .env file. It never treats data as Compose.
func LoadBytes(opts LoadOptions, data []byte) (*Manifest, error) {
	file := opts.File
	if file != "" && !filepath.IsAbs(file) && opts.Dir != "" {
		file = filepath.Join(opts.Dir, file)
	}
	abs, err := filepath.Abs(file)
	if err != nil {
		return nil, fmt.Errorf("manifest path: %w", err)
	}
	p := &parser{Reader: yamlsrc.NewReader(abs), dir: ProjectDir(abs), home: yamlsrc.HomeDir(opts.HomeDir, opts.Environ)}
	p.StrictNames = true
	shell := yamlsrc.MapLookup(opts.Environ)
	m := &Manifest{File: abs, Dir: p.dir, Raw: data}
	// .env beside the manifest (in the project folder); its values may refer to shell variables.
	dotEnv := filepath.Join(p.dir, ".env")
	m.DotEnv = p.ReadDotEnv(dotEnv, dotEnv, maxFileSize, shell)
	sources := []yamlsrc.Lookup{shell, yamlsrc.MapLookup(m.DotEnv)}
	p.Lookup = yamlsrc.ChainLookups(append(sources, opts.Lookups...)...)

	doc, ok := p.Parse(data)
	if !ok {
		return nil, Errors(p.Errs)
	}
	p.Interpolate(doc, "", commandNodes(doc))
	p.manifest(doc, m)
	if len(p.Errs) > 0 {
		yamlsrc.SortErrors(p.Errs)
		return nil, Errors(p.Errs)
	}
	m.Warnings = p.Warnings()
	return m, nil
}

// ProjectDir is the folder a manifest's commands run in and its relative paths (and .env) are
// resolved against: the manifest's folder, or for a manifest under .devtool/ the folder above.
func ProjectDir(manifestFile string) string {
	dir := filepath.Dir(manifestFile)
	if filepath.Base(dir) == ".devtool" {
		return filepath.Dir(dir)
	}
	return dir
}

// fromCompose makes the manifest a Compose file stands for: deploy.compose is that file. The
// Compose file is loaded, so a broken one fails here with its own positioned errors.
func fromCompose(opts LoadOptions, path string) (*Manifest, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	files := []string{abs}
	var merge []string
	if o := compose.OverrideFile(abs); o != "" {
		files, merge = append(files, o), []string{o}
	}
	proj, err := compose.Load(compose.LoadOptions{Files: files, Environ: opts.Environ, Lookups: opts.Lookups, HomeDir: opts.HomeDir})
	if err != nil {
		return nil, err
	}
	m := &Manifest{File: abs, Dir: filepath.Dir(abs), Inferred: true, Name: proj.Name,
		Deploy: Deploy{Compose: []ComposeFile{{File: abs, Merge: merge, Pos: yamlsrc.Position{File: abs}}}}}
	m.Build = BuildSections(proj)
	return m, nil
}

// BuildSections lists the services of a Compose project that have a build section, in file
// order: the build section of the manifest a Compose file stands for.
func BuildSections(p *compose.Project) []*BuildService {
	var out []*BuildService
	for _, s := range p.Services {
		if s.Build != nil {
			out = append(out, &BuildService{Service: s.Name, Image: s.Image, Build: s.Build, Pos: s.Pos})
		}
	}
	return out
}

// isComposeName tells whether a file is named like a Compose file (compose.yaml,
// docker-compose.override.yml, ...), so an empty one is reported as an empty Compose file.
func isComposeName(path string) bool {
	base := strings.ToLower(filepath.Base(path))
	return strings.Contains(base, "compose") && !strings.HasPrefix(base, "devtool")
}

// isEmptyYAML tells whether data holds no YAML value (nothing, comments, or null).
func isEmptyYAML(data []byte) bool {
	var v any
	return yaml.Unmarshal(data, &v) == nil && v == nil
}

// manifestKeys are the top-level keys of a devtool manifest that a Compose file never has.
var manifestKeys = []string{"build", "deploy", "destroy", "dependencies", "dev"}

// looksLikeCompose tells a Compose file given with --file from a manifest: it has a top-level
// services key and none of the manifest's own sections.
func looksLikeCompose(data []byte) bool {
	var top map[string]yaml.Node
	if yaml.Unmarshal(data, &top) != nil {
		return false
	}
	if _, ok := top["services"]; !ok {
		return false
	}
	for _, k := range manifestKeys {
		if _, ok := top[k]; ok {
			return false
		}
	}
	return true
}

// Errors is every problem found in one load, in file order.
type Errors []*yamlsrc.Error

func (es Errors) Error() string { return yamlsrc.FormatErrors("manifest", es) }

// Unwrap lets errors.As find each *yamlsrc.Error (compose.Error is the same type).
func (es Errors) Unwrap() []error { return yamlsrc.UnwrapErrors(es) }

// parser holds the state of one load. Its Reader names the file by its absolute path and
// refuses blank names in NAME=value lists.
type parser struct {
	*yamlsrc.Reader
	dir  string
	home string
}

// absPath makes a local path from the manifest absolute: relative to its folder, ~ to home.
func (p *parser) absPath(s string) string {
	return yamlsrc.AbsPath(s, p.dir, p.home)
}

// readRegularFile reads a manifest or .env file: a regular file of at most maxFileSize bytes.
func readRegularFile(path string) ([]byte, error) {
	return safefile.Read(path, maxFileSize)
}

// requiredStr reads a non-empty string.
func (p *parser) requiredStr(n *yaml.Node, field string) (string, bool) {
	s, ok := p.Str(n, field)
	if ok && strings.TrimSpace(s) == "" {
		p.Errorf(n, field, "expected a non-empty string")
		return "", false
	}
	return s, ok
}

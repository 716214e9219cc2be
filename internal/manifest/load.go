package manifest

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/compose-spec/compose-go/v2/dotenv"
	"gopkg.in/yaml.v3"

	"github.com/devtool/devtool/internal/compose"
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
	Lookups []compose.Lookup
	// HomeDir expands "~" in local paths. Empty: Environ["HOME"], then the user's home.
	HomeDir string
}

// DefaultFileNames are the manifest names Find looks for in a folder, in order.
var DefaultFileNames = []string{"devtool.yml", "devtool.yaml", ".devtool/devtool.yml", ".devtool/devtool.yaml"}

// maxFileSize bounds what a manifest may hold; a bigger one is a mistake (or a device).
const maxFileSize = 8 << 20

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
			return "", false, fmt.Errorf("manifest %s: %w", file, unwrapPathError(err))
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
	if looksLikeCompose(data) {
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
	p := &parser{file: abs, dir: ProjectDir(abs), home: homeDir(opts), merged: map[*yaml.Node][]entry{}, unsetSeen: map[string]bool{}}
	shell := mapLookup(opts.Environ)
	m := &Manifest{File: abs, Dir: p.dir, Raw: data}
	m.DotEnv = p.readDotEnv(shell)
	sources := []compose.Lookup{shell, mapLookup(m.DotEnv)}
	p.lookup = chain(append(sources, opts.Lookups...)...)

	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, Errors{p.yamlError(err)}
	}
	p.interpolate(&doc, "", commandNodes(&doc))
	p.manifest(&doc, m)
	if len(p.errs) > 0 {
		slices.SortStableFunc(p.errs, func(a, b *compose.Error) int { return comparePos(a.Pos, b.Pos) })
		return nil, p.errs
	}
	m.Warnings = p.finalWarnings()
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
	proj, err := compose.Load(compose.LoadOptions{File: abs, Environ: opts.Environ, Lookups: opts.Lookups, HomeDir: opts.HomeDir})
	if err != nil {
		return nil, err
	}
	m := &Manifest{File: abs, Dir: filepath.Dir(abs), Inferred: true, Name: proj.Name,
		Deploy: Deploy{Compose: []ComposeFile{{File: abs, Pos: compose.Position{File: abs}}}}}
	for _, s := range proj.Services {
		if s.Build != nil {
			m.Build = append(m.Build, &BuildService{Service: s.Name, Image: s.Image, Build: s.Build, Pos: s.Pos})
		}
	}
	return m, nil
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
type Errors []*compose.Error

func (es Errors) Error() string {
	if len(es) == 1 {
		return es[0].Error()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d problems in the manifest:", len(es))
	for _, e := range es {
		b.WriteString("\n  ")
		b.WriteString(e.Error())
	}
	return b.String()
}

// Unwrap lets errors.As find each *compose.Error.
func (es Errors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

// parser holds the state of one load.
type parser struct {
	file   string // absolute path, for messages
	dir    string
	home   string
	lookup compose.Lookup

	errs      Errors
	warnings  []string
	ignored   []ignoredField
	merged    map[*yaml.Node][]entry
	unset     []string
	unsetSeen map[string]bool
}

type ignoredField struct {
	field string
	pos   compose.Position
}

func (p *parser) ignore(n *yaml.Node, field string) {
	p.ignored = append(p.ignored, ignoredField{field: field, pos: p.pos(n)})
}

func (p *parser) finalWarnings() []string {
	var out []string
	for _, name := range p.unset {
		out = append(out, fmt.Sprintf("the %q variable is not set; using an empty string", name))
	}
	if len(p.ignored) > 0 {
		slices.SortStableFunc(p.ignored, func(a, b ignoredField) int { return comparePos(a.pos, b.pos) })
		parts := make([]string, len(p.ignored))
		for i, f := range p.ignored {
			parts[i] = fmt.Sprintf("%s (%s)", f.field, f.pos)
		}
		out = append(out, "ignored fields not supported by devtool: "+strings.Join(parts, ", "))
	}
	return append(out, p.warnings...)
}

func comparePos(a, b compose.Position) int {
	switch {
	case a.File != b.File:
		return strings.Compare(a.File, b.File)
	case a.Line != b.Line:
		return a.Line - b.Line
	default:
		return a.Column - b.Column
	}
}

// yamlError turns a yaml.v3 syntax error ("yaml: line 3: ...") into a positioned error.
func (p *parser) yamlError(err error) *compose.Error {
	pos := compose.Position{File: p.file}
	rest := strings.TrimPrefix(err.Error(), "yaml: ")
	var line int
	if n, _ := fmt.Sscanf(rest, "line %d:", &line); n == 1 {
		pos.Line, pos.Column = line, 1
		if i := strings.Index(rest, ":"); i >= 0 {
			rest = strings.TrimSpace(rest[i+1:])
		}
	}
	return &compose.Error{Pos: pos, Msg: "invalid YAML: " + rest}
}

func homeDir(opts LoadOptions) string {
	if opts.HomeDir != "" {
		return opts.HomeDir
	}
	if h := opts.Environ["HOME"]; h != "" {
		return h
	}
	h, _ := os.UserHomeDir()
	return h
}

// absPath makes a local path from the manifest absolute: relative to its folder, ~ to home.
func (p *parser) absPath(s string) string {
	switch {
	case s == "~" || strings.HasPrefix(s, "~/"):
		return filepath.Join(p.home, s[1:])
	case filepath.IsAbs(s):
		return filepath.Clean(s)
	default:
		return filepath.Join(p.dir, s)
	}
}

func mapLookup(m map[string]string) compose.Lookup {
	return func(name string) (string, bool) {
		v, ok := m[name]
		return v, ok
	}
}

func chain(sources ...compose.Lookup) compose.Lookup {
	return func(name string) (string, bool) {
		for _, src := range sources {
			if src == nil {
				continue
			}
			if v, ok := src(name); ok {
				return v, true
			}
		}
		return "", false
	}
}

// readDotEnv reads .env beside the manifest; a missing file is not an error. Its values may
// refer to shell variables (compose-go's dotenv expands them), as in Compose.
func (p *parser) readDotEnv(shell compose.Lookup) map[string]string {
	path := filepath.Join(p.dir, ".env")
	data, err := readRegularFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		p.errs = append(p.errs, &compose.Error{Pos: compose.Position{File: path}, Msg: "cannot read the .env file: " + err.Error()})
		return nil
	}
	vars, err := dotenv.ParseWithLookup(bytes.NewReader(data), dotenv.LookupFn(shell))
	if err != nil {
		p.errs = append(p.errs, &compose.Error{Pos: compose.Position{File: path}, Msg: "invalid .env file: " + err.Error()})
		return nil
	}
	return vars
}

func readRegularFile(path string) ([]byte, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, errors.New("not a regular file")
	}
	if st.Size() > maxFileSize {
		return nil, fmt.Errorf("larger than %d bytes", maxFileSize)
	}
	return os.ReadFile(path)
}

func unwrapPathError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

package compose

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// LoadOptions says what to load and where variables come from.
type LoadOptions struct {
	// File is the path of the compose file. Errors name it as given here.
	File string
	// Environ is the shell environment (name to value). Tests pass a map; nothing reads
	// os.Environ behind the caller's back.
	Environ map[string]string
	// Lookups are further variable sources asked after the shell and the .env file, in order
	// (for example the platform's stored secrets).
	Lookups []Lookup
	// HomeDir expands "~" in host paths. Empty: Environ["HOME"], then the user's home.
	HomeDir string
}

// DefaultFileNames are the names FindFile looks for, in order.
var DefaultFileNames = []string{"compose.yaml", "compose.yml", "docker-compose.yaml", "docker-compose.yml"}

// FindFile returns the first of DefaultFileNames that exists in dir.
func FindFile(dir string) (string, error) {
	for _, name := range DefaultFileNames {
		p := filepath.Join(dir, name)
		st, err := os.Stat(p)
		if err == nil && !st.IsDir() {
			return p, nil
		}
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("looking for a compose file: %w", err)
		}
	}
	return "", fmt.Errorf("no compose file in %s (looked for %s)", dir, strings.Join(DefaultFileNames, ", "))
}

// loader holds the state of one Load call.
type loader struct {
	file   string // as given by the caller, for messages
	dir    string // absolute folder of the file
	home   string
	lookup Lookup

	errs      Errors
	warnings  []string
	ignored   []ignoredField
	merged    map[*yaml.Node][]entry
	unset     []string
	unsetSeen map[string]bool
	// optionalDeps holds depends_on entries with required: false, by field then service.
	optionalDeps map[string]map[string]bool
}

// Load reads, interpolates and validates a Compose file. On invalid input it returns an
// Errors value listing every problem found, each with file:line:column.
func Load(opts LoadOptions) (*Project, error) {
	if opts.File == "" {
		return nil, errors.New("no compose file given")
	}
	data, err := os.ReadFile(opts.File)
	if err != nil {
		return nil, fmt.Errorf("reading compose file: %w", err)
	}
	return LoadBytes(opts, data)
}

// LoadBytes is Load with the file's content already read; opts.File still names the file and
// locates relative paths and the .env file.
func LoadBytes(opts LoadOptions, data []byte) (*Project, error) {
	abs, err := filepath.Abs(opts.File)
	if err != nil {
		return nil, fmt.Errorf("compose file path: %w", err)
	}
	l := &loader{
		file:      opts.File,
		dir:       filepath.Dir(abs),
		home:      homeDir(opts),
		merged:    map[*yaml.Node][]entry{},
		unsetSeen: map[string]bool{},

		optionalDeps: map[string]map[string]bool{},
	}
	shell := mapLookup(opts.Environ)
	sources := []Lookup{shell, l.readDotEnv(shell)}
	sources = append(sources, opts.Lookups...)
	l.lookup = chainLookups(sources...)

	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, Errors{l.yamlError(err)}
	}
	l.interpolate(&doc, "")
	p := &Project{File: abs, WorkingDir: l.dir}
	l.project(&doc, p)
	if len(l.errs) > 0 {
		// In file order, so a user can fix them top to bottom.
		slices.SortStableFunc(l.errs, func(a, b *Error) int { return comparePos(a.Pos, b.Pos) })
		return nil, l.errs
	}
	p.Warnings = l.finalWarnings()
	return p, nil
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

// yamlError turns a yaml.v3 syntax error ("yaml: line 3: ...") into a positioned Error.
func (l *loader) yamlError(err error) *Error {
	msg := err.Error()
	pos := Position{File: l.file}
	rest := strings.TrimPrefix(msg, "yaml: ")
	var line int
	if n, _ := fmt.Sscanf(rest, "line %d:", &line); n == 1 {
		pos.Line, pos.Column = line, 1
		if i := strings.Index(rest, ":"); i >= 0 {
			rest = strings.TrimSpace(rest[i+1:])
		}
	}
	return &Error{Pos: pos, Msg: "invalid YAML: " + rest}
}

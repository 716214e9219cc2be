package compose

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/devtool/devtool/internal/safefile"
	"github.com/devtool/devtool/internal/yamlsrc"
)

// MaxFileSize caps a Compose file (and each file it includes or extends).
const MaxFileSize = safefile.DefaultMax

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
	// Files are several Compose files merged in order (Compose's -f repeated; the second
	// is typically compose.override.yaml, see FindFiles). When set, File is Files[0].
	Files []string
	// HomeDir expands "~" in host paths. Empty: Environ["HOME"], then the user's home.
	HomeDir string
	// Context cancels a load (Ctrl-C while a big file loads): Load then returns its error
	// (context.Canceled). nil: never cancelled.
	Context context.Context
	// Logger receives debug lines (the files read). nil discards them. compose-go's own
	// logging (logrus) is never used: its messages become Warnings.
	Logger *slog.Logger
	// AllowOutside lets env files lie outside the project folder (the compose file's folder,
	// symlinks followed): the user's --allow-outside-volumes. Without it they are an error.
	AllowOutside bool
	// ProjectDir is the project folder for that rule; "" is the (first) compose file's folder.
	// A devtool.yml's deploy.compose files belong to the manifest's folder.
	ProjectDir string
}

func (o LoadOptions) logger() *slog.Logger {
	if o.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return o.Logger
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

// cancelled is the load's context error, if it was cancelled.
func (l *loader) cancelled() error {
	if l.opts.Context == nil {
		return nil
	}
	return l.opts.Context.Err()
}

// overrideNames pairs each default file name with the override files Docker Compose merges
// automatically when they sit beside it.
var overrideNames = map[string][]string{
	"compose.yaml":        {"compose.override.yaml", "compose.override.yml"},
	"compose.yml":         {"compose.override.yml", "compose.override.yaml"},
	"docker-compose.yaml": {"docker-compose.override.yaml", "docker-compose.override.yml"},
	"docker-compose.yml":  {"docker-compose.override.yml", "docker-compose.override.yaml"},
}

// FindFiles is FindFile plus the override file beside it, as Docker Compose discovers them:
// compose.yaml and compose.override.yaml (or the docker-compose.* names), to load with
// LoadOptions.Files in that order.
func FindFiles(dir string) ([]string, error) {
	main, err := FindFile(dir)
	if err != nil {
		return nil, err
	}
	files := []string{main}
	for _, name := range overrideNames[filepath.Base(main)] {
		p := filepath.Join(dir, name)
		st, err := os.Stat(p)
		if err == nil && !st.IsDir() {
			return append(files, p), nil
		}
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("looking for a compose override file: %w", err)
		}
	}
	return files, nil
}

// OverrideFile returns the override file Docker Compose would merge into file (a default
// name such as compose.yaml), or "" when there is none.
func OverrideFile(file string) string {
	for _, name := range overrideNames[filepath.Base(file)] {
		p := filepath.Join(filepath.Dir(file), name)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			return p
		}
	}
	return ""
}

// loader holds the state of one Load call. Its Reader names the file as the caller gave it,
// for messages.
type loader struct {
	*yamlsrc.Reader
	dir  string // absolute folder of the file
	home string

	// optionalDeps holds depends_on entries with required: false, by field then service.
	optionalDeps map[string]map[string]bool
	// renames are the service and volume names converted for Kubernetes (see kubeName).
	renames []rename
	opts    LoadOptions
	shell   Lookup
	// dirs is the absolute folder of each file read (by the name positions use), for
	// relative paths written in it; loaded is every file read (absolute), for cycles.
	dirs      map[string]string
	loaded    map[string]bool
	including map[string]bool // files whose includes are being read, for cycles
	readErr   error           // why the last readFile with a node could not read its file

	// systemMounts are the host volumes dropped because they name a system path of the Docker
	// host (projectpath.IsSystemPath), for the one warning that names them all.
	systemMounts []string

	// failedObjects are the top-level secrets and configs ("secret/name") whose definition
	// has an error, so services using them are not reported again.
	failedObjects map[string]bool
}

// Load reads, interpolates and validates a Compose file, or several (opts.Files) merged in
// order. On invalid input it returns an Errors value listing every problem found, each with
// file:line:column of the file that set the value.
func Load(opts LoadOptions) (*Project, error) {
	if len(opts.Files) > 0 {
		opts.File = opts.Files[0]
	}
	if opts.File == "" {
		return nil, errors.New("no compose file given")
	}
	data, err := safefile.Read(opts.File, MaxFileSize)
	if err != nil {
		return nil, fmt.Errorf("reading compose file: %w", err)
	}
	return LoadBytes(opts, data)
}

// LoadBytes is Load with the (first) file's content already read; opts.File (or Files[0])
// still names the file and locates relative paths and the .env file. Further files of
// opts.Files, extended and included files are read from disk.
func LoadBytes(opts LoadOptions, data []byte) (*Project, error) {
	if len(opts.Files) > 0 {
		opts.File = opts.Files[0]
	}
	abs, err := filepath.Abs(opts.File)
	if err != nil {
		return nil, fmt.Errorf("compose file path: %w", err)
	}
	l := &loader{
		Reader: yamlsrc.NewReader(opts.File),
		dir:    filepath.Dir(abs),
		home:   yamlsrc.HomeDir(opts.HomeDir, opts.Environ),
		dirs:   map[string]string{},
		opts:   opts,

		optionalDeps: map[string]map[string]bool{},
	}
	l.dirs[opts.File] = l.dir
	shell := yamlsrc.MapLookup(opts.Environ)
	l.shell = shell
	sources := []Lookup{shell, l.readDotEnv(shell)}
	sources = append(sources, opts.Lookups...)
	// Spec precedence (A6): shell, then .env, then stored platform secrets.
	l.Lookup = yamlsrc.ChainLookups(sources...)

	doc, ok := l.Parse(data)
	if !ok {
		return nil, Errors(l.Errs)
	}
	l.Interpolate(doc, "", nil)
	p := &Project{File: abs, WorkingDir: l.dir, Files: []string{abs}}
	l.loaded = map[string]bool{abs: true}
	doc = l.includes(doc, opts.File, 0)
	for _, f := range opts.Files[min(1, len(opts.Files)):] {
		if l.cancelled() != nil {
			break
		}
		other, fabs, ok := l.readFile(f, opts.File, nil)
		if !ok {
			continue
		}
		// As in Docker Compose, relative paths in every -f file resolve against the first
		// file's folder (extended and included files keep their own).
		l.dirs[f] = l.dir
		p.Files = append(p.Files, fabs)
		other = l.includes(other, f, 0)
		doc = l.merge(doc, other, "", 0)
	}
	if err := l.cancelled(); err != nil {
		return nil, err
	}
	doc = l.extends(doc)
	if len(l.Errs) == 0 {
		l.project(doc, p)
	}
	if err := l.cancelled(); err != nil {
		return nil, err
	}
	if len(l.Errs) > 0 {
		// In file order, so a user can fix them top to bottom.
		yamlsrc.SortErrors(l.Errs)
		return nil, Errors(l.Errs)
	}
	if len(l.systemMounts) > 0 {
		l.Warnf("%s", systemMountsWarning(l.systemMounts))
	}
	p.Warnings = l.Warnings()
	opts.logger().Debug("compose file loaded", "file", opts.File, "services", len(p.Services), "warnings", len(p.Warnings))
	return p, nil
}

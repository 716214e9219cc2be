// Package environment answers "which environment is this" once for every command: given the
// folder, --file and --name it loads the devtool.yml or the Compose file and names the
// environment. deploy, destroy, endpoints, logs and build (and the dev-container commands) call
// Load; nothing else discovers manifests or names environments.
package environment

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"

	"github.com/devtool/devtool/internal/compose"
	"github.com/devtool/devtool/internal/composeenv"
	"github.com/devtool/devtool/internal/deploy"
	"github.com/devtool/devtool/internal/manifest"
	"github.com/devtool/devtool/internal/projectpath"
	"github.com/devtool/devtool/internal/yamlsrc"
)

// Options are what the user gave: the folder, --file and --name.
type Options struct {
	// Dir is the folder the command runs from; relative Files are resolved against it.
	Dir string
	// Files is --file (repeatable). Empty: the folder's devtool.yml, else its Compose file.
	// Several files are Compose files merged in order into one environment (Docker Compose's
	// repeated -f); a devtool.yml cannot be merged.
	Files []string
	// Name is --name; "" derives it (see Name).
	Name string
	// Environ is the shell environment for interpolation.
	Environ map[string]string
	// AllowMissing: when the folder has neither a devtool.yml nor a Compose file (and no --file was
	// given), Load returns an Environment with only Name and Dir set instead of an error. For
	// commands that act on a deployed environment (destroy, endpoints, logs). A file that exists
	// but does not load is always an error.
	AllowMissing bool
	// AllowOutside lets the paths the file names (host volumes, build contexts, Dockerfiles, build
	// secrets, env files) lie outside the project folder: --allow-outside-volumes. Without it
	// Load refuses them (see CheckBuildPaths and internal/projectpath).
	AllowOutside bool
	// Secrets are the platform's stored secrets (contexts.Resolver.StoredSecrets; nil off a
	// platform): the third source of ${NAME}, after the shell and .env (spec A6).
	Secrets map[string]string
}

// lookups are the variable sources after the shell and .env.
func (o Options) lookups() []yamlsrc.Lookup {
	if len(o.Secrets) == 0 {
		return nil
	}
	return []yamlsrc.Lookup{yamlsrc.MapLookup(o.Secrets)}
}

// Environment is the loaded environment.
type Environment struct {
	// Name is the environment name: --name, else the file's name key, else the repository's name
	// (its origin remote, else the folder holding .git), else the project folder's name.
	Name string
	// Dir is the project folder (the manifest's, or the Compose file's).
	Dir string
	// File is the file loaded ("" when nothing was found and AllowMissing was set).
	File string
	// Manifest is the devtool.yml; for a Compose environment it is the manifest the Compose file
	// stands for (Inferred: deploy.compose is that file, build lists its build sections).
	Manifest *manifest.Manifest
	// Compose is the loaded Compose environment when the environment is a Compose file.
	Compose *composeenv.Env
	// Warnings are what the loaders found worth telling (never fatal).
	Warnings []string
}

// IsCompose reports whether the environment is a Compose file (no devtool.yml of its own).
func (e *Environment) IsCompose() bool { return e.Compose != nil }

// Found reports whether a file was loaded.
func (e *Environment) Found() bool { return e.File != "" }

// ErrSeveralManifests is returned when several --file values include a devtool.yml: only Compose
// files merge.
var ErrSeveralManifests = errors.New("several --file values merge Compose files only: a devtool.yml must be the only --file")

// Load finds and loads the environment's file and names it. Load errors are returned as they
// are (positioned); nothing falls back to another file when a devtool.yml does not load.
func Load(o Options) (*Environment, error) {
	if len(o.Files) > 1 {
		return loadSeveral(o)
	}
	file := ""
	if len(o.Files) == 1 {
		file = o.Files[0]
		if file == "" {
			return nil, errors.New("--file is empty")
		}
	}
	if o.Name != "" && deploy.SanitizeName(o.Name) == "" {
		return nil, fmt.Errorf("--name %q has no character valid in a Kubernetes name", o.Name)
	}
	path, isCompose, err := manifest.Find(o.Dir, file)
	if err != nil {
		var nf *manifest.NotFoundError
		if errors.As(err, &nf) && o.AllowMissing && file == "" {
			return &Environment{Name: Name(o.Name, "", o.Dir), Dir: o.Dir}, nil
		}
		return nil, err
	}
	if isCompose {
		return loadCompose(o, path)
	}
	m, err := manifest.Load(manifest.LoadOptions{Dir: o.Dir, File: path, Environ: o.Environ, Lookups: o.lookups()})
	if err != nil {
		return nil, err
	}
	if m.Inferred { // --file named a Compose file
		return loadCompose(o, m.File)
	}
	if err := CheckBuildPaths(m.Dir, m.Build, o.AllowOutside); err != nil {
		return nil, err
	}
	return &Environment{Name: Name(o.Name, m.Name, m.Dir), Dir: m.Dir, File: m.File, Manifest: m, Warnings: m.Warnings}, nil
}

// loadSeveral loads several --file values: Compose files merged in order.
func loadSeveral(o Options) (*Environment, error) {
	var paths []string
	for _, f := range o.Files {
		if f == "" {
			return nil, errors.New("--file is empty")
		}
		path, _, err := manifest.Find(o.Dir, f)
		if err != nil {
			return nil, err
		}
		if slices.Contains(manifest.DefaultFileNames, filepath.Base(path)) {
			return nil, fmt.Errorf("%s: %w", f, ErrSeveralManifests)
		}
		paths = append(paths, path)
	}
	if o.Name != "" && deploy.SanitizeName(o.Name) == "" {
		return nil, fmt.Errorf("--name %q has no character valid in a Kubernetes name", o.Name)
	}
	return loadCompose(o, paths...)
}

// loadCompose loads a Compose environment: the files given (merged in order), or, when the one
// file is the folder's default Compose file found by discovery, that file and its override.
func loadCompose(o Options, paths ...string) (*Environment, error) {
	files := paths
	if len(o.Files) == 0 && len(paths) == 1 { // discovered, not named: merge the override as Compose does
		if ov := compose.OverrideFile(paths[0]); ov != "" {
			files = append(files, ov)
		}
	}
	ce, err := composeenv.Load(composeenv.Options{WorkDir: o.Dir, Files: files, Name: o.Name, Environ: o.Environ, Secrets: o.Secrets, AllowOutside: o.AllowOutside})
	if err != nil {
		return nil, err
	}
	m := &manifest.Manifest{File: ce.File, Dir: ce.Dir, Inferred: true, Name: ce.Project.Name, Raw: ce.Raw,
		Deploy: manifest.Deploy{Compose: []manifest.ComposeFile{{File: ce.File, Merge: ce.Files[1:]}}}}
	m.Build = BuildSections(ce.Project)
	if err := CheckBuildPaths(ce.Dir, m.Build, o.AllowOutside); err != nil {
		return nil, err
	}
	return &Environment{Name: ce.Name, Dir: ce.Dir, File: ce.File, Manifest: m, Compose: ce, Warnings: ce.Project.Warnings}, nil
}

// CheckBuildPaths refuses the build contexts, Dockerfiles and build secrets that lie outside the
// project folder dir (symlinks followed; see internal/projectpath), before anything is hashed or
// sent to a builder. A remote context (a git or http URL) is not a path. allowOutside is the
// user's --allow-outside-volumes; a context that is the filesystem root is refused even then.
func CheckBuildPaths(dir string, builds []*manifest.BuildService, allowOutside bool) error {
	for _, b := range builds {
		if b.Build == nil {
			continue
		}
		where := fmt.Sprintf("%s: service %s", b.Pos, b.Service)
		ctx := b.Build.Context
		if compose.IsRemoteContext(ctx) {
			continue
		}
		if filepath.Dir(ctx) == ctx {
			return fmt.Errorf("%s: the build context is the filesystem root %s: a build sends its whole context to the builder; name the project's folder", where, ctx)
		}
		if allowOutside {
			continue
		}
		if err := projectpath.Check(dir, ctx); err != nil {
			return fmt.Errorf("%s: build context %w: a build sends it to the builder; %s", where, err, projectpath.Hint)
		}
		if df := b.Build.Dockerfile; df != "" {
			if !filepath.IsAbs(df) {
				df = filepath.Join(ctx, df)
			}
			if err := projectpath.Check(dir, df); err != nil {
				return fmt.Errorf("%s: Dockerfile %w: %s", where, err, projectpath.Hint)
			}
		}
		ids := make([]string, 0, len(b.Secrets))
		for id := range b.Secrets {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		for _, id := range ids {
			if err := projectpath.Check(dir, b.Secrets[id]); err != nil {
				return fmt.Errorf("%s: build secret %s: %w: %s", where, id, err, projectpath.Hint)
			}
		}
	}
	return nil
}

// BuildSections lists the services of a Compose project that have a build section, in file order
// (manifest.BuildSections, kept here for callers of this package).
func BuildSections(p *compose.Project) []*manifest.BuildService { return manifest.BuildSections(p) }

// Name is the one naming rule: the flag, else the file's name key, else the repository's name
// (git origin remote, else the folder holding .git), else dir's name; a valid Kubernetes name.
func Name(flag, declared, dir string) string {
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	return deploy.EnvironmentName(flag, declared, dir)
}

// Identify names the environment for commands that need only its name (endpoints, logs): --name
// alone reads no file; otherwise the folder's file is loaded (its errors are returned) and a
// folder without one is named after the repository or the folder.
func Identify(o Options) (string, error) {
	if o.Name != "" && len(o.Files) == 0 {
		if n := deploy.SanitizeName(o.Name); n != "" {
			return n, nil
		}
		return "", fmt.Errorf("--name %q has no character valid in a Kubernetes name", o.Name)
	}
	o.AllowMissing = true
	e, err := Load(o)
	if err != nil {
		return "", err
	}
	return e.Name, nil
}

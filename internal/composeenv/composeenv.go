// Package composeenv loads one Compose file as an environment and resolves its images (build,
// host volumes). Commands reach it through internal/environment, which decides which file.
package composeenv

import (
	"path/filepath"

	"github.com/devtool/devtool/internal/compose"
	"github.com/devtool/devtool/internal/deploy"
	"github.com/devtool/devtool/internal/yamlsrc"
)

// Options say where to look and what the user passed.
type Options struct {
	WorkDir string // the folder commands run from
	File    string // --file; "" searches WorkDir
	// Files are several Compose files merged in order (--file repeated); when set, File is
	// ignored. With neither, the folder's Compose file is found and its override file
	// (compose.override.yaml and the like) is merged into it, as Docker Compose does.
	Files   []string
	Name    string            // --name
	Environ map[string]string // the shell environment
	// Secrets are the platform's stored secrets: the third source of ${NAME}, after the shell and .env.
	Secrets map[string]string
	// AllowOutside lets files the Compose file names lie outside the project folder
	// (--allow-outside-volumes; see internal/projectpath).
	AllowOutside bool
	// ProjectDir is the project folder of that rule; "" is the (first) Compose file's folder.
	ProjectDir string
}

// Env is a loaded Compose environment.
type Env struct {
	File  string   // absolute path of the (first) compose file
	Files []string // every file merged, in order (File first)
	Dir   string   // its folder
	// ProjectDir is the project folder paths must lie in (Options.ProjectDir, else Dir).
	ProjectDir string
	Name       string // environment name
	Project    *compose.Project
	Raw        []byte
}

// Load finds and loads the compose file(s) and names the environment. File (and Dir) name the
// first file: relative paths in every file resolve against its folder, as in Docker Compose.
func Load(o Options) (*Env, error) {
	files := o.Files
	if len(files) == 0 && o.File != "" {
		files = []string{o.File}
	}
	if len(files) == 0 {
		found, err := compose.FindFiles(o.WorkDir)
		if err != nil {
			return nil, err
		}
		files = found
	}
	abs := make([]string, len(files))
	for i, f := range files { // empty --file values are refused by internal/environment
		if !filepath.IsAbs(f) {
			f = filepath.Join(o.WorkDir, f)
		}
		abs[i] = f
	}
	var lookups []compose.Lookup
	if len(o.Secrets) > 0 {
		lookups = []compose.Lookup{yamlsrc.MapLookup(o.Secrets)}
	}
	p, err := compose.Load(compose.LoadOptions{File: abs[0], Files: abs, Environ: o.Environ, Lookups: lookups, AllowOutside: o.AllowOutside, ProjectDir: o.ProjectDir})
	if err != nil {
		return nil, err
	}
	raw, err := readFile(abs[0])
	if err != nil {
		return nil, err
	}
	dir := filepath.Dir(abs[0])
	root := o.ProjectDir
	if root == "" {
		root = dir
	}
	return &Env{File: abs[0], Files: abs, Dir: dir, ProjectDir: root, Name: deploy.EnvironmentName(o.Name, p.Name, dir), Project: p, Raw: raw}, nil
}

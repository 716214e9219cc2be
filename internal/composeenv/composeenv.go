// Package composeenv loads one Compose file as an environment and resolves its images (build,
// host volumes). Commands reach it through internal/environment, which decides which file.
package composeenv

import (
	"path/filepath"

	"github.com/devtool/devtool/internal/compose"
	"github.com/devtool/devtool/internal/deploy"
)

// Options say where to look and what the user passed.
type Options struct {
	WorkDir string            // the folder commands run from
	File    string            // --file; "" searches WorkDir
	Name    string            // --name
	Environ map[string]string // the shell environment
}

// Env is a loaded Compose environment.
type Env struct {
	File    string // absolute path of the compose file
	Dir     string // its folder
	Name    string // environment name
	Project *compose.Project
	Raw     []byte
}

// Load finds and loads the compose file and names the environment.
func Load(o Options) (*Env, error) {
	file := o.File
	if file == "" {
		f, err := compose.FindFile(o.WorkDir)
		if err != nil {
			return nil, err
		}
		file = f
	} else if !filepath.IsAbs(file) {
		file = filepath.Join(o.WorkDir, file)
	}
	p, err := compose.Load(compose.LoadOptions{File: file, Environ: o.Environ})
	if err != nil {
		return nil, err
	}
	raw, err := readFile(file)
	if err != nil {
		return nil, err
	}
	dir := filepath.Dir(file)
	return &Env{File: file, Dir: dir, Name: deploy.EnvironmentName(o.Name, p.Name, dir), Project: p, Raw: raw}, nil
}

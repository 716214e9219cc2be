// Package composeenv loads and translates the Compose environment of a folder: the shared first
// half of deploy, destroy, endpoints and build (find the file, load it, name the environment).
package composeenv

import (
	"fmt"
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

// NameOnly names the environment without loading anything: --name, else the compose file's
// folder (or the git repository), for commands like destroy that must work without a manifest.
func NameOnly(o Options) (string, error) {
	if o.Name != "" {
		if n := deploy.SanitizeName(o.Name); n != "" {
			return n, nil
		}
		return "", fmt.Errorf("--name %q has no character valid in a Kubernetes name", o.Name)
	}
	if e, err := Load(o); err == nil {
		return e.Name, nil
	}
	return deploy.EnvironmentName("", "", o.WorkDir), nil
}

package dev

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"github.com/devtool/devtool/internal/composeenv"
	"github.com/devtool/devtool/internal/deploy"
	"github.com/devtool/devtool/internal/manifest"
)

// Project is what the dev commands need from a folder: its dev entries and where its state
// lives.
type Project struct {
	// Dir is the manifest's (or Compose file's) folder: the key of the state directory.
	Dir string
	// File is the devtool.yml or Compose file.
	File string
	// Name is the environment name.
	Name string
	// Devs are the dev entries: the devtool.yml's dev section, or one per Compose service.
	Devs []*manifest.Dev
	// FromCompose is true when the dev entries come from a Compose file alone.
	FromCompose bool
	Warnings    []string
}

// LoadProject finds and loads the folder's devtool.yml, or its Compose file when there is none.
// It is the one place the dev commands read an environment, so it can move to the shared
// environment library unchanged for its callers.
func LoadProject(workDir, file string, environ map[string]string) (*Project, error) {
	m, err := deploy.LoadManifest(workDir, file, environ)
	if err != nil {
		return nil, err
	}
	if m != nil {
		return &Project{Dir: m.Dir, File: m.File, Name: deploy.EnvironmentName("", m.Name, m.Dir), Devs: m.Dev, Warnings: m.Warnings}, nil
	}
	env, err := composeenv.Load(composeenv.Options{WorkDir: workDir, File: file, Environ: environ})
	if err != nil {
		return nil, err
	}
	p := &Project{Dir: env.Dir, File: env.File, Name: env.Name, FromCompose: true, Warnings: env.Project.Warnings}
	for _, s := range env.Project.Services {
		p.Devs = append(p.Devs, FromCompose(s))
	}
	return p, nil
}

// Names lists the dev entries' names in file order.
func (p *Project) Names() []string {
	var n []string
	for _, d := range p.Devs {
		n = append(n, d.Name)
	}
	return n
}

// Select picks the dev entry named name, or the only one when name is "". With several and no
// name it returns an error listing them (the command prompts first when it can).
func (p *Project) Select(name string) (*manifest.Dev, error) {
	if len(p.Devs) == 0 {
		return nil, fmt.Errorf("%s has no dev section: add one (dev: {web: {sync: [.:/app]}}) to develop a service", filepath.Base(p.File))
	}
	if name == "" {
		if len(p.Devs) == 1 {
			return p.Devs[0], nil
		}
		return nil, fmt.Errorf("%s has %d dev containers (%s): name one, for example 'devtool up %s'", filepath.Base(p.File), len(p.Devs), strings.Join(p.Names(), ", "), p.Devs[0].Name)
	}
	for _, d := range p.Devs {
		if d.Name == name {
			return d, nil
		}
	}
	names := p.Names()
	sort.Strings(names)
	return nil, fmt.Errorf("%s has no dev container %q (it has %s)", filepath.Base(p.File), name, strings.Join(names, ", "))
}

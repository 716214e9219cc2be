package dev

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/devtool/devtool/internal/environment"
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
	// Services maps a dev entry to the services `restart` restarts (dev.<name>.services).
	Services map[string][]string
	// FromCompose is true when the dev entries come from a Compose file alone.
	FromCompose bool
	Warnings    []string
}

// LoadProject loads the folder's environment through environment.Load (the one loader every
// command uses, so the environment is named alike everywhere): the devtool.yml's dev section, or
// one dev entry per service of a Compose file when there is no devtool.yml.
func LoadProject(workDir, file string, environ map[string]string) (*Project, error) {
	var files []string
	if file != "" {
		files = []string{file}
	}
	env, err := environment.Load(environment.Options{Dir: workDir, Files: files, Environ: environ})
	if err != nil {
		return nil, err
	}
	if env.IsCompose() {
		p := &Project{Dir: env.Dir, File: env.File, Name: env.Name, FromCompose: true, Warnings: env.Warnings}
		for _, s := range env.Compose.Project.Services {
			p.Devs = append(p.Devs, FromCompose(s))
		}
		return p, nil
	}
	m := env.Manifest
	p := &Project{Dir: m.Dir, File: m.File, Name: env.Name, Devs: m.Dev, Warnings: env.Warnings}
	p.Services, err = devServices(m.Raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", m.File, err)
	}
	return p, nil
}

// devServices reads dev.<name>.services (a list of service names) from the manifest text.
// internal/manifest does not model that field yet; this minimal parse stands in for it.
func devServices(raw []byte) (map[string][]string, error) {
	var doc struct {
		Dev map[string]struct {
			Services []string `yaml:"services"`
		} `yaml:"dev"`
	}
	if len(raw) == 0 {
		return nil, nil
	}
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		// Anything the manifest loader accepted but this simple shape does not (a dev entry
		// that is not a map) has no services list.
		return nil, nil
	}
	out := map[string][]string{}
	for name, d := range doc.Dev {
		for _, s := range d.Services {
			if s = strings.TrimSpace(s); s != "" {
				out[name] = append(out[name], s)
			}
		}
	}
	return out, nil
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

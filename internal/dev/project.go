package dev

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"github.com/devtool/devtool/internal/contexts"
	"github.com/devtool/devtool/internal/environment"
	"github.com/devtool/devtool/internal/errs"
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
	// Env is the loaded environment (what environment.Deployer deploys).
	Env *environment.Environment
	// leftOut is, by dev entry made from Compose, the warning naming the host volumes that are
	// not sync folders (SyncableFolders); LoadDev adds the selected entry's to Warnings.
	leftOut map[string]string
}

// LoadProject loads the folder's environment through environment.Load (the one loader every
// command uses, with the same --file/--name options, so the environment is named alike
// everywhere): the devtool.yml's dev section, or one dev entry per service of a Compose file when
// there is no devtool.yml.
func LoadProject(o environment.Options) (*Project, error) {
	env, err := environment.Load(o)
	if err != nil {
		return nil, err
	}
	if env.IsCompose() {
		p := &Project{Dir: env.Dir, File: env.File, Name: env.Name, FromCompose: true, Warnings: env.Warnings, Env: env}
		for _, s := range env.Compose.Project.Services {
			d := FromCompose(s)
			if left := SyncableFolders(d, p.Dir); len(left) > 0 {
				if p.leftOut == nil {
					p.leftOut = map[string]string{}
				}
				p.leftOut[d.Name] = fmt.Sprintf("service %s: up syncs only folders of the project; these host volumes are not synced: %s", d.Name, strings.Join(left, ", "))
			}
			p.Devs = append(p.Devs, d)
		}
		return p, nil
	}
	m := env.Manifest
	return &Project{Dir: m.Dir, File: m.File, Name: env.Name, Devs: m.Dev, Warnings: env.Warnings, Env: env}, nil
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
// name it returns a usage error (exit 2) listing them (the command prompts first when it can).
func (p *Project) Select(name string) (*manifest.Dev, error) {
	if len(p.Devs) == 0 {
		return nil, fmt.Errorf("%s has no dev section: add one (dev: {web: {sync: [.:/app]}}) to develop a service", filepath.Base(p.File))
	}
	if name == "" {
		if len(p.Devs) == 1 {
			return p.Devs[0], nil
		}
		// Nothing was attempted: a missing argument is a usage mistake, as an unknown name is.
		return nil, errs.FlagErrorf("%s has %d dev containers (%s) and none was named: name one", filepath.Base(p.File), len(p.Devs), strings.Join(p.Names(), ", "))
	}
	for _, d := range p.Devs {
		if d.Name == name {
			return d, nil
		}
	}
	names := p.Names()
	sort.Strings(names)
	// A name the file does not have is a usage mistake (exit 2): nothing was attempted.
	return nil, errs.FlagErrorf("%s has no dev container %q (it has %s)", filepath.Base(p.File), name, strings.Join(names, ", "))
}

// LoadOptions are the inputs of LoadDev, the first step of every dev command.
type LoadOptions struct {
	// Env loads the folder (the command's --file/--name flags: cmdutil.EnvFlags.Options).
	Env environment.Options
	// Name is the dev entry ("" picks the only one).
	Name string
	// Usage is the command line that names an entry (for example "devtool down NAME"): the hint
	// of an error when none can be picked.
	Usage string
	// Pick chooses among several entries when Name is "" (a prompt on a terminal); nil: an
	// error listing them.
	Pick func(names []string) (string, error)
	// Target resolves where the command runs, after the entry is picked; nil: not resolved.
	Target func() (*contexts.Target, error)
}

// Selection is what a dev command acts on.
type Selection struct {
	Project *Project
	Dev     *manifest.Dev
	Target  *contexts.Target // nil when LoadOptions.Target is nil
}

// LoadDev loads the folder's project, picks its dev entry and resolves the target: the
// sequence every dev command (up, down, exec, status, restart, doctor) starts with.
func LoadDev(o LoadOptions) (*Selection, error) {
	p, err := LoadProject(o.Env)
	if err != nil {
		return nil, err
	}
	name := o.Name
	if name == "" && len(p.Devs) > 1 && o.Pick != nil {
		if name, err = o.Pick(p.Names()); err != nil {
			return nil, err
		}
	}
	d, err := p.Select(name)
	if err != nil {
		if o.Usage != "" && len(p.Devs) > 0 {
			err = errs.WithHint(err, fmt.Sprintf("run '%s' with NAME one of: %s", o.Usage, strings.Join(p.Names(), ", ")))
		}
		return nil, err
	}
	if w, ok := p.leftOut[d.Name]; ok {
		p.Warnings = append(p.Warnings, w)
	}
	s := &Selection{Project: p, Dev: d}
	if o.Target != nil {
		if s.Target, err = o.Target(); err != nil {
			return nil, err
		}
	}
	return s, nil
}

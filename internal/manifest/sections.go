package manifest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/devtool/devtool/internal/compose"
	"github.com/devtool/devtool/internal/yamlsrc"
)

// manifest reads the top-level keys.
func (p *parser) manifest(doc *yaml.Node, m *Manifest) {
	root := yamlsrc.Deref(doc)
	if doc.Kind == 0 || len(doc.Content) == 0 || yamlsrc.IsNull(root) {
		p.Errs = append(p.Errs, &yamlsrc.Error{Pos: yamlsrc.Position{File: p.File, Line: 1, Column: 1},
			Msg: "the manifest is empty; expected a mapping with deploy, build, dev or dependencies"})
		return
	}
	top, ok := p.Mapping(root, "")
	if !ok {
		return
	}
	for _, e := range top {
		switch {
		case e.Key == "name":
			m.Name, _ = p.Str(e.Val, "name")
		case e.Key == "build":
			m.Build = p.buildSection(e.Val, "build")
		case e.Key == "deploy":
			m.Deploy = p.deploy(e.Val, "deploy")
		case e.Key == "destroy":
			m.Destroy = p.commands(e.Val, "destroy")
		case e.Key == "dependencies":
			m.Dependencies = p.dependencies(e.Val, "dependencies")
		case e.Key == "dev":
			m.Dev = p.devSection(e.Val, "dev")
		case strings.HasPrefix(e.Key, "x-"):
			// Extensions: reusable through anchors, nothing to load.
		default:
			p.Ignore(e.KeyNode, e.Key)
		}
	}
}

// checkName reports a name Kubernetes would refuse as an object name.
func (p *parser) checkName(n *yaml.Node, field, what, name string) bool {
	if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
		hint := ""
		if alt := strings.ToLower(strings.NewReplacer("_", "-", ".", "-").Replace(name)); len(validation.IsDNS1123Label(alt)) == 0 {
			hint = fmt.Sprintf(" (for example %q)", alt)
		}
		p.Errorf(n, field, "%s name %q is not valid in Kubernetes: use at most 63 lower-case letters, digits and '-', starting and ending with a letter or digit%s", what, name, hint)
		return false
	}
	return true
}

// buildSection reads service -> build object (A1), plus image and secrets.
func (p *parser) buildSection(n *yaml.Node, field string) []*BuildService {
	es, _ := p.Mapping(n, field)
	var out []*BuildService
	for _, e := range es {
		f := yamlsrc.Join(field, e.Key)
		p.checkName(e.KeyNode, f, "service", e.Key)
		out = append(out, p.buildService(e, f))
	}
	return out
}

func (p *parser) buildService(e yamlsrc.Entry, field string) *BuildService {
	bs := &BuildService{Service: e.Key, Pos: p.Pos(e.KeyNode), Build: &compose.Build{Context: p.dir, Dockerfile: "Dockerfile"}}
	b := bs.Build
	d := yamlsrc.Deref(e.Val)
	switch {
	case yamlsrc.IsNull(d):
		return bs
	case d.Kind == yaml.ScalarNode:
		b.Context = p.buildContext(d.Value)
		return bs
	case d.Kind != yaml.MappingNode:
		p.Expected(e.Val, field, "a build context path or a build object")
		return bs
	}
	es, _ := p.Mapping(d, field)
	for _, be := range es {
		f := yamlsrc.Join(field, be.Key)
		switch be.Key {
		case "context":
			if s, ok := p.Str(be.Val, f); ok && s != "" {
				b.Context = p.buildContext(s)
			}
		case "dockerfile":
			if s, ok := p.Str(be.Val, f); ok && s != "" {
				b.Dockerfile = s
			}
		case "target":
			b.Target, _ = p.Str(be.Val, f)
		case "args":
			args, _ := p.KeyValues(be.Val, f)
			for _, a := range args {
				if b.Args == nil {
					b.Args = map[string]string{}
				}
				if a.HasValue {
					b.Args[a.Key] = a.Value
				} else if v, ok := p.Lookup(a.Key); ok {
					b.Args[a.Key] = v
				}
			}
		case "export_cache":
			b.ExportCache, _ = p.Str(be.Val, f)
		case "cache_from":
			b.CacheFrom, _, _ = p.StrOrList(be.Val, f)
		case "image":
			bs.Image, _ = p.Str(be.Val, f)
		case "secrets":
			secrets, _ := p.KeyValues(be.Val, f)
			for _, s := range secrets {
				if !s.HasValue || s.Value == "" {
					p.Errorf(s.Node, yamlsrc.Join(f, s.Key), "expected the path of the secret's file")
					continue
				}
				if bs.Secrets == nil {
					bs.Secrets = map[string]string{}
				}
				bs.Secrets[s.Key] = p.absPath(s.Value)
			}
		default:
			if !strings.HasPrefix(be.Key, "x-") {
				p.Ignore(be.KeyNode, f)
			}
		}
	}
	return bs
}

// buildContext makes a local context absolute; a remote one (git or http URL) is kept.
func (p *parser) buildContext(s string) string {
	if strings.Contains(s, "://") || strings.HasPrefix(s, "git@") {
		return s
	}
	return p.absPath(s)
}

// deploy reads a list of commands, or {commands, compose, endpoints}.
func (p *parser) deploy(n *yaml.Node, field string) Deploy {
	var d Deploy
	dn := yamlsrc.Deref(n)
	if yamlsrc.IsNull(dn) {
		return d
	}
	if dn.Kind == yaml.SequenceNode {
		d.Commands = p.commands(dn, field)
		return d
	}
	if dn.Kind != yaml.MappingNode {
		p.Expected(n, field, "a list of commands or an object with commands, compose and endpoints")
		return d
	}
	es, _ := p.Mapping(dn, field)
	for _, e := range es {
		f := yamlsrc.Join(field, e.Key)
		switch e.Key {
		case "commands":
			d.Commands = p.commands(e.Val, f)
		case "compose":
			d.Compose = p.composeFiles(e.Val, f)
		case "endpoints":
			d.Endpoints = compose.ReadEndpoints(p.Reader, e.Val, f, nil) // deploy commands create the services
		default:
			if !strings.HasPrefix(e.Key, "x-") {
				p.Ignore(e.KeyNode, f)
			}
		}
	}
	return d
}

// commands reads a list whose items are a command string or {name, command}.
func (p *parser) commands(n *yaml.Node, field string) []Command {
	d := yamlsrc.Deref(n)
	if yamlsrc.IsNull(d) {
		return nil
	}
	if d.Kind != yaml.SequenceNode {
		p.Expected(n, field, "a list of commands (strings or {name, command})")
		return nil
	}
	var out []Command
	for i, item := range d.Content {
		f := yamlsrc.Index(field, i)
		id := yamlsrc.Deref(item)
		c := Command{Pos: p.Pos(id)}
		switch {
		case id != nil && id.Kind == yaml.ScalarNode && !yamlsrc.IsNull(id):
			c.Command = id.Value
		case id != nil && id.Kind == yaml.MappingNode:
			es, _ := p.Mapping(id, f)
			for _, e := range es {
				ef := yamlsrc.Join(f, e.Key)
				switch e.Key {
				case "name":
					c.Name, _ = p.Str(e.Val, ef)
				case "command":
					c.Command, _ = p.Str(e.Val, ef)
				default:
					p.Ignore(e.KeyNode, ef)
				}
			}
		default:
			p.Expected(item, f, "a command string or {name, command}")
			continue
		}
		if strings.TrimSpace(c.Command) == "" {
			p.Errorf(item, f, "the command is empty")
			continue
		}
		if c.Name == "" {
			c.Name = c.Command
		}
		out = append(out, c)
	}
	return out
}

// composeFiles reads deploy.compose: one entry or a list; an entry is a path or {file, services}.
func (p *parser) composeFiles(n *yaml.Node, field string) []ComposeFile {
	d := yamlsrc.Deref(n)
	if yamlsrc.IsNull(d) {
		return nil
	}
	if d.Kind == yaml.SequenceNode {
		var out []ComposeFile
		for i, item := range d.Content {
			if c, ok := p.composeFile(item, yamlsrc.Index(field, i)); ok {
				out = append(out, c)
			}
		}
		return out
	}
	if c, ok := p.composeFile(n, field); ok {
		return []ComposeFile{c}
	}
	return nil
}

func (p *parser) composeFile(n *yaml.Node, field string) (ComposeFile, bool) {
	d := yamlsrc.Deref(n)
	c := ComposeFile{Pos: p.Pos(d)}
	var fileNode *yaml.Node
	switch {
	case d != nil && d.Kind == yaml.ScalarNode && !yamlsrc.IsNull(d):
		c.File, fileNode = d.Value, d
	case d != nil && d.Kind == yaml.MappingNode:
		es, _ := p.Mapping(d, field)
		for _, e := range es {
			f := yamlsrc.Join(field, e.Key)
			switch e.Key {
			case "file":
				c.File, _ = p.Str(e.Val, f)
				fileNode = e.Val
			case "services":
				vals, _, _ := p.StrOrList(e.Val, f)
				c.Services = vals
			default:
				p.Ignore(e.KeyNode, f)
			}
		}
	default:
		p.Expected(n, field, "a Compose file path or {file, services}")
		return c, false
	}
	if strings.TrimSpace(c.File) == "" {
		if fileNode == nil {
			fileNode = d
		}
		p.Errorf(fileNode, yamlsrc.Join(field, "file"), "expected the path of a Compose file")
		return c, false
	}
	c.File = p.absPath(c.File)
	if st, err := statFile(c.File); err != nil {
		p.Errorf(fileNode, field, "Compose file %s: %v", c.File, err)
		return c, false
	} else if st {
		p.Errorf(fileNode, field, "Compose file %s is a folder", c.File)
		return c, false
	}
	return c, true
}

// dependencies reads a list of repository URLs, or name -> {repository, manifest, branch,
// variables, wait, timeout}.
func (p *parser) dependencies(n *yaml.Node, field string) []*Dependency {
	d := yamlsrc.Deref(n)
	if yamlsrc.IsNull(d) {
		return nil
	}
	var out []*Dependency
	seen := map[string]bool{}
	switch d.Kind {
	case yaml.SequenceNode:
		for i, item := range d.Content {
			f := yamlsrc.Index(field, i)
			repo, ok := p.requiredStr(item, f)
			if !ok {
				continue
			}
			dep := &Dependency{Name: RepositoryName(repo), Repository: p.repository(repo), Pos: p.Pos(yamlsrc.Deref(item))}
			if dep.Name == "" {
				p.Errorf(item, f, "cannot tell a name from the repository %q; use the map notation (name: {repository: ...})", repo)
				continue
			}
			if seen[dep.Name] {
				p.Errorf(item, f, "two dependencies are named %q; use the map notation to name them", dep.Name)
				continue
			}
			seen[dep.Name] = true
			out = append(out, dep)
		}
	case yaml.MappingNode:
		es, _ := p.Mapping(d, field)
		for _, e := range es {
			f := yamlsrc.Join(field, e.Key)
			p.checkName(e.KeyNode, f, "dependency", e.Key)
			out = append(out, p.dependency(e, f))
		}
	default:
		p.Expected(n, field, "a list of repository URLs or a mapping of name to {repository, manifest, branch, variables, wait, timeout}")
	}
	return out
}

func (p *parser) dependency(e yamlsrc.Entry, field string) *Dependency {
	dep := &Dependency{Name: e.Key, Pos: p.Pos(e.KeyNode)}
	d := yamlsrc.Deref(e.Val)
	if d != nil && d.Kind == yaml.ScalarNode && !yamlsrc.IsNull(d) {
		// name: <repository> is a handy short form.
		dep.Repository = p.repository(d.Value)
		return dep
	}
	es, ok := p.Mapping(e.Val, field)
	if !ok {
		return dep
	}
	for _, de := range es {
		f := yamlsrc.Join(field, de.Key)
		switch de.Key {
		case "repository":
			if s, ok := p.requiredStr(de.Val, f); ok {
				dep.Repository = p.repository(s)
			}
		case "manifest":
			dep.Manifest, _ = p.Str(de.Val, f)
		case "branch":
			dep.Branch, _ = p.Str(de.Val, f)
		case "variables":
			dep.Variables = p.StringMap(de.Val, f)
		case "wait":
			dep.Wait, _ = p.Bool(de.Val, f)
		case "timeout":
			dep.Timeout, _ = p.duration(de.Val, f)
		default:
			p.Ignore(de.KeyNode, f)
		}
	}
	if dep.Repository == "" {
		p.Errorf(e.KeyNode, yamlsrc.Join(field, "repository"), "repository is required (a git URL or a local path)")
	}
	return dep
}

// repository keeps a URL as written and makes a local path absolute (relative to the manifest).
func (p *parser) repository(s string) string {
	s = strings.TrimSpace(s)
	if isRemote(s) {
		return s
	}
	return p.absPath(s)
}

// isRemote tells a git URL (scheme://…, or scp-like user@host:path) from a local path.
func isRemote(s string) bool {
	if strings.Contains(s, "://") {
		return true
	}
	at, colon := strings.Index(s, "@"), strings.Index(s, ":")
	return at > 0 && colon > at && !strings.Contains(s[:at], "/")
}

// RepositoryName is the name a dependency takes in the list notation: the last element of the
// repository's path without ".git" (for example "api" for https://github.com/acme/api.git).
// Deploy makes it a valid Kubernetes name.
func RepositoryName(repo string) string {
	s := strings.TrimSpace(repo)
	if i := strings.IndexAny(s, "?#"); i >= 0 {
		s = s[:i]
	}
	s = strings.TrimRight(s, "/")
	s = strings.TrimSuffix(s, ".git")
	if i := strings.LastIndexAny(s, "/:"); i >= 0 {
		s = s[i+1:]
	}
	return s
}

// duration reads a duration with a unit ("30s", "5m", "1h30m"); it must be positive.
func (p *parser) duration(n *yaml.Node, field string) (time.Duration, bool) {
	s, ok := p.Str(n, field)
	if !ok {
		return 0, false
	}
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil || d <= 0 {
		p.Errorf(n, field, "expected a positive duration with a unit (for example 30s, 5m, 1h), found %q", s)
		return 0, false
	}
	return d, true
}

// statFile reports whether path is a folder, or why it cannot be used.
func statFile(path string) (isDir bool, err error) {
	st, err := os.Stat(filepath.Clean(path))
	if err != nil {
		return false, yamlsrc.UnwrapPathError(err)
	}
	return st.IsDir(), nil
}

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
)

// manifest reads the top-level keys.
func (p *parser) manifest(doc *yaml.Node, m *Manifest) {
	root := deref(doc)
	if doc.Kind == 0 || len(doc.Content) == 0 || isNull(root) {
		p.errs = append(p.errs, &compose.Error{Pos: compose.Position{File: p.file, Line: 1, Column: 1},
			Msg: "the manifest is empty; expected a mapping with deploy, build, dev or dependencies"})
		return
	}
	top, ok := p.mapping(root, "")
	if !ok {
		return
	}
	for _, e := range top {
		switch {
		case e.key == "name":
			m.Name, _ = p.str(e.val, "name")
		case e.key == "build":
			m.Build = p.buildSection(e.val, "build")
		case e.key == "deploy":
			m.Deploy = p.deploy(e.val, "deploy")
		case e.key == "destroy":
			m.Destroy = p.commands(e.val, "destroy")
		case e.key == "dependencies":
			m.Dependencies = p.dependencies(e.val, "dependencies")
		case e.key == "dev":
			m.Dev = p.devSection(e.val, "dev")
		case strings.HasPrefix(e.key, "x-"):
			// Extensions: reusable through anchors, nothing to load.
		default:
			p.ignore(e.keyNode, e.key)
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
		p.errorf(n, field, "%s name %q is not valid in Kubernetes: use at most 63 lower-case letters, digits and '-', starting and ending with a letter or digit%s", what, name, hint)
		return false
	}
	return true
}

// buildSection reads service -> build object (A1), plus image and secrets.
func (p *parser) buildSection(n *yaml.Node, field string) []*BuildService {
	es, _ := p.mapping(n, field)
	var out []*BuildService
	for _, e := range es {
		f := join(field, e.key)
		p.checkName(e.keyNode, f, "service", e.key)
		out = append(out, p.buildService(e, f))
	}
	return out
}

func (p *parser) buildService(e entry, field string) *BuildService {
	bs := &BuildService{Service: e.key, Pos: p.pos(e.keyNode), Build: &compose.Build{Context: p.dir, Dockerfile: "Dockerfile"}}
	b := bs.Build
	d := deref(e.val)
	switch {
	case isNull(d):
		return bs
	case d.Kind == yaml.ScalarNode:
		b.Context = p.buildContext(d.Value)
		return bs
	case d.Kind != yaml.MappingNode:
		p.expected(e.val, field, "a build context path or a build object")
		return bs
	}
	es, _ := p.mapping(d, field)
	for _, be := range es {
		f := join(field, be.key)
		switch be.key {
		case "context":
			if s, ok := p.str(be.val, f); ok && s != "" {
				b.Context = p.buildContext(s)
			}
		case "dockerfile":
			if s, ok := p.str(be.val, f); ok && s != "" {
				b.Dockerfile = s
			}
		case "target":
			b.Target, _ = p.str(be.val, f)
		case "args":
			for _, a := range p.keyValues(be.val, f) {
				if b.Args == nil {
					b.Args = map[string]string{}
				}
				if a.hasValue {
					b.Args[a.key] = a.value
				} else if v, ok := p.lookup(a.key); ok {
					b.Args[a.key] = v
				}
			}
		case "export_cache":
			b.ExportCache, _ = p.str(be.val, f)
		case "cache_from":
			b.CacheFrom, _, _ = p.strOrList(be.val, f)
		case "image":
			bs.Image, _ = p.str(be.val, f)
		case "secrets":
			for _, s := range p.keyValues(be.val, f) {
				if !s.hasValue || s.value == "" {
					p.errorf(s.node, join(f, s.key), "expected the path of the secret's file")
					continue
				}
				if bs.Secrets == nil {
					bs.Secrets = map[string]string{}
				}
				bs.Secrets[s.key] = p.absPath(s.value)
			}
		default:
			if !strings.HasPrefix(be.key, "x-") {
				p.ignore(be.keyNode, f)
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
	dn := deref(n)
	if isNull(dn) {
		return d
	}
	if dn.Kind == yaml.SequenceNode {
		d.Commands = p.commands(dn, field)
		return d
	}
	if dn.Kind != yaml.MappingNode {
		p.expected(n, field, "a list of commands or an object with commands, compose and endpoints")
		return d
	}
	es, _ := p.mapping(dn, field)
	for _, e := range es {
		f := join(field, e.key)
		switch e.key {
		case "commands":
			d.Commands = p.commands(e.val, f)
		case "compose":
			d.Compose = p.composeFiles(e.val, f)
		case "endpoints":
			d.Endpoints = p.endpoints(e.val, f)
		default:
			if !strings.HasPrefix(e.key, "x-") {
				p.ignore(e.keyNode, f)
			}
		}
	}
	return d
}

// commands reads a list whose items are a command string or {name, command}.
func (p *parser) commands(n *yaml.Node, field string) []Command {
	d := deref(n)
	if isNull(d) {
		return nil
	}
	if d.Kind != yaml.SequenceNode {
		p.expected(n, field, "a list of commands (strings or {name, command})")
		return nil
	}
	var out []Command
	for i, item := range d.Content {
		f := index(field, i)
		id := deref(item)
		c := Command{Pos: p.pos(id)}
		switch {
		case id != nil && id.Kind == yaml.ScalarNode && !isNull(id):
			c.Command = id.Value
		case id != nil && id.Kind == yaml.MappingNode:
			es, _ := p.mapping(id, f)
			for _, e := range es {
				ef := join(f, e.key)
				switch e.key {
				case "name":
					c.Name, _ = p.str(e.val, ef)
				case "command":
					c.Command, _ = p.str(e.val, ef)
				default:
					p.ignore(e.keyNode, ef)
				}
			}
		default:
			p.expected(item, f, "a command string or {name, command}")
			continue
		}
		if strings.TrimSpace(c.Command) == "" {
			p.errorf(item, f, "the command is empty")
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
	d := deref(n)
	if isNull(d) {
		return nil
	}
	if d.Kind == yaml.SequenceNode {
		var out []ComposeFile
		for i, item := range d.Content {
			if c, ok := p.composeFile(item, index(field, i)); ok {
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
	d := deref(n)
	c := ComposeFile{Pos: p.pos(d)}
	var fileNode *yaml.Node
	switch {
	case d != nil && d.Kind == yaml.ScalarNode && !isNull(d):
		c.File, fileNode = d.Value, d
	case d != nil && d.Kind == yaml.MappingNode:
		es, _ := p.mapping(d, field)
		for _, e := range es {
			f := join(field, e.key)
			switch e.key {
			case "file":
				c.File, _ = p.str(e.val, f)
				fileNode = e.val
			case "services":
				vals, _, _ := p.strOrList(e.val, f)
				c.Services = vals
			default:
				p.ignore(e.keyNode, f)
			}
		}
	default:
		p.expected(n, field, "a Compose file path or {file, services}")
		return c, false
	}
	if strings.TrimSpace(c.File) == "" {
		if fileNode == nil {
			fileNode = d
		}
		p.errorf(fileNode, join(field, "file"), "expected the path of a Compose file")
		return c, false
	}
	c.File = p.absPath(c.File)
	if st, err := statFile(c.File); err != nil {
		p.errorf(fileNode, field, "Compose file %s: %v", c.File, err)
		return c, false
	} else if st {
		p.errorf(fileNode, field, "Compose file %s is a folder", c.File)
		return c, false
	}
	return c, true
}

// endpoints reads the three notations of A4: a list of routes, a map of endpoint name to routes
// (or to {labels, rules}), or {labels, rules}. Route services are not checked here: deploy
// commands create them.
func (p *parser) endpoints(n *yaml.Node, field string) []*compose.Endpoint {
	d := deref(n)
	if isNull(d) {
		return nil
	}
	switch d.Kind {
	case yaml.SequenceNode:
		return []*compose.Endpoint{{Rules: p.routes(d, field), Pos: p.pos(d)}}
	case yaml.MappingNode:
		es, _ := p.mapping(d, field)
		if isObjectNotation(es) {
			return []*compose.Endpoint{p.endpointObject(es, d, field)}
		}
		var out []*compose.Endpoint
		for _, e := range es {
			f := join(field, e.key)
			p.checkName(e.keyNode, f, "endpoint", e.key)
			var ep *compose.Endpoint
			if vd := deref(e.val); vd != nil && vd.Kind == yaml.MappingNode {
				inner, _ := p.mapping(vd, f)
				ep = p.endpointObject(inner, vd, f)
			} else {
				ep = &compose.Endpoint{Rules: p.routes(e.val, f)}
			}
			ep.Name, ep.Pos = e.key, p.pos(e.keyNode)
			out = append(out, ep)
		}
		return out
	}
	p.expected(n, field, "a list of routes, a mapping of endpoint name to routes, or {labels, rules}")
	return nil
}

func isObjectNotation(es []entry) bool {
	hasRules := false
	for _, e := range es {
		switch e.key {
		case "rules":
			hasRules = true
		case "labels":
		default:
			return false
		}
	}
	return hasRules
}

func (p *parser) endpointObject(es []entry, n *yaml.Node, field string) *compose.Endpoint {
	ep := &compose.Endpoint{Pos: p.pos(n)}
	for _, e := range es {
		f := join(field, e.key)
		switch e.key {
		case "labels":
			ep.Labels = p.stringMap(e.val, f)
		case "rules":
			ep.Rules = p.routes(e.val, f)
		default:
			p.ignore(e.keyNode, f)
		}
	}
	if ep.Rules == nil {
		p.errorf(n, field, "rules is required (a list of {path, service, port})")
	}
	return ep
}

func (p *parser) routes(n *yaml.Node, field string) []compose.Route {
	d := deref(n)
	if d == nil || d.Kind != yaml.SequenceNode {
		p.expected(n, field, "a list of routes {path, service, port}")
		return nil
	}
	out := []compose.Route{}
	for i, item := range d.Content {
		if r, ok := p.route(item, index(field, i)); ok {
			out = append(out, r)
		}
	}
	return out
}

func (p *parser) route(n *yaml.Node, field string) (compose.Route, bool) {
	r := compose.Route{Pos: p.pos(deref(n))}
	es, ok := p.mapping(n, field)
	if !ok {
		return r, false
	}
	var hasPort bool
	for _, e := range es {
		f := join(field, e.key)
		switch e.key {
		case "path":
			r.Path, _ = p.str(e.val, f)
		case "service":
			r.Service, _ = p.str(e.val, f)
		case "port":
			hasPort = true
			v, good := p.port(e.val, f)
			if !good {
				return r, false
			}
			r.Port = v
		default:
			p.ignore(e.keyNode, f)
		}
	}
	var missing []string
	if r.Path == "" {
		missing = append(missing, "path")
	}
	if r.Service == "" {
		missing = append(missing, "service")
	}
	if !hasPort {
		missing = append(missing, "port")
	}
	if len(missing) > 0 {
		p.errorf(n, field, "a route needs path, service and port; missing %s", strings.Join(missing, ", "))
		return r, false
	}
	if !strings.HasPrefix(r.Path, "/") {
		p.errorf(n, join(field, "path"), "expected a path starting with /, found %q", r.Path)
		return r, false
	}
	return r, true
}

// port reads a port number 1-65535.
func (p *parser) port(n *yaml.Node, field string) (int32, bool) {
	v, ok := p.int64Val(n, field)
	if !ok {
		return 0, false
	}
	if v < 1 || v > 65535 {
		p.errorf(n, field, "expected a port between 1 and 65535, found %d", v)
		return 0, false
	}
	return int32(v), true
}

// dependencies reads a list of repository URLs, or name -> {repository, manifest, branch,
// variables, wait, timeout}.
func (p *parser) dependencies(n *yaml.Node, field string) []*Dependency {
	d := deref(n)
	if isNull(d) {
		return nil
	}
	var out []*Dependency
	seen := map[string]bool{}
	switch d.Kind {
	case yaml.SequenceNode:
		for i, item := range d.Content {
			f := index(field, i)
			repo, ok := p.requiredStr(item, f)
			if !ok {
				continue
			}
			dep := &Dependency{Name: RepositoryName(repo), Repository: p.repository(repo), Pos: p.pos(deref(item))}
			if dep.Name == "" {
				p.errorf(item, f, "cannot tell a name from the repository %q; use the map notation (name: {repository: ...})", repo)
				continue
			}
			if seen[dep.Name] {
				p.errorf(item, f, "two dependencies are named %q; use the map notation to name them", dep.Name)
				continue
			}
			seen[dep.Name] = true
			out = append(out, dep)
		}
	case yaml.MappingNode:
		es, _ := p.mapping(d, field)
		for _, e := range es {
			f := join(field, e.key)
			p.checkName(e.keyNode, f, "dependency", e.key)
			out = append(out, p.dependency(e, f))
		}
	default:
		p.expected(n, field, "a list of repository URLs or a mapping of name to {repository, manifest, branch, variables, wait, timeout}")
	}
	return out
}

func (p *parser) dependency(e entry, field string) *Dependency {
	dep := &Dependency{Name: e.key, Pos: p.pos(e.keyNode)}
	d := deref(e.val)
	if d != nil && d.Kind == yaml.ScalarNode && !isNull(d) {
		// name: <repository> is a handy short form.
		dep.Repository = p.repository(d.Value)
		return dep
	}
	es, ok := p.mapping(e.val, field)
	if !ok {
		return dep
	}
	for _, de := range es {
		f := join(field, de.key)
		switch de.key {
		case "repository":
			if s, ok := p.requiredStr(de.val, f); ok {
				dep.Repository = p.repository(s)
			}
		case "manifest":
			dep.Manifest, _ = p.str(de.val, f)
		case "branch":
			dep.Branch, _ = p.str(de.val, f)
		case "variables":
			dep.Variables = p.stringMap(de.val, f)
		case "wait":
			dep.Wait, _ = p.boolVal(de.val, f)
		case "timeout":
			dep.Timeout, _ = p.duration(de.val, f)
		default:
			p.ignore(de.keyNode, f)
		}
	}
	if dep.Repository == "" {
		p.errorf(e.keyNode, join(field, "repository"), "repository is required (a git URL or a local path)")
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
	s, ok := p.str(n, field)
	if !ok {
		return 0, false
	}
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil || d <= 0 {
		p.errorf(n, field, "expected a positive duration with a unit (for example 30s, 5m, 1h), found %q", s)
		return 0, false
	}
	return d, true
}

// statFile reports whether path is a folder, or why it cannot be used.
func statFile(path string) (isDir bool, err error) {
	st, err := os.Stat(filepath.Clean(path))
	if err != nil {
		return false, unwrapPathError(err)
	}
	return st.IsDir(), nil
}

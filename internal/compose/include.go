package compose

import (
	"path/filepath"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/devtool/devtool/internal/safefile"
	"github.com/devtool/devtool/internal/yamlsrc"
)

// maxIncludeDepth bounds include and extends chains (cycles are reported before).
const maxIncludeDepth = 16

// readFile reads, parses and interpolates another Compose file; name is resolved against the
// folder of the file from (unless absolute). Errors are recorded at that file.
//
// With at set (an include or extends naming the file), a file that cannot be read is not
// recorded here: l.readErr says why, for the caller's error at that node.
func (l *loader) readFile(name, from string, at *yaml.Node) (doc *yaml.Node, abs string, ok bool) {
	p := name
	if !filepath.IsAbs(p) && from != l.opts.File {
		p = filepath.Join(l.dirOfFile(from), p)
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		l.Errs = append(l.Errs, &Error{Pos: Position{File: name}, Msg: err.Error()})
		return nil, "", false
	}
	display := p
	data, err := safefile.Read(abs, MaxFileSize)
	if err != nil {
		l.readErr = yamlsrc.UnwrapPathError(err)
		if at == nil {
			l.Errs = append(l.Errs, &Error{Pos: Position{File: display}, Msg: "cannot read the compose file: " + l.readErr.Error()})
		}
		return nil, "", false
	}
	l.dirs[display] = filepath.Dir(abs)
	doc, ok = l.ParseFile(data, display)
	if !ok {
		return nil, "", false
	}
	l.Interpolate(doc, "", nil)
	return doc, abs, true
}

// dirOfFile is the absolute folder of a file read by this load (by its display name).
func (l *loader) dirOfFile(file string) string {
	if d, ok := l.dirs[file]; ok {
		return d
	}
	return l.dir
}

// dirOf is the folder relative paths written at n resolve against: its file's folder.
func (l *loader) dirOf(n *yaml.Node) string {
	if n == nil {
		return l.dir
	}
	return l.dirOfFile(l.FileOf(n))
}

// withoutKey is a mapping's entries (merge keys applied) less one key, as a new mapping node.
func (l *loader) withoutKey(n *yaml.Node, key, field string) *yaml.Node {
	es, _ := l.Mapping(n, field)
	d := yamlsrc.Deref(n)
	out := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: d.Line, Column: d.Column}
	l.SetFileOf(out, d)
	for _, e := range es {
		if e.Key != key {
			out.Content = append(out.Content, e.KeyNode, e.Val)
		}
	}
	return out
}

func entry(es []yamlsrc.Entry, key string) *yamlsrc.Entry {
	for i := range es {
		if es[i].Key == key {
			return &es[i]
		}
	}
	return nil
}

// includes applies the top-level include of doc (read from file): each entry is a path, or
// {path: one or several files merged, project_directory, env_file}; the included project's
// services, volumes, secrets and configs join doc's, and redefining one is an error.
func (l *loader) includes(doc *yaml.Node, file string, depth int) *yaml.Node {
	root := yamlsrc.Deref(doc)
	if root == nil || root.Kind != yaml.MappingNode {
		return doc
	}
	top, _ := l.Mapping(root, "")
	inc := entry(top, "include")
	if inc == nil {
		return doc
	}
	out := l.withoutKey(root, "include", "")
	if depth >= maxIncludeDepth {
		l.Errorf(inc.KeyNode, "include", "includes nested more than %d deep (a cycle?)", maxIncludeDepth)
		return out
	}
	items := yamlsrc.Deref(inc.Val)
	if yamlsrc.IsNull(items) {
		return out
	}
	if items.Kind != yaml.SequenceNode {
		l.Expected(inc.Val, "include", "a list of files")
		return out
	}
	for i, item := range items.Content {
		f := yamlsrc.Index("include", i)
		var paths []string
		var pathNode = item
		if d := yamlsrc.Deref(item); d != nil && d.Kind == yaml.MappingNode {
			es, _ := l.Mapping(item, f)
			for _, e := range es {
				switch e.Key {
				case "path":
					paths, _, _ = l.StrOrList(e.Val, yamlsrc.Join(f, "path"))
					pathNode = e.Val
				case "project_directory", "env_file":
					l.Ignore(e.KeyNode, yamlsrc.Join(f, e.Key))
				default:
					if !strings.HasPrefix(e.Key, "x-") {
						l.Ignore(e.KeyNode, yamlsrc.Join(f, e.Key))
					}
				}
			}
		} else if s, ok := l.Str(item, f); ok && s != "" {
			paths = []string{s}
		}
		if len(paths) == 0 {
			l.Errorf(item, f, "expected a path to a Compose file")
			continue
		}
		var incDoc *yaml.Node
		var incName string
		for j, pth := range paths {
			abs := pth
			if !filepath.IsAbs(abs) {
				abs = filepath.Join(l.dirOfFile(file), pth)
			}
			abs = filepath.Clean(abs)
			if l.including[abs] {
				l.Errorf(pathNode, f, "include cycle: %s includes itself (through %s)", abs, file)
				incDoc = nil
				break
			}
			d, _, ok := l.readFileAt(abs, pathNode)
			if !ok {
				l.Errorf(pathNode, f, "cannot include %s: %s", pth, l.readReason())
				incDoc = nil
				break
			}
			if l.including == nil {
				l.including = map[string]bool{}
			}
			l.including[abs] = true
			d = l.includes(d, abs, depth+1)
			delete(l.including, abs)
			if j == 0 {
				incDoc, incName = d, abs
			} else {
				incDoc = l.merge(incDoc, d, "", 0)
			}
		}
		if incDoc != nil {
			out = l.mergeIncluded(out, incDoc, incName)
		}
	}
	return out
}

// readFileAt reads the Compose file at an absolute path.
func (l *loader) readFileAt(abs string, at *yaml.Node) (*yaml.Node, string, bool) {
	return l.readFile(abs, l.opts.File, at)
}

// readReason is why the last readFile with a node failed ("" when it parsed but had errors).
func (l *loader) readReason() string {
	if l.readErr == nil {
		return "it has errors"
	}
	defer func() { l.readErr = nil }()
	return l.readErr.Error()
}

// extends resolves services' extends (extends: name, or {service, file}): the extended
// service (itself resolved first) is the base the service's own fields merge into.
func (l *loader) extends(doc *yaml.Node) *yaml.Node {
	root := yamlsrc.Deref(doc)
	if root == nil || root.Kind != yaml.MappingNode {
		return doc
	}
	top, _ := l.Mapping(root, "")
	svcs := entry(top, "services")
	if svcs == nil || yamlsrc.Deref(svcs.Val) == nil || yamlsrc.Deref(svcs.Val).Kind != yaml.MappingNode {
		return doc
	}
	services, _ := l.Mapping(svcs.Val, "services")
	changed := false
	resolved := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: svcs.Val.Line, Column: svcs.Val.Column}
	l.SetFileOf(resolved, svcs.Val)
	for _, s := range services {
		v := l.resolveService(services, s, nil, 0)
		changed = changed || v != s.Val
		resolved.Content = append(resolved.Content, s.KeyNode, v)
	}
	if !changed {
		return doc
	}
	out := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: root.Line, Column: root.Column}
	l.SetFileOf(out, root)
	for _, e := range top {
		v := e.Val
		if e.Key == "services" {
			v = resolved
		}
		out.Content = append(out.Content, e.KeyNode, v)
	}
	return out
}

// resolveService returns the service s with its extends applied. stack holds the services
// being resolved ("file#name"), for cycles.
func (l *loader) resolveService(services []yamlsrc.Entry, s yamlsrc.Entry, stack []string, depth int) *yaml.Node {
	d := yamlsrc.Deref(s.Val)
	if d == nil || d.Kind != yaml.MappingNode {
		return s.Val
	}
	field := yamlsrc.Join("services", s.Key)
	es, _ := l.Mapping(d, field)
	ext := entry(es, "extends")
	if ext == nil {
		return s.Val
	}
	ef := yamlsrc.Join(field, "extends")
	self := l.FileOf(s.KeyNode) + "#" + s.Key
	for _, k := range stack {
		if k == self {
			l.Errorf(ext.KeyNode, ef, "extends cycle: %s", strings.Join(append(stack, self), " -> "))
			return l.withoutKey(d, "extends", field)
		}
	}
	if depth >= maxIncludeDepth {
		l.Errorf(ext.KeyNode, ef, "extends nested more than %d deep", maxIncludeDepth)
		return l.withoutKey(d, "extends", field)
	}
	var name, file string
	var fileNode *yaml.Node
	if ed := yamlsrc.Deref(ext.Val); ed != nil && ed.Kind == yaml.MappingNode {
		fs, _ := l.Mapping(ed, ef)
		for _, e := range fs {
			switch e.Key {
			case "service":
				name, _ = l.Str(e.Val, yamlsrc.Join(ef, "service"))
			case "file":
				file, _ = l.Str(e.Val, yamlsrc.Join(ef, "file"))
				fileNode = e.Val
			default:
				l.Ignore(e.KeyNode, yamlsrc.Join(ef, e.Key))
			}
		}
	} else {
		name, _ = l.Str(ext.Val, ef)
	}
	own := l.withoutKey(d, "extends", field)
	if name == "" {
		l.Errorf(ext.Val, ef, "the service to extend is required (extends: name, or extends: {service: name, file: path})")
		return own
	}
	pool := services
	if file != "" {
		abs := file
		if !filepath.IsAbs(abs) {
			abs = filepath.Join(l.dirOf(fileNode), file)
		}
		other, _, ok := l.readFileAt(filepath.Clean(abs), fileNode)
		if !ok {
			l.Errorf(fileNode, yamlsrc.Join(ef, "file"), "cannot read %s: %s", file, l.readReason())
			return own
		}
		ot, _ := l.Mapping(yamlsrc.Deref(other), "")
		oe := entry(ot, "services")
		if oe == nil {
			l.Errorf(fileNode, yamlsrc.Join(ef, "file"), "%s has no services", file)
			return own
		}
		pool, _ = l.Mapping(oe.Val, "services")
	}
	base := entry(pool, name)
	if base == nil {
		where := "this file"
		if file != "" {
			where = file
		}
		l.Errorf(ext.Val, ef, "service %q to extend is not defined in %s", name, where)
		return own
	}
	baseVal := l.resolveService(pool, *base, append(stack, self), depth+1)
	return l.merge(baseVal, own, field, 0)
}

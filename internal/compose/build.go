package compose

import (
	"strings"

	"gopkg.in/yaml.v3"
)

// build reads a build section: a string (the context) or an object.
func (l *loader) build(n *yaml.Node, field string) *Build {
	b := &Build{Context: l.dir, Dockerfile: "Dockerfile"}
	d := deref(n)
	if isNull(d) {
		return b
	}
	if d.Kind == yaml.ScalarNode {
		b.Context = l.buildContext(d.Value)
		return b
	}
	if d.Kind != yaml.MappingNode {
		l.expected(n, field, "a build context path or a build object")
		return b
	}
	es, _ := l.mapping(n, field)
	for _, e := range es {
		f := joinField(field, e.key)
		switch e.key {
		case "context":
			if s, ok := l.str(e.val, f); ok && s != "" {
				b.Context = l.buildContext(s)
			}
		case "dockerfile":
			if s, ok := l.str(e.val, f); ok && s != "" {
				b.Dockerfile = s
			}
		case "target":
			b.Target, _ = l.str(e.val, f)
		case "args":
			b.Args = l.buildArgs(e.val, f)
		case "export_cache":
			b.ExportCache, _ = l.str(e.val, f)
		case "cache_from":
			b.CacheFrom, _ = l.strList(e.val, f)
		default:
			if !strings.HasPrefix(e.key, "x-") {
				l.ignore(e.keyNode, f)
			}
		}
	}
	return b
}

// buildContext makes a local context absolute; a remote one (git or http URL) is kept.
func (l *loader) buildContext(s string) string {
	if strings.Contains(s, "://") || strings.HasPrefix(s, "git@") {
		return s
	}
	return l.absPath(s)
}

// buildArgs reads args. Values were interpolated like every value; a bare NAME takes its value
// from the variable sources and is left out when they do not define it, so the Dockerfile's
// default applies.
func (l *loader) buildArgs(n *yaml.Node, field string) map[string]string {
	kvs, _ := l.keyValues(n, field)
	if len(kvs) == 0 {
		return nil
	}
	out := make(map[string]string, len(kvs))
	for _, e := range kvs {
		if e.Value != nil {
			out[e.Key] = *e.Value
		} else if v, ok := l.lookup(e.Key); ok {
			out[e.Key] = v
		}
	}
	return out
}

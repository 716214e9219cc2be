package compose

import (
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/devtool/devtool/internal/yamlsrc"
)

// build reads a build section: a string (the context) or an object.
func (l *loader) build(n *yaml.Node, field string) *Build {
	b := &Build{Context: l.dirOf(n), Dockerfile: "Dockerfile"}
	d := yamlsrc.Deref(n)
	if yamlsrc.IsNull(d) {
		return b
	}
	if d.Kind == yaml.ScalarNode {
		b.Context = l.buildContext(d, d.Value)
		return b
	}
	if d.Kind != yaml.MappingNode {
		l.Expected(n, field, "a build context path or a build object")
		return b
	}
	es, _ := l.Mapping(n, field)
	for _, e := range es {
		f := yamlsrc.Join(field, e.Key)
		switch e.Key {
		case "context":
			if s, ok := l.Str(e.Val, f); ok && s != "" {
				b.Context = l.buildContext(e.Val, s)
			}
		case "dockerfile":
			if s, ok := l.Str(e.Val, f); ok && s != "" {
				b.Dockerfile = s
			}
		case "target":
			b.Target, _ = l.Str(e.Val, f)
		case "args":
			b.Args = l.buildArgs(e.Val, f)
		case "export_cache":
			b.ExportCache, _ = l.Str(e.Val, f)
		case "cache_from":
			b.CacheFrom, _ = l.StrList(e.Val, f)
		default:
			if !strings.HasPrefix(e.Key, "x-") {
				l.Ignore(e.KeyNode, f)
			}
		}
	}
	return b
}

// buildContext makes a local context absolute; a remote one (git or http URL) is kept.
func (l *loader) buildContext(n *yaml.Node, s string) string {
	if IsRemoteContext(s) {
		return s
	}
	return l.absPath(n, s)
}

// IsRemoteContext reports whether a build context is a git or http URL rather than a folder.
func IsRemoteContext(s string) bool {
	return strings.Contains(s, "://") || strings.HasPrefix(s, "git@")
}

// buildArgs reads args. Values were interpolated like every value; a bare NAME takes its value
// from the variable sources and is left out when they do not define it, so the Dockerfile's
// default applies.
func (l *loader) buildArgs(n *yaml.Node, field string) map[string]string {
	kvs, _ := l.KeyValues(n, field)
	if len(kvs) == 0 {
		return nil
	}
	out := make(map[string]string, len(kvs))
	for _, e := range kvs {
		if e.HasValue {
			out[e.Key] = e.Value
		} else if v, ok := l.Lookup(e.Key); ok {
			out[e.Key] = v
		}
	}
	return out
}

package compose

import (
	"path"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/devtool/devtool/internal/yamlsrc"
)

// Several Compose files merge in order with Compose's merge rules: mappings merge key by key,
// scalars are replaced, and the lists below merge by a key (ports, service volumes, secrets,
// configs) or by name (environment, labels, annotations, build args, depends_on); command,
// entrypoint and healthcheck.test are replaced; other lists are appended without repeats.
// The merge works on the parsed nodes, so every value keeps the file and line that set it.

// mergeRule says how a field merges, by its path inside a service ("environment",
// "build.args", "deploy.labels") or at the top level.
type mergeRule int

const (
	mergeDefault   mergeRule = iota // mappings merge, lists append without repeats, scalars replace
	mergeReplace                    // the override replaces the base
	mergeKeyValues                  // mapping or NAME=value list, merged by name
	mergeByKey                      // list items merged by mergeKey
	mergeDepends                    // depends_on: list or mapping, merged by service name
)

var serviceRules = map[string]mergeRule{
	"command": mergeReplace, "entrypoint": mergeReplace, "healthcheck.test": mergeReplace,
	"environment": mergeKeyValues, "labels": mergeKeyValues, "annotations": mergeKeyValues,
	"build.args": mergeKeyValues, "build.labels": mergeKeyValues, "deploy.labels": mergeKeyValues,
	"extra_hosts": mergeKeyValues, "sysctls": mergeKeyValues,
	"ports": mergeByKey, "volumes": mergeByKey, "secrets": mergeByKey, "configs": mergeByKey,
	"depends_on": mergeDepends,
}

// maxMergeDepth bounds the recursion of merge over nested mappings.
const maxMergeDepth = 64

// merge returns base with over merged into it. field is the dotted path ("services.web.ports").
func (l *loader) merge(base, over *yaml.Node, field string, depth int) *yaml.Node {
	b, o := yamlsrc.Deref(base), yamlsrc.Deref(over)
	if b == nil || yamlsrc.IsNull(b) {
		return over
	}
	if o == nil || yamlsrc.IsNull(o) {
		return base
	}
	if depth > maxMergeDepth {
		return over
	}
	switch ruleFor(field) {
	case mergeReplace:
		return over
	case mergeKeyValues:
		if isKVShape(b) && isKVShape(o) {
			return l.mergeKV(b, o)
		}
		return over
	case mergeDepends:
		return l.mergeMappings(l.dependsMapping(b), l.dependsMapping(o), field, depth)
	case mergeByKey:
		if b.Kind == yaml.SequenceNode && o.Kind == yaml.SequenceNode {
			return l.mergeList(b, o, field)
		}
		return over
	}
	switch {
	case b.Kind == yaml.MappingNode && o.Kind == yaml.MappingNode:
		return l.mergeMappings(b, o, field, depth)
	case b.Kind == yaml.SequenceNode && o.Kind == yaml.SequenceNode:
		return l.mergeList(b, o, field)
	}
	return over
}

// ruleFor finds the rule of a field: inside a service, by its path below the service.
func ruleFor(field string) mergeRule {
	rest, ok := strings.CutPrefix(field, "services.")
	if !ok {
		return mergeDefault
	}
	_, sub, ok := strings.Cut(rest, ".")
	if !ok {
		return mergeDefault
	}
	return serviceRules[sub]
}

// mergeMappings merges two mappings entry by entry (merge keys applied first); keys keep
// the base's order, new keys follow in the override's order.
func (l *loader) mergeMappings(b, o *yaml.Node, field string, depth int) *yaml.Node {
	be, _ := l.Mapping(b, field)
	oe, _ := l.Mapping(o, field)
	out := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: b.Line, Column: b.Column}
	l.SetFileOf(out, b)
	index := map[string]int{}
	for _, e := range be {
		index[e.Key] = len(out.Content)
		out.Content = append(out.Content, e.KeyNode, e.Val)
	}
	for _, e := range oe {
		if i, ok := index[e.Key]; ok {
			out.Content[i+1] = l.merge(out.Content[i+1], e.Val, yamlsrc.Join(field, e.Key), depth+1)
			continue
		}
		index[e.Key] = len(out.Content)
		out.Content = append(out.Content, e.KeyNode, e.Val)
	}
	return out
}

// mergeList appends the override's items to the base's, an item with the same key as a base
// item replacing it in place.
func (l *loader) mergeList(b, o *yaml.Node, field string) *yaml.Node {
	out := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Line: b.Line, Column: b.Column}
	l.SetFileOf(out, b)
	index := map[string]int{}
	add := func(item *yaml.Node) {
		k := mergeKey(field, item)
		if i, ok := index[k]; ok && k != "" {
			out.Content[i] = item
			return
		}
		if k != "" {
			index[k] = len(out.Content)
		}
		out.Content = append(out.Content, item)
	}
	for _, item := range b.Content {
		add(item)
	}
	for _, item := range o.Content {
		add(item)
	}
	return out
}

// mergeKey is what identifies a list item for merging: a service volume by its container
// path, a port by its text (or target/published/protocol), a secret or config by its target
// or source, any other scalar by its value. "" never matches (mappings of other lists).
func mergeKey(field string, item *yaml.Node) string {
	d := yamlsrc.Deref(item)
	if d == nil {
		return ""
	}
	sub := field[strings.LastIndex(field, ".")+1:]
	if d.Kind == yaml.MappingNode {
		get := func(k string) string {
			for i := 0; i+1 < len(d.Content); i += 2 {
				if d.Content[i].Value == k {
					if v := yamlsrc.Deref(d.Content[i+1]); v != nil {
						return v.Value
					}
				}
			}
			return ""
		}
		switch sub {
		case "volumes":
			return "target:" + path.Clean(get("target"))
		case "ports":
			return "port:" + get("target") + "/" + get("published") + "/" + strings.ToLower(get("protocol"))
		case "secrets", "configs":
			return "source:" + get("source")
		}
		return ""
	}
	if d.Kind != yaml.ScalarNode {
		return ""
	}
	switch sub {
	case "volumes":
		parts := strings.Split(d.Value, ":")
		if len(parts) == 1 {
			return "target:" + path.Clean(parts[0])
		}
		return "target:" + path.Clean(parts[1])
	case "secrets", "configs":
		return "source:" + d.Value
	}
	return "value:" + d.Value
}

func isKVShape(n *yaml.Node) bool {
	return n.Kind == yaml.MappingNode || n.Kind == yaml.SequenceNode
}

// mergeKV merges two "mapping or NAME=value list" values by name into a list of NAME=value
// scalars (a name without value stays "NAME"), each keeping its position.
func (l *loader) mergeKV(b, o *yaml.Node) *yaml.Node {
	out := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Line: b.Line, Column: b.Column}
	l.SetFileOf(out, b)
	index := map[string]int{}
	for _, n := range []*yaml.Node{b, o} {
		for _, item := range l.kvItems(n) {
			name, _, _ := strings.Cut(item.Value, "=")
			if i, ok := index[name]; ok {
				out.Content[i] = item
				continue
			}
			index[name] = len(out.Content)
			out.Content = append(out.Content, item)
		}
	}
	return out
}

// kvItems turns a mapping into NAME=value scalar nodes positioned at their keys; a list's
// items are kept as they are.
func (l *loader) kvItems(n *yaml.Node) []*yaml.Node {
	if n.Kind == yaml.SequenceNode {
		var out []*yaml.Node
		for _, item := range n.Content {
			if d := yamlsrc.Deref(item); d != nil && d.Kind == yaml.ScalarNode {
				out = append(out, d)
			}
		}
		return out
	}
	es, _ := l.Mapping(n, "")
	out := make([]*yaml.Node, 0, len(es))
	for _, e := range es {
		v := e.Key
		if !yamlsrc.IsNull(e.Val) {
			if d := yamlsrc.Deref(e.Val); d.Kind == yaml.ScalarNode {
				v += "=" + d.Value
			}
		}
		item := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: v, Line: e.KeyNode.Line, Column: e.KeyNode.Column}
		l.SetFileOf(item, e.KeyNode)
		out = append(out, item)
	}
	return out
}

// dependsMapping turns the list form of depends_on into the mapping form (service_started).
func (l *loader) dependsMapping(n *yaml.Node) *yaml.Node {
	if n.Kind != yaml.SequenceNode {
		return n
	}
	out := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: n.Line, Column: n.Column}
	l.SetFileOf(out, n)
	for _, item := range n.Content {
		d := yamlsrc.Deref(item)
		if d == nil || d.Kind != yaml.ScalarNode {
			return n // not a list of names: leave it for the reader's error
		}
		val := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: d.Line, Column: d.Column}
		l.SetFileOf(val, d)
		out.Content = append(out.Content, d, val)
	}
	return out
}

// mergeIncluded merges an included file's top-level mapping into the including one: an
// included service, volume, secret or config with the name of one already defined is an
// error naming both places, as in Compose.
func (l *loader) mergeIncluded(doc, inc *yaml.Node, incFile string) *yaml.Node {
	d, i := yamlsrc.Deref(doc), yamlsrc.Deref(inc)
	if i == nil || yamlsrc.IsNull(i) || i.Kind != yaml.MappingNode {
		return doc
	}
	if d == nil || yamlsrc.IsNull(d) {
		return i
	}
	if d.Kind != yaml.MappingNode {
		return doc
	}
	de, _ := l.Mapping(d, "")
	ie, _ := l.Mapping(i, "")
	out := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: d.Line, Column: d.Column}
	l.SetFileOf(out, d)
	index := map[string]int{}
	for _, e := range de {
		index[e.Key] = len(out.Content)
		out.Content = append(out.Content, e.KeyNode, e.Val)
	}
	for _, e := range ie {
		j, ok := index[e.Key]
		if !ok {
			index[e.Key] = len(out.Content)
			out.Content = append(out.Content, e.KeyNode, e.Val)
			continue
		}
		switch e.Key {
		case "services", "volumes", "secrets", "configs", "networks":
			have, _ := l.Mapping(out.Content[j+1], e.Key)
			seen := map[string]yamlsrc.Entry{}
			for _, h := range have {
				seen[h.Key] = h
			}
			add, _ := l.Mapping(e.Val, e.Key)
			m := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
			l.SetFileOf(m, out.Content[j+1])
			for _, h := range have {
				m.Content = append(m.Content, h.KeyNode, h.Val)
			}
			for _, a := range add {
				if h, dup := seen[a.Key]; dup {
					l.Errorf(h.KeyNode, yamlsrc.Join(e.Key, a.Key), "%s is also defined in the included file %s (%s); an included file cannot redefine it",
						strings.TrimSuffix(e.Key, "s")+" "+yamlsrc.Quote(a.Key), incFile, l.Pos(a.KeyNode))
					continue
				}
				m.Content = append(m.Content, a.KeyNode, a.Val)
			}
			out.Content[j+1] = m
		default:
			// Other top-level keys (name, x-*): the including file's value stays.
		}
	}
	return out
}

package manifest

import (
	"fmt"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/devtool/devtool/internal/compose"
)

// This file holds typed accessors over yaml.v3 nodes, with the same rules as the Compose loader
// (merge keys, aliases, "expected X, found Y" messages). Every accessor reports a positioned
// *compose.Error when the node has the wrong shape and returns ok=false, so parsing goes on and
// finds every problem in one pass.

type entry struct {
	key     string
	keyNode *yaml.Node
	val     *yaml.Node
}

const maxAliasHops = 64

func deref(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < maxAliasHops; i++ {
		n = n.Alias
	}
	if n != nil && n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		return deref(n.Content[0])
	}
	return n
}

func isNull(n *yaml.Node) bool {
	n = deref(n)
	return n == nil || (n.Kind == yaml.ScalarNode && n.Tag == "!!null") || n.Kind == yaml.DocumentNode
}

func kindName(n *yaml.Node) string {
	n = deref(n)
	switch {
	case isNull(n):
		return "nothing (null)"
	case n.Kind == yaml.MappingNode:
		return "a mapping"
	case n.Kind == yaml.SequenceNode:
		return "a list"
	case n.Tag == "!!int" || n.Tag == "!!float":
		return fmt.Sprintf("the number %s", n.Value)
	case n.Tag == "!!bool":
		return fmt.Sprintf("the boolean %s", n.Value)
	default:
		return fmt.Sprintf("the string %q", n.Value)
	}
}

func (p *parser) pos(n *yaml.Node) compose.Position {
	if n == nil {
		return compose.Position{File: p.file}
	}
	return compose.Position{File: p.file, Line: n.Line, Column: n.Column}
}

func (p *parser) errorf(n *yaml.Node, field, format string, args ...any) {
	p.errs = append(p.errs, &compose.Error{Pos: p.pos(n), Field: field, Msg: fmt.Sprintf(format, args...)})
}

func (p *parser) expected(n *yaml.Node, field, what string) {
	p.errorf(n, field, "expected %s, found %s", what, kindName(n))
}

// mapping returns the entries of a mapping with merge keys applied (written keys win, then
// the first merged mapping). Null is an empty mapping.
func (p *parser) mapping(n *yaml.Node, field string) ([]entry, bool) {
	d := deref(n)
	if isNull(d) {
		return nil, true
	}
	if d.Kind != yaml.MappingNode {
		p.expected(n, field, "a mapping")
		return nil, false
	}
	return p.entries(d, field, 0), true
}

func (p *parser) entries(n *yaml.Node, field string, depth int) []entry {
	if es, ok := p.merged[n]; ok {
		return es
	}
	p.merged[n] = nil // in progress: a merge cycle contributes nothing
	var out []entry
	seen := map[string]bool{}
	var merges []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := deref(n.Content[i]), n.Content[i+1]
		if k == nil || k.Kind != yaml.ScalarNode {
			p.errorf(n.Content[i], field, "mapping keys must be strings, found %s", kindName(k))
			continue
		}
		if k.Tag == "!!merge" {
			merges = append(merges, v)
			continue
		}
		if seen[k.Value] {
			p.errorf(k, join(field, k.Value), "key is defined twice in the same mapping")
			continue
		}
		seen[k.Value] = true
		out = append(out, entry{key: k.Value, keyNode: k, val: v})
	}
	if depth > maxAliasHops {
		p.errorf(n, field, "merge keys (<<) nested too deeply")
		merges = nil
	}
	for _, m := range merges {
		var sources []*yaml.Node
		md := deref(m)
		switch {
		case md != nil && md.Kind == yaml.MappingNode:
			sources = []*yaml.Node{md}
		case md != nil && md.Kind == yaml.SequenceNode:
			for _, item := range md.Content {
				if id := deref(item); id != nil && id.Kind == yaml.MappingNode {
					sources = append(sources, id)
				} else {
					p.expected(item, join(field, "<<"), "a mapping to merge")
				}
			}
		default:
			p.expected(m, join(field, "<<"), "a mapping or a list of mappings to merge")
		}
		for _, src := range sources {
			for _, e := range p.entries(src, field, depth+1) {
				if !seen[e.key] {
					seen[e.key] = true
					out = append(out, e)
				}
			}
		}
	}
	p.merged[n] = out
	return out
}

// str reads a scalar as written (numbers and booleans too). Null gives "".
func (p *parser) str(n *yaml.Node, field string) (string, bool) {
	d := deref(n)
	if isNull(d) {
		return "", true
	}
	if d.Kind != yaml.ScalarNode {
		p.expected(n, field, "a string")
		return "", false
	}
	return d.Value, true
}

// requiredStr reads a non-empty string.
func (p *parser) requiredStr(n *yaml.Node, field string) (string, bool) {
	s, ok := p.str(n, field)
	if ok && strings.TrimSpace(s) == "" {
		p.errorf(n, field, "expected a non-empty string")
		return "", false
	}
	return s, ok
}

func (p *parser) strList(n *yaml.Node, field string) ([]string, bool) {
	d := deref(n)
	if isNull(d) {
		return nil, true
	}
	if d.Kind != yaml.SequenceNode {
		p.expected(n, field, "a list of strings")
		return nil, false
	}
	out := make([]string, 0, len(d.Content))
	ok := true
	for i, item := range d.Content {
		s, good := p.str(item, index(field, i))
		ok = ok && good
		out = append(out, s)
	}
	return out, ok
}

// strOrList reads a string or a list of strings; isString tells which was written.
func (p *parser) strOrList(n *yaml.Node, field string) (vals []string, isString, ok bool) {
	d := deref(n)
	if d != nil && d.Kind == yaml.ScalarNode && !isNull(d) {
		return []string{d.Value}, true, true
	}
	if d != nil && d.Kind != yaml.SequenceNode && !isNull(d) {
		p.expected(n, field, "a string or a list of strings")
		return nil, false, false
	}
	vals, ok = p.strList(n, field)
	return vals, false, ok
}

func (p *parser) int64Val(n *yaml.Node, field string) (int64, bool) {
	d := deref(n)
	if d == nil || d.Kind != yaml.ScalarNode || isNull(d) {
		p.expected(n, field, "an integer")
		return 0, false
	}
	v, err := strconv.ParseInt(strings.TrimSpace(d.Value), 10, 64)
	if err != nil {
		p.expected(n, field, "an integer")
		return 0, false
	}
	return v, true
}

func (p *parser) boolVal(n *yaml.Node, field string) (bool, bool) {
	d := deref(n)
	if d != nil && d.Kind == yaml.ScalarNode {
		switch strings.ToLower(strings.TrimSpace(d.Value)) {
		case "true", "yes", "on":
			return true, true
		case "false", "no", "off":
			return false, true
		}
	}
	p.expected(n, field, "true or false")
	return false, false
}

// keyValues reads a mapping or a list of "NAME=value"; a bare NAME (or a null value) has
// hasValue false.
type kv struct {
	key      string
	value    string
	hasValue bool
	node     *yaml.Node
}

func (p *parser) keyValues(n *yaml.Node, field string) []kv {
	d := deref(n)
	if isNull(d) {
		return nil
	}
	var out []kv
	switch d.Kind {
	case yaml.MappingNode:
		es, _ := p.mapping(d, field)
		for _, e := range es {
			if isNull(e.val) {
				out = append(out, kv{key: e.key, node: e.keyNode})
				continue
			}
			if s, ok := p.str(e.val, join(field, e.key)); ok {
				out = append(out, kv{key: e.key, value: s, hasValue: true, node: e.keyNode})
			}
		}
	case yaml.SequenceNode:
		for i, item := range d.Content {
			s, ok := p.str(item, index(field, i))
			if !ok {
				continue
			}
			name, value, has := strings.Cut(s, "=")
			if strings.TrimSpace(name) == "" {
				p.errorf(item, index(field, i), "expected NAME=value, found %q", s)
				continue
			}
			out = append(out, kv{key: name, value: value, hasValue: has, node: deref(item)})
		}
	default:
		p.expected(n, field, "a mapping or a list of NAME=value strings")
	}
	return out
}

// stringMap reads a map of strings (a mapping or a NAME=value list); a bare name maps to "".
func (p *parser) stringMap(n *yaml.Node, field string) map[string]string {
	kvs := p.keyValues(n, field)
	if len(kvs) == 0 {
		return nil
	}
	out := make(map[string]string, len(kvs))
	for _, e := range kvs {
		out[e.key] = e.value
	}
	return out
}

func join(parent, key string) string {
	if parent == "" {
		return key
	}
	return parent + "." + key
}

func index(field string, i int) string { return fmt.Sprintf("%s[%d]", field, i) }

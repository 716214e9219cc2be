package compose

import (
	"fmt"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// This file holds the typed accessors over yaml.v3 nodes. Every accessor reports a positioned
// *Error when the node has the wrong shape and returns ok=false, so callers simply skip the
// value and loading goes on to find more problems.

// entry is one key of a mapping after merge keys (<<) have been applied.
type entry struct {
	key     string
	keyNode *yaml.Node
	val     *yaml.Node
}

// maxAliasHops bounds alias chains; yaml.v3 already rejects self-containing anchors, this is
// only a guard so no input can loop.
const maxAliasHops = 64

// deref follows aliases to the node they name.
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
	return n == nil || (n.Kind == yaml.ScalarNode && n.Tag == "!!null")
}

// kindName describes a node for "expected X, found Y" messages.
func kindName(n *yaml.Node) string {
	n = deref(n)
	switch {
	case n == nil || isNull(n):
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

func (l *loader) pos(n *yaml.Node) Position {
	if n == nil {
		return Position{File: l.file}
	}
	return Position{File: l.file, Line: n.Line, Column: n.Column}
}

func (l *loader) errorf(n *yaml.Node, field, format string, args ...any) {
	l.errs = append(l.errs, &Error{Pos: l.pos(n), Field: field, Msg: fmt.Sprintf(format, args...)})
}

func (l *loader) expected(n *yaml.Node, field, what string) {
	l.errorf(n, field, "expected %s, found %s", what, kindName(n))
}

// mapping returns the entries of a mapping node with merge keys applied: keys written in the
// mapping win over merged ones, and among several merged mappings the first wins (YAML merge
// key rules). A null node is an empty mapping.
func (l *loader) mapping(n *yaml.Node, field string) ([]entry, bool) {
	d := deref(n)
	if isNull(d) {
		return nil, true
	}
	if d.Kind != yaml.MappingNode {
		l.expected(n, field, "a mapping")
		return nil, false
	}
	return l.entries(d, field, 0), true
}

func (l *loader) entries(n *yaml.Node, field string, depth int) []entry {
	if es, ok := l.merged[n]; ok {
		return es
	}
	// Mark in progress: a merge chain that comes back here contributes nothing.
	l.merged[n] = nil
	var out []entry
	seen := map[string]bool{}
	var merges []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := deref(n.Content[i]), n.Content[i+1]
		if k == nil || k.Kind != yaml.ScalarNode {
			l.errorf(n.Content[i], field, "mapping keys must be strings, found %s", kindName(k))
			continue
		}
		if k.Tag == "!!merge" {
			merges = append(merges, v)
			continue
		}
		if seen[k.Value] {
			l.errorf(k, joinField(field, k.Value), "key is defined twice in the same mapping")
			continue
		}
		seen[k.Value] = true
		out = append(out, entry{key: k.Value, keyNode: k, val: v})
	}
	if depth > maxAliasHops {
		l.errorf(n, field, "merge keys (<<) nested too deeply")
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
				id := deref(item)
				if id == nil || id.Kind != yaml.MappingNode {
					l.expected(item, joinField(field, "<<"), "a mapping to merge")
					continue
				}
				sources = append(sources, id)
			}
		default:
			l.expected(m, joinField(field, "<<"), "a mapping or a list of mappings to merge")
		}
		for _, src := range sources {
			for _, e := range l.entries(src, field, depth+1) {
				if !seen[e.key] {
					seen[e.key] = true
					out = append(out, e)
				}
			}
		}
	}
	l.merged[n] = out
	return out
}

// str reads a scalar as a string (numbers and booleans as written). Null gives "".
func (l *loader) str(n *yaml.Node, field string) (string, bool) {
	d := deref(n)
	if isNull(d) {
		return "", true
	}
	if d.Kind != yaml.ScalarNode {
		l.expected(n, field, "a string")
		return "", false
	}
	return d.Value, true
}

// strList reads a list of scalars.
func (l *loader) strList(n *yaml.Node, field string) ([]string, bool) {
	d := deref(n)
	if isNull(d) {
		return nil, true
	}
	if d.Kind != yaml.SequenceNode {
		l.expected(n, field, "a list of strings")
		return nil, false
	}
	out := make([]string, 0, len(d.Content))
	ok := true
	for i, item := range d.Content {
		s, good := l.str(item, index(field, i))
		ok = ok && good
		out = append(out, s)
	}
	return out, ok
}

// strOrList reads a string or a list of strings; isString tells which was written.
func (l *loader) strOrList(n *yaml.Node, field string) (vals []string, isString, ok bool) {
	d := deref(n)
	if d != nil && d.Kind == yaml.ScalarNode && !isNull(d) {
		return []string{d.Value}, true, true
	}
	if d != nil && d.Kind != yaml.SequenceNode && !isNull(d) {
		l.expected(n, field, "a string or a list of strings")
		return nil, false, false
	}
	vals, ok = l.strList(n, field)
	return vals, false, ok
}

// intVal reads an integer, also from a string (interpolated values are strings).
func (l *loader) intVal(n *yaml.Node, field string) (int, bool) {
	d := deref(n)
	if d == nil || d.Kind != yaml.ScalarNode || isNull(d) {
		l.expected(n, field, "an integer")
		return 0, false
	}
	v, err := strconv.ParseInt(strings.TrimSpace(d.Value), 10, 32)
	if err != nil {
		l.expected(n, field, "an integer")
		return 0, false
	}
	return int(v), true
}

// boolVal reads a boolean; yes/no/on/off are accepted as Compose does.
func (l *loader) boolVal(n *yaml.Node, field string) (bool, bool) {
	d := deref(n)
	if d != nil && d.Kind == yaml.ScalarNode {
		switch strings.ToLower(strings.TrimSpace(d.Value)) {
		case "true", "yes", "on":
			return true, true
		case "false", "no", "off":
			return false, true
		}
	}
	l.expected(n, field, "true or false")
	return false, false
}

// kv is one entry of a "map or list of NAME=value" field; Value is nil for a bare NAME (list)
// or a null value (map), which Compose reads as "take it from the environment".
type kv struct {
	Key   string
	Value *string
	Node  *yaml.Node
}

// keyValues reads labels, environment and build args: a mapping, or a list of "NAME=value".
func (l *loader) keyValues(n *yaml.Node, field string) ([]kv, bool) {
	d := deref(n)
	if isNull(d) {
		return nil, true
	}
	var out []kv
	switch d.Kind {
	case yaml.MappingNode:
		es, _ := l.mapping(d, field)
		for _, e := range es {
			ef := joinField(field, e.key)
			vd := deref(e.val)
			if isNull(vd) {
				out = append(out, kv{Key: e.key, Node: e.keyNode})
				continue
			}
			s, ok := l.str(e.val, ef)
			if !ok {
				continue
			}
			out = append(out, kv{Key: e.key, Value: &s, Node: e.keyNode})
		}
	case yaml.SequenceNode:
		for i, item := range d.Content {
			s, ok := l.str(item, index(field, i))
			if !ok {
				continue
			}
			name, value, hasValue := strings.Cut(s, "=")
			if name == "" {
				l.errorf(item, index(field, i), "expected NAME=value, found %q", s)
				continue
			}
			e := kv{Key: name, Node: deref(item)}
			if hasValue {
				e.Value = &value
			}
			out = append(out, e)
		}
	default:
		l.expected(n, field, "a mapping or a list of NAME=value strings")
		return nil, false
	}
	return out, true
}

// stringMap reads a map of string to string given as a mapping or a "k=v" list; a key
// without value maps to "".
func (l *loader) stringMap(n *yaml.Node, field string) map[string]string {
	kvs, _ := l.keyValues(n, field)
	if len(kvs) == 0 {
		return nil
	}
	out := make(map[string]string, len(kvs))
	for _, e := range kvs {
		if e.Value != nil {
			out[e.Key] = *e.Value
		} else {
			out[e.Key] = ""
		}
	}
	return out
}

func joinField(parent, key string) string {
	if parent == "" {
		return key
	}
	return parent + "." + key
}

func index(field string, i int) string {
	return fmt.Sprintf("%s[%d]", field, i)
}

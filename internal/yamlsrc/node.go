package yamlsrc

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/mattn/go-shellwords"
	"gopkg.in/yaml.v3"
)

// maxAliasHops bounds alias chains and merge-key nesting; yaml.v3 already rejects
// self-containing anchors, this is only a guard so no input can loop.
const maxAliasHops = 64

// Deref follows aliases to the node they name, and a document to its content.
func Deref(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < maxAliasHops; i++ {
		n = n.Alias
	}
	if n != nil && n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		return Deref(n.Content[0])
	}
	return n
}

// IsNull tells whether n (after Deref) holds nothing: no node, a null scalar, or an empty
// document.
func IsNull(n *yaml.Node) bool {
	n = Deref(n)
	return n == nil || (n.Kind == yaml.ScalarNode && n.Tag == "!!null") || n.Kind == yaml.DocumentNode
}

// KindName describes a node for "expected X, found Y" messages.
func KindName(n *yaml.Node) string {
	n = Deref(n)
	switch {
	case IsNull(n):
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
		return "the string " + Quote(n.Value)
	}
}

// Join is the dotted path of key inside the value at parent ("" is the top level).
func Join(parent, key string) string {
	if parent == "" {
		return key
	}
	return parent + "." + key
}

// Index is the path of item i of the list at field ("ports[1]").
func Index(field string, i int) string {
	return fmt.Sprintf("%s[%d]", field, i)
}

// Entry is one key of a mapping after merge keys (<<) have been applied.
type Entry struct {
	Key     string
	KeyNode *yaml.Node
	Val     *yaml.Node
}

// Mapping returns the entries of a mapping node with merge keys applied: keys written in the
// mapping win over merged ones, and among several merged mappings the first wins (YAML merge
// key rules). A null node is an empty mapping.
func (r *Reader) Mapping(n *yaml.Node, field string) ([]Entry, bool) {
	d := Deref(n)
	if IsNull(d) {
		return nil, true
	}
	if d.Kind != yaml.MappingNode {
		r.Expected(n, field, "a mapping")
		return nil, false
	}
	return r.entries(d, field, 0), true
}

func (r *Reader) entries(n *yaml.Node, field string, depth int) []Entry {
	if r.merged == nil {
		r.merged = map[*yaml.Node][]Entry{}
	}
	if es, ok := r.merged[n]; ok {
		return es
	}
	// Mark in progress: a merge chain that comes back here contributes nothing.
	r.merged[n] = nil
	var out []Entry
	seen := map[string]bool{}
	var merges []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := Deref(n.Content[i]), n.Content[i+1]
		if k == nil || k.Kind != yaml.ScalarNode {
			r.Errorf(n.Content[i], field, "mapping keys must be strings, found %s", KindName(k))
			continue
		}
		if k.Tag == "!!merge" {
			merges = append(merges, v)
			continue
		}
		if seen[k.Value] {
			r.Errorf(k, Join(field, k.Value), "key is defined twice in the same mapping")
			continue
		}
		seen[k.Value] = true
		out = append(out, Entry{Key: k.Value, KeyNode: k, Val: v})
	}
	if depth > maxAliasHops {
		r.Errorf(n, field, "merge keys (<<) nested too deeply")
		merges = nil
	}
	for _, m := range merges {
		var sources []*yaml.Node
		md := Deref(m)
		switch {
		case md != nil && md.Kind == yaml.MappingNode:
			sources = []*yaml.Node{md}
		case md != nil && md.Kind == yaml.SequenceNode:
			for _, item := range md.Content {
				id := Deref(item)
				if id == nil || id.Kind != yaml.MappingNode {
					r.Expected(item, Join(field, "<<"), "a mapping to merge")
					continue
				}
				sources = append(sources, id)
			}
		default:
			r.Expected(m, Join(field, "<<"), "a mapping or a list of mappings to merge")
		}
		for _, src := range sources {
			for _, e := range r.entries(src, field, depth+1) {
				if !seen[e.Key] {
					seen[e.Key] = true
					out = append(out, e)
				}
			}
		}
	}
	r.merged[n] = out
	return out
}

// Str reads a scalar as a string (numbers and booleans as written). Null gives "".
func (r *Reader) Str(n *yaml.Node, field string) (string, bool) {
	d := Deref(n)
	if IsNull(d) {
		return "", true
	}
	if d.Kind != yaml.ScalarNode {
		r.Expected(n, field, "a string")
		return "", false
	}
	return d.Value, true
}

// StrList reads a list of scalars. Null gives nil.
func (r *Reader) StrList(n *yaml.Node, field string) ([]string, bool) {
	d := Deref(n)
	if IsNull(d) {
		return nil, true
	}
	if d.Kind != yaml.SequenceNode {
		r.Expected(n, field, "a list of strings")
		return nil, false
	}
	out := make([]string, 0, len(d.Content))
	ok := true
	for i, item := range d.Content {
		s, good := r.Str(item, Index(field, i))
		ok = ok && good
		out = append(out, s)
	}
	return out, ok
}

// StrOrList reads a string or a list of strings; isString tells which was written.
func (r *Reader) StrOrList(n *yaml.Node, field string) (vals []string, isString, ok bool) {
	d := Deref(n)
	if d != nil && d.Kind == yaml.ScalarNode && !IsNull(d) {
		return []string{d.Value}, true, true
	}
	if d != nil && d.Kind != yaml.SequenceNode && !IsNull(d) {
		r.Expected(n, field, "a string or a list of strings")
		return nil, false, false
	}
	vals, ok = r.StrList(n, field)
	return vals, false, ok
}

// Command reads a command or entrypoint: a list as written, or a string split like a shell
// would split it (quotes respected, no expansion). Null means "not set" (nil); an empty list
// or a blank string gives an empty, non-nil slice.
func (r *Reader) Command(n *yaml.Node, field string) []string {
	if IsNull(n) {
		return nil
	}
	vals, isString, ok := r.StrOrList(n, field)
	if !ok {
		return nil
	}
	if !isString {
		if vals == nil {
			vals = []string{}
		}
		return vals
	}
	args, err := shellwords.Parse(vals[0])
	if err != nil {
		r.Errorf(n, field, "cannot split %q into arguments: %v (check the quotes, or write a list)", vals[0], err)
		return nil
	}
	if args == nil {
		args = []string{}
	}
	return args
}

// Int reads a 32-bit integer, also from a string (interpolated values are strings).
func (r *Reader) Int(n *yaml.Node, field string) (int, bool) {
	v, ok := r.intBits(n, field, 32)
	return int(v), ok
}

// Int64 reads a 64-bit integer, also from a string (interpolated values are strings).
func (r *Reader) Int64(n *yaml.Node, field string) (int64, bool) {
	return r.intBits(n, field, 64)
}

func (r *Reader) intBits(n *yaml.Node, field string, bits int) (int64, bool) {
	d := Deref(n)
	if d == nil || d.Kind != yaml.ScalarNode || IsNull(d) {
		r.Expected(n, field, "an integer")
		return 0, false
	}
	v, err := strconv.ParseInt(strings.TrimSpace(d.Value), 10, bits)
	if errors.Is(err, strconv.ErrRange) {
		r.Errorf(n, field, "the number %s is out of range (an integer from %d to %d)", Shorten(strings.TrimSpace(d.Value)), int64(-1)<<(bits-1), int64(1)<<(bits-1)-1)
		return 0, false
	}
	if err != nil {
		r.Expected(n, field, "an integer")
		return 0, false
	}
	return v, true
}

// Bool reads a boolean; yes/no/on/off are accepted as Compose does.
func (r *Reader) Bool(n *yaml.Node, field string) (bool, bool) {
	d := Deref(n)
	if d != nil && d.Kind == yaml.ScalarNode {
		switch strings.ToLower(strings.TrimSpace(d.Value)) {
		case "true", "yes", "on":
			return true, true
		case "false", "no", "off":
			return false, true
		}
	}
	r.Expected(n, field, "true or false")
	return false, false
}

// KV is one entry of a "mapping or list of NAME=value" field. HasValue is false for a bare
// NAME (list) or a null value (mapping), which Compose reads as "take it from the
// environment". Node is the key (mapping) or the item (list), for positions.
type KV struct {
	Key      string
	Value    string
	HasValue bool
	Node     *yaml.Node
}

// KeyValues reads labels, environment, build args and the like: a mapping, or a list of
// "NAME=value". Null gives nil; any other shape is an error and ok=false.
func (r *Reader) KeyValues(n *yaml.Node, field string) ([]KV, bool) {
	d := Deref(n)
	if IsNull(d) {
		return nil, true
	}
	var out []KV
	switch d.Kind {
	case yaml.MappingNode:
		es, _ := r.Mapping(d, field)
		for _, e := range es {
			if IsNull(e.Val) {
				out = append(out, KV{Key: e.Key, Node: e.KeyNode})
				continue
			}
			if s, ok := r.Str(e.Val, Join(field, e.Key)); ok {
				out = append(out, KV{Key: e.Key, Value: s, HasValue: true, Node: e.KeyNode})
			}
		}
	case yaml.SequenceNode:
		for i, item := range d.Content {
			s, ok := r.Str(item, Index(field, i))
			if !ok {
				continue
			}
			name, value, has := strings.Cut(s, "=")
			if name == "" || r.StrictNames && strings.TrimSpace(name) == "" {
				r.Errorf(item, Index(field, i), "expected NAME=value, found %q", s)
				continue
			}
			out = append(out, KV{Key: name, Value: value, HasValue: has, Node: Deref(item)})
		}
	default:
		r.Expected(n, field, "a mapping or a list of NAME=value strings")
		return nil, false
	}
	return out, true
}

// StringMap reads a map of string to string given as a mapping or a NAME=value list; a NAME
// without value maps to "".
func (r *Reader) StringMap(n *yaml.Node, field string) map[string]string {
	kvs, _ := r.KeyValues(n, field)
	if len(kvs) == 0 {
		return nil
	}
	out := make(map[string]string, len(kvs))
	for _, e := range kvs {
		out[e.Key] = e.Value
	}
	return out
}

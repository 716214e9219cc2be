package yamlsrc

import (
	"fmt"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// Reader holds the state of loading one file: where errors point, where variables come from,
// and the errors and warnings found so far. Loaders embed it and call its accessors.
type Reader struct {
	// File names the file in positions, as the loader wants it shown.
	File string
	// Lookup finds variables for interpolation (see ChainLookups).
	Lookup Lookup
	// StrictNames makes KeyValues also refuse a NAME of only white space in a NAME=value list
	// (the manifest's rule); without it only an empty NAME is refused (Compose's rule).
	StrictNames bool
	// Errs is every problem found so far, in the order found (see SortErrors).
	Errs []*Error

	// nodeFile names the file of nodes read from files other than File (several Compose
	// files merged, extends, include); see SetFile.
	nodeFile map[*yaml.Node]string

	warnings  []string
	ignored   []ignoredField
	merged    map[*yaml.Node][]Entry
	unset     []string
	unsetSeen map[string]bool
}

// NewReader returns a Reader for the file named file (as it should appear in positions).
func NewReader(file string) *Reader {
	return &Reader{File: file, merged: map[*yaml.Node][]Entry{}, unsetSeen: map[string]bool{}}
}

// Pos is the position of n in its file; a nil node gives the file alone.
func (r *Reader) Pos(n *yaml.Node) Position {
	if n == nil {
		return Position{File: r.File}
	}
	return Position{File: r.FileOf(n), Line: n.Line, Column: n.Column}
}

// FileOf is the file n was read from: the one SetFile registered it under, else File.
func (r *Reader) FileOf(n *yaml.Node) string {
	if f, ok := r.nodeFile[n]; ok {
		return f
	}
	return r.File
}

// SetFile records that n and every node below it were read from file, so positions (and
// FileOf) name it. Loaders that merge several files call it once per parsed document.
func (r *Reader) SetFile(n *yaml.Node, file string) {
	if r.nodeFile == nil {
		r.nodeFile = map[*yaml.Node]string{}
	}
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		if n == nil {
			return
		}
		if _, seen := r.nodeFile[n]; seen {
			return
		}
		r.nodeFile[n] = file
		for _, c := range n.Content {
			walk(c)
		}
	}
	walk(n)
}

// SetFileOf records that n (a node made by a loader, not parsed) belongs to the file of like.
func (r *Reader) SetFileOf(n, like *yaml.Node) {
	if f, ok := r.nodeFile[like]; ok {
		if r.nodeFile == nil {
			r.nodeFile = map[*yaml.Node]string{}
		}
		r.nodeFile[n] = f
	}
}

// Errorf records an error at n for the value at field.
// A string formatted with %q is quoted only up to MaxQuoted characters.
func (r *Reader) Errorf(n *yaml.Node, field, format string, args ...any) {
	r.Errs = append(r.Errs, &Error{Pos: r.Pos(n), Field: field, Msg: fmt.Sprintf(format, shortenQuoted(format, args)...)})
}

// Expected records "expected <what>, found <what n is>" at n.
func (r *Reader) Expected(n *yaml.Node, field, what string) {
	r.Errorf(n, field, "expected %s, found %s", what, KindName(n))
}

// SyntaxError turns a yaml.v3 syntax error ("yaml: line 3: ...") into a positioned Error.
func (r *Reader) SyntaxError(err error) *Error {
	pos := Position{File: r.File}
	rest := strings.TrimPrefix(err.Error(), "yaml: ")
	var line int
	if n, _ := fmt.Sscanf(rest, "line %d:", &line); n == 1 {
		pos.Line, pos.Column = line, 1
		if i := strings.Index(rest, ":"); i >= 0 {
			rest = strings.TrimSpace(rest[i+1:])
		}
	}
	return &Error{Pos: pos, Msg: "invalid YAML: " + rest}
}

// ignoredField is a key the loader does not support. It is never dropped silently: all of
// them end up in one grouped warning.
type ignoredField struct {
	field string
	pos   Position
}

// Ignore records that the key at n (the value at field) is not supported and was ignored.
func (r *Reader) Ignore(n *yaml.Node, field string) {
	r.ignored = append(r.ignored, ignoredField{field: field, pos: r.Pos(n)})
}

// Warnf records a warning. A string formatted with %q is quoted only up to MaxQuoted
// characters.
func (r *Reader) Warnf(format string, args ...any) {
	r.warnings = append(r.warnings, fmt.Sprintf(format, shortenQuoted(format, args)...))
}

// Warnings returns the warnings: unset variables, then the ignored fields grouped in one
// warning in file order, then the rest in the order found.
func (r *Reader) Warnings() []string {
	var out []string
	for _, name := range r.unset {
		out = append(out, fmt.Sprintf("the %q variable is not set; using an empty string", name))
	}
	if len(r.ignored) > 0 {
		slices.SortStableFunc(r.ignored, func(a, b ignoredField) int { return ComparePos(a.pos, b.pos) })
		parts := make([]string, len(r.ignored))
		for i, f := range r.ignored {
			parts[i] = fmt.Sprintf("%s (%s)", f.field, f.pos)
		}
		out = append(out, "ignored fields not supported by devtool: "+strings.Join(parts, ", "))
	}
	return append(out, r.warnings...)
}

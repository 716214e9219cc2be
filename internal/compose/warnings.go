package compose

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// ignoredField is a key outside the spec. It is never dropped silently: all of them end up in
// one grouped warning.
type ignoredField struct {
	field string
	pos   Position
}

func (l *loader) ignore(n *yaml.Node, field string) {
	l.ignored = append(l.ignored, ignoredField{field: field, pos: l.pos(n)})
}

func (l *loader) warnf(format string, args ...any) {
	l.warnings = append(l.warnings, fmt.Sprintf(format, args...))
}

// finalWarnings returns the warnings: unset variables, then the grouped ignored fields, then
// the rest in the order found.
func (l *loader) finalWarnings() []string {
	var out []string
	for _, name := range l.unset {
		out = append(out, fmt.Sprintf("the %q variable is not set; using an empty string", name))
	}
	if len(l.ignored) > 0 {
		slices.SortStableFunc(l.ignored, func(a, b ignoredField) int { return comparePos(a.pos, b.pos) })
		parts := make([]string, len(l.ignored))
		for i, f := range l.ignored {
			parts[i] = fmt.Sprintf("%s (%s)", f.field, f.pos)
		}
		out = append(out, "ignored fields not supported by devtool: "+strings.Join(parts, ", "))
	}
	return append(out, l.warnings...)
}

// comparePos orders positions as they appear in the files.
func comparePos(a, b Position) int {
	return cmp.Or(cmp.Compare(a.File, b.File), cmp.Compare(a.Line, b.Line), cmp.Compare(a.Column, b.Column))
}

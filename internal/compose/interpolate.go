package compose

import (
	"errors"
	"strings"

	"github.com/compose-spec/compose-go/v2/template"
	"gopkg.in/yaml.v3"
)

// interpolate substitutes variables in every scalar value of the document, in place, using
// compose-go's template package (the Compose Specification's reference rules). Keys are not
// interpolated, as in Compose. Alias nodes are skipped: their anchors are visited once where
// they are written, so an error points at the text that holds the variable.
func (l *loader) interpolate(n *yaml.Node, field string) {
	if n == nil {
		return
	}
	switch n.Kind {
	case yaml.DocumentNode, yaml.SequenceNode:
		for i, c := range n.Content {
			f := field
			if n.Kind == yaml.SequenceNode {
				f = index(field, i)
			}
			l.interpolate(c, f)
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			l.interpolate(n.Content[i+1], joinField(field, n.Content[i].Value))
		}
	case yaml.ScalarNode:
		if !strings.Contains(n.Value, "$") {
			return
		}
		v, err := template.SubstituteWithOptions(n.Value, template.Mapping(l.lookup),
			template.WithoutLogging, template.WithReplacementFunction(l.replace))
		if err != nil {
			l.interpolationError(n, field, err)
			return
		}
		n.Value = v
	}
}

// replace wraps compose-go's replacement to notice variables that are used without a
// default and are not set, which Compose reports as a warning (and substitutes "").
//
// compose-go's pattern matches "${A:-x}:${B}" as one piece and substitutes the text after the
// first closing brace with logging switched on (it would print to stderr); that text is split
// off here and substituted through this function instead.
func (l *loader) replace(substring string, mapping template.Mapping, cfg *template.Config) (string, error) {
	if i := firstClosingBrace(substring); i >= 0 && i+1 < len(substring) {
		head, err := l.replace(substring[:i+1], mapping, cfg)
		if err != nil {
			return "", err
		}
		rest, err := template.SubstituteWithOptions(substring[i+1:], mapping,
			template.WithoutLogging, template.WithReplacementFunction(l.replace))
		return head + rest, err
	}
	value, applied, err := template.DefaultReplacementAppliedFunc(substring, mapping, cfg)
	if err == nil && !applied {
		name := strings.Trim(substring, "${}")
		if !l.unsetSeen[name] {
			l.unsetSeen[name] = true
			l.unset = append(l.unset, name)
		}
	}
	return value, err
}

func (l *loader) interpolationError(n *yaml.Node, field string, err error) {
	var missing *template.MissingRequiredError
	var invalid *template.InvalidTemplateError
	switch {
	case errors.As(err, &missing):
		msg := "required variable " + missing.Variable + " is not set"
		if missing.Reason != "" {
			msg += ": " + missing.Reason
		}
		l.errorf(n, field, "%s", msg)
	case errors.As(err, &invalid):
		l.errorf(n, field, "invalid variable reference in %q (use ${NAME}, ${NAME:-default}, ${NAME:?message}, or $$ for a literal $)", n.Value)
	default:
		l.errorf(n, field, "interpolation failed: %v", err)
	}
}

// firstClosingBrace finds the brace that closes the first "${", counting nested braces the
// way compose-go does, or -1.
func firstClosingBrace(s string) int {
	open := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '}':
			open--
			if open == 0 {
				return i
			}
		case '{':
			open++
			i++ // as compose-go does: the character after '{' is never a closing brace
		}
	}
	return -1
}

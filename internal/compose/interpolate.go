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
func (l *loader) replace(substring string, mapping template.Mapping, cfg *template.Config) (string, error) {
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

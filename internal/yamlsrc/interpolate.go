package yamlsrc

import (
	"errors"
	"strings"

	"github.com/compose-spec/compose-go/v2/template"
	"gopkg.in/yaml.v3"
)

// Interpolate substitutes variables (from r.Lookup) in every scalar value below n, in place,
// using compose-go's template package (the Compose Specification's reference rules). Keys are
// not interpolated, as in Compose. Alias nodes are skipped: their anchors are visited once
// where they are written, so an error points at the text that holds the variable. Nodes in
// skip (may be nil) are left as written, with everything below them.
//
// A variable used without a default and not set is substituted by "" and reported once in
// Warnings; a required variable that is not set, or an invalid reference, is an error.
func (r *Reader) Interpolate(n *yaml.Node, field string, skip map[*yaml.Node]bool) {
	if n == nil || skip[n] {
		return
	}
	switch n.Kind {
	case yaml.DocumentNode, yaml.SequenceNode:
		for i, c := range n.Content {
			f := field
			if n.Kind == yaml.SequenceNode {
				f = Index(field, i)
			}
			r.Interpolate(c, f, skip)
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			r.Interpolate(n.Content[i+1], Join(field, n.Content[i].Value), skip)
		}
	case yaml.ScalarNode:
		if !strings.Contains(n.Value, "$") {
			return
		}
		v, err := template.SubstituteWithOptions(n.Value, template.Mapping(r.Lookup),
			template.WithoutLogging, template.WithReplacementFunction(r.replace))
		if err != nil {
			r.interpolationError(n, field, err)
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
func (r *Reader) replace(substring string, mapping template.Mapping, cfg *template.Config) (string, error) {
	if i := firstClosingBrace(substring); i >= 0 && i+1 < len(substring) {
		head, err := r.replace(substring[:i+1], mapping, cfg)
		if err != nil {
			return "", err
		}
		rest, err := template.SubstituteWithOptions(substring[i+1:], mapping,
			template.WithoutLogging, template.WithReplacementFunction(r.replace))
		return head + rest, err
	}
	value, applied, err := template.DefaultReplacementAppliedFunc(substring, mapping, cfg)
	if err == nil && !applied {
		name := strings.Trim(substring, "${}")
		if r.unsetSeen == nil {
			r.unsetSeen = map[string]bool{}
		}
		if !r.unsetSeen[name] {
			r.unsetSeen[name] = true
			r.unset = append(r.unset, name)
		}
	}
	return value, err
}

func (r *Reader) interpolationError(n *yaml.Node, field string, err error) {
	var missing *template.MissingRequiredError
	var invalid *template.InvalidTemplateError
	switch {
	case errors.As(err, &missing):
		msg := "required variable " + missing.Variable + " is not set"
		if missing.Reason != "" {
			msg += ": " + missing.Reason
		}
		r.Errorf(n, field, "%s", msg)
	case errors.As(err, &invalid):
		r.Errorf(n, field, "invalid variable reference in %q (use ${NAME}, ${NAME:-default}, ${NAME:?message}, or $$ for a literal $)", n.Value)
	default:
		r.Errorf(n, field, "interpolation failed: %v", err)
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

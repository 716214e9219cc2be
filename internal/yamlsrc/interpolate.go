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
		if d := nestingDepth(n.Value); d > MaxNesting {
			r.Errorf(n, field, "variable references nested %d deep (as in ${A:-${B:-...}}); at most %d levels are allowed", d, MaxNesting)
			return
		}
		v, err := r.substitute(n.Value, template.Mapping(r.Lookup))
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
		rest, err := r.substitute(substring[i+1:], mapping)
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

// MaxNesting is how deep variable references may nest inside defaults (${A:-${B:-x}} is 2).
// Real files use two or three levels; the bound keeps the cost of a hostile value small and
// is checked before compose-go's template package sees the value.
const MaxNesting = 10

// nestingDepth is the deepest nesting of "${" in s ("$$" is a literal dollar).
func nestingDepth(s string) int {
	depth, deepest := 0, 0
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '$' && i+1 < len(s) && s[i+1] == '$':
			i++
		case s[i] == '$' && i+1 < len(s) && s[i+1] == '{':
			depth++
			deepest = max(deepest, depth)
			i++
		case s[i] == '}' && depth > 0:
			depth--
		}
	}
	return deepest
}

// substitute runs compose-go's substitution with this Reader's replacement and substitution
// functions, so nested values (defaults, messages, the text after a closing brace) go through
// them too: unset variables are reported in Warnings, and compose-go never logs through
// logrus (its own nested substitution would, with logging on).
func (r *Reader) substitute(s string, mapping template.Mapping) (string, error) {
	return template.SubstituteWithOptions(s, mapping, template.WithoutLogging,
		template.WithReplacementFunction(r.replace), template.WithSubstitutionFunction(r.operator))
}

// operator applies ${NAME<op>WORD} for the operators of the Compose Specification (:-, -, :?,
// ?, :+, +), substituting WORD through r.substitute. applied is false for a plain ${NAME}.
func (r *Reader) operator(substitution string, mapping template.Mapping) (string, bool, error) {
	i := 0
	for i < len(substitution) && (substitution[i] == '_' || substitution[i] >= 'a' && substitution[i] <= 'z' ||
		substitution[i] >= 'A' && substitution[i] <= 'Z' || i > 0 && substitution[i] >= '0' && substitution[i] <= '9') {
		i++
	}
	name, rest := substitution[:i], substitution[i:]
	colon := strings.HasPrefix(rest, ":")
	if colon {
		rest = rest[1:]
	}
	if rest == "" {
		return "", false, nil
	}
	op, word := rest[0], rest[1:]
	value, set := mapping(name)
	present := set && (!colon || value != "")
	switch op {
	case '-':
		if present {
			return value, true, nil
		}
		v, err := r.substitute(word, mapping)
		return v, err == nil, err
	case '+':
		if !present {
			return value, true, nil
		}
		v, err := r.substitute(word, mapping)
		return v, err == nil, err
	case '?':
		if present {
			return value, true, nil
		}
		msg, err := r.substitute(word, mapping)
		if err != nil {
			return "", false, err
		}
		return "", true, &template.MissingRequiredError{Variable: name, Reason: msg}
	}
	return "", false, nil
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

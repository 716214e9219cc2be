package manifest

import (
	"errors"
	"strings"

	"github.com/compose-spec/compose-go/v2/template"
	"gopkg.in/yaml.v3"
)

// interpolate substitutes ${NAME} in every scalar value, in place, with compose-go's template
// package and the same rules as the Compose loader (keys are not interpolated; aliases are
// visited where their anchor is written). Nodes in skip (the deploy and destroy commands) are
// left as written: the shell running them expands their variables at deploy time.
func (p *parser) interpolate(n *yaml.Node, field string, skip map[*yaml.Node]bool) {
	if n == nil || skip[n] {
		return
	}
	switch n.Kind {
	case yaml.DocumentNode, yaml.SequenceNode:
		for i, c := range n.Content {
			f := field
			if n.Kind == yaml.SequenceNode {
				f = index(field, i)
			}
			p.interpolate(c, f, skip)
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			p.interpolate(n.Content[i+1], join(field, n.Content[i].Value), skip)
		}
	case yaml.ScalarNode:
		if !strings.Contains(n.Value, "$") {
			return
		}
		v, err := template.SubstituteWithOptions(n.Value, template.Mapping(p.lookup),
			template.WithoutLogging, template.WithReplacementFunction(p.replace))
		if err != nil {
			p.interpolationError(n, field, err)
			return
		}
		n.Value = v
	}
}

// commandNodes finds the nodes holding deploy and destroy commands: the destroy value, a
// deploy list, and deploy.commands.
func commandNodes(doc *yaml.Node) map[*yaml.Node]bool {
	skip := map[*yaml.Node]bool{}
	root := deref(doc)
	if root == nil || root.Kind != yaml.MappingNode {
		return skip
	}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		switch k.Value {
		case "destroy":
			skip[v] = true
		case "deploy":
			d := deref(v)
			switch {
			case d == nil:
			case d.Kind == yaml.SequenceNode:
				skip[v], skip[d] = true, true
			case d.Kind == yaml.MappingNode:
				for j := 0; j+1 < len(d.Content); j += 2 {
					if d.Content[j].Value == "commands" {
						skip[d.Content[j+1]] = true
					}
				}
			}
		}
	}
	return skip
}

// replace notices variables used without a default that are unset (a warning, as in Compose),
// and splits "${A:-x}:${B}" the way the Compose loader does so compose-go never logs.
func (p *parser) replace(substring string, mapping template.Mapping, cfg *template.Config) (string, error) {
	if i := firstClosingBrace(substring); i >= 0 && i+1 < len(substring) {
		head, err := p.replace(substring[:i+1], mapping, cfg)
		if err != nil {
			return "", err
		}
		rest, err := template.SubstituteWithOptions(substring[i+1:], mapping,
			template.WithoutLogging, template.WithReplacementFunction(p.replace))
		return head + rest, err
	}
	value, applied, err := template.DefaultReplacementAppliedFunc(substring, mapping, cfg)
	if err == nil && !applied {
		name := strings.Trim(substring, "${}")
		if !p.unsetSeen[name] {
			p.unsetSeen[name] = true
			p.unset = append(p.unset, name)
		}
	}
	return value, err
}

func (p *parser) interpolationError(n *yaml.Node, field string, err error) {
	var missing *template.MissingRequiredError
	var invalid *template.InvalidTemplateError
	switch {
	case errors.As(err, &missing):
		msg := "required variable " + missing.Variable + " is not set"
		if missing.Reason != "" {
			msg += ": " + missing.Reason
		}
		p.errorf(n, field, "%s", msg)
	case errors.As(err, &invalid):
		p.errorf(n, field, "invalid variable reference in %q (use ${NAME}, ${NAME:-default}, ${NAME:?message}, or $$ for a literal $)", n.Value)
	default:
		p.errorf(n, field, "interpolation failed: %v", err)
	}
}

// firstClosingBrace finds the brace closing the first "${", counting nesting as compose-go does.
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
			i++
		}
	}
	return -1
}

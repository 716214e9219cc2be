package compose

import (
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/devtool/devtool/internal/yamlsrc"
)

// dependsOn reads a list of service names or a map of name to {condition, required}.
func (l *loader) dependsOn(n *yaml.Node, field string) []Dependency {
	optional := l.optionalDeps[field]
	d := yamlsrc.Deref(n)
	if yamlsrc.IsNull(d) {
		return nil
	}
	var out []Dependency
	switch d.Kind {
	case yaml.SequenceNode:
		for i, item := range d.Content {
			if s, ok := l.Str(item, yamlsrc.Index(field, i)); ok {
				out = append(out, Dependency{Service: s, Condition: ConditionStarted, Pos: l.Pos(yamlsrc.Deref(item))})
			}
		}
	case yaml.MappingNode:
		es, _ := l.Mapping(d, field)
		for _, e := range es {
			dep := Dependency{Service: e.Key, Condition: ConditionStarted, Pos: l.Pos(e.KeyNode)}
			f := yamlsrc.Join(field, e.Key)
			opts, _ := l.Mapping(e.Val, f)
			for _, o := range opts {
				of := yamlsrc.Join(f, o.Key)
				switch o.Key {
				case "condition":
					c, _ := l.Str(o.Val, of)
					switch c {
					case ConditionStarted, ConditionHealthy, ConditionCompleted:
						dep.Condition = c
					default:
						l.Errorf(o.Val, of, "expected %s, %s or %s, found %q", ConditionStarted, ConditionHealthy, ConditionCompleted, c)
					}
				case "required":
					if v, ok := l.Bool(o.Val, of); ok && !v {
						if optional == nil {
							optional = map[string]bool{}
							l.optionalDeps[field] = optional
						}
						optional[e.Key] = true
					}
				default:
					if !strings.HasPrefix(o.Key, "x-") {
						l.Ignore(o.KeyNode, of)
					}
				}
			}
			out = append(out, dep)
		}
	default:
		l.Expected(n, field, "a list of service names or a mapping of service name to {condition}")
	}
	return out
}

// checkDependencies reports depends_on entries naming missing services, and cycles. An
// optional dependency (required: false) on a missing service is dropped with a warning, as
// Compose does.
func (l *loader) checkDependencies(p *Project) {
	byName := make(map[string]*Service, len(p.Services))
	for _, s := range p.Services {
		byName[s.Name] = s
	}
	for _, s := range p.Services {
		kept := s.DependsOn[:0]
		for _, d := range s.DependsOn {
			field := "services." + s.Name + ".depends_on"
			switch {
			case byName[d.Service] != nil:
				kept = append(kept, d)
			case l.optionalDeps[field][d.Service]:
				l.Warnf("%s: %s: optional dependency %q is not a service; ignored", d.Pos, field, d.Service)
			default:
				l.Errs = append(l.Errs, &Error{Pos: d.Pos, Field: field, Msg: "service " + quote(d.Service) + " is not defined (services: " + serviceNames(p) + ")"})
			}
		}
		s.DependsOn = kept
	}
	l.findCycles(p, byName)
}

// findCycles reports each dependency cycle once, naming it ("a -> b -> a").
func (l *loader) findCycles(p *Project, byName map[string]*Service) {
	const (
		unvisited = iota
		inProgress
		done
	)
	state := map[string]int{}
	var stack []string
	var visit func(s *Service)
	visit = func(s *Service) {
		state[s.Name] = inProgress
		stack = append(stack, s.Name)
		for _, d := range s.DependsOn {
			switch state[d.Service] {
			case inProgress:
				start := 0
				for i, name := range stack {
					if name == d.Service {
						start = i
					}
				}
				cycle := append(append([]string{}, stack[start:]...), d.Service)
				l.Errs = append(l.Errs, &Error{Pos: d.Pos, Field: "services." + s.Name + ".depends_on",
					Msg: "dependency cycle: " + strings.Join(cycle, " -> ")})
			case unvisited:
				if dep := byName[d.Service]; dep != nil {
					visit(dep)
				}
			}
		}
		stack = stack[:len(stack)-1]
		state[s.Name] = done
	}
	for _, s := range p.Services {
		if state[s.Name] == unvisited {
			visit(s)
		}
	}
}

func serviceNames(p *Project) string {
	if len(p.Services) == 0 {
		return "none"
	}
	names := make([]string, len(p.Services))
	for i, s := range p.Services {
		names[i] = s.Name
	}
	return strings.Join(names, ", ")
}

func quote(s string) string { return `"` + s + `"` }

package compose

import (
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/devtool/devtool/internal/yamlsrc"
)

// ReadEndpoints reads endpoints (A4) in their three notations with r, which records the
// errors: a list of routes (one unnamed endpoint), a map of endpoint name to routes (or to
// {labels, rules}), or {labels, rules} (one unnamed endpoint with labels). A map whose keys
// are only labels and rules is the third notation. Every route needs path (starting with /),
// service and port (1-65535). When p is not nil, each route's service must be one of p's and
// expose the port; with nil (a manifest, whose deploy commands create the services) route
// services are not checked.
func ReadEndpoints(r *yamlsrc.Reader, n *yaml.Node, field string, p *Project) []*Endpoint {
	return endpointReader{r, p}.endpoints(n, field)
}

type endpointReader struct {
	*yamlsrc.Reader
	p *Project // nil: route services are not checked
}

func (l endpointReader) endpoints(n *yaml.Node, field string) []*Endpoint {
	d := yamlsrc.Deref(n)
	if yamlsrc.IsNull(d) {
		return nil
	}
	switch d.Kind {
	case yaml.SequenceNode:
		return []*Endpoint{{Rules: l.routes(d, field), Pos: l.Pos(d)}}
	case yaml.MappingNode:
		es, _ := l.Mapping(d, field)
		if isObjectNotation(es) {
			return []*Endpoint{l.endpointObject(es, d, field)}
		}
		if isRoute(es) {
			l.Errorf(d, field, "expected a list of routes, found a mapping (one route {path, service, port}: write it as a list item, '- path: ...')")
			return nil
		}
		var out []*Endpoint
		for _, e := range es {
			f := yamlsrc.Join(field, e.Key)
			checkName(l.Reader, e.KeyNode, f, "endpoint", e.Key)
			var ep *Endpoint
			if vd := yamlsrc.Deref(e.Val); vd != nil && vd.Kind == yaml.MappingNode {
				inner, _ := l.Mapping(vd, f)
				if isRoute(inner) {
					l.Errorf(vd, f, "expected a list of routes, found a mapping (one route {path, service, port}: write it as a list item, '- path: ...')")
					continue
				}
				ep = l.endpointObject(inner, vd, f)
			} else {
				ep = &Endpoint{Rules: l.routes(e.Val, f)}
			}
			ep.Name, ep.Pos = e.Key, l.Pos(e.KeyNode)
			out = append(out, ep)
		}
		return out
	}
	l.Expected(n, field, "a list of routes, a mapping of endpoint name to routes, or {labels, rules}")
	return nil
}

// isRoute reports whether a mapping is one route ({path, service, port}) written where a list of
// routes belongs.
func isRoute(es []yamlsrc.Entry) bool {
	for _, e := range es {
		switch e.Key {
		case "path", "service", "port":
			return true
		}
	}
	return false
}

func isObjectNotation(es []yamlsrc.Entry) bool {
	hasRules := false
	for _, e := range es {
		switch e.Key {
		case "rules":
			hasRules = true
		case "labels":
		default:
			return false
		}
	}
	return hasRules
}

func (l endpointReader) endpointObject(es []yamlsrc.Entry, n *yaml.Node, field string) *Endpoint {
	ep := &Endpoint{Pos: l.Pos(n)}
	for _, e := range es {
		f := yamlsrc.Join(field, e.Key)
		switch e.Key {
		case "labels":
			ep.Labels = l.StringMap(e.Val, f)
		case "rules":
			if vd := yamlsrc.Deref(e.Val); vd != nil && vd.Kind == yaml.MappingNode {
				if inner, _ := l.Mapping(vd, f); isRoute(inner) {
					l.Errorf(vd, f, "expected a list of routes, found a mapping (one route {path, service, port}: write it as a list item, '- path: ...')")
					ep.Rules = []Route{}
					continue
				}
			}
			ep.Rules = l.routes(e.Val, f)
		default:
			l.Ignore(e.KeyNode, f)
		}
	}
	if ep.Rules == nil {
		l.Errorf(n, field, "rules is required (a list of {path, service, port})")
	}
	return ep
}

func (l endpointReader) routes(n *yaml.Node, field string) []Route {
	d := yamlsrc.Deref(n)
	if d == nil || d.Kind != yaml.SequenceNode {
		l.Expected(n, field, "a list of routes {path, service, port}")
		return nil
	}
	out := []Route{}
	for i, item := range d.Content {
		f := yamlsrc.Index(field, i)
		if r, ok := l.route(item, f); ok {
			out = append(out, r)
		}
	}
	return out
}

func (l endpointReader) route(n *yaml.Node, field string) (Route, bool) {
	r := Route{Pos: l.Pos(yamlsrc.Deref(n))}
	es, ok := l.Mapping(n, field)
	if !ok {
		return r, false
	}
	var serviceNode, portNode *yaml.Node
	for _, e := range es {
		f := yamlsrc.Join(field, e.Key)
		switch e.Key {
		case "path":
			r.Path, _ = l.Str(e.Val, f)
		case "service":
			r.Service, _ = l.Str(e.Val, f)
			serviceNode = e.Val
		case "port":
			portNode = e.Val
			v, good := l.Int64(e.Val, f)
			if good && (v < 1 || v > 65535) {
				l.Errorf(e.Val, f, "expected a port between 1 and 65535, found %d", v)
				good = false
			}
			if !good {
				return r, false
			}
			r.Port = int32(v)
		default:
			l.Ignore(e.KeyNode, f)
		}
	}
	var missing []string
	for _, m := range []struct {
		name  string
		unset bool
	}{{"path", r.Path == ""}, {"service", r.Service == ""}, {"port", portNode == nil}} {
		if m.unset {
			missing = append(missing, m.name)
		}
	}
	if len(missing) > 0 {
		l.Errorf(n, field, "a route needs path, service and port; missing %s", strings.Join(missing, ", "))
		return r, false
	}
	if !strings.HasPrefix(r.Path, "/") {
		l.Errorf(n, yamlsrc.Join(field, "path"), "expected a path starting with /, found %q", r.Path)
		return r, false
	}
	if l.p == nil {
		return r, true
	}
	s := l.p.Service(r.Service)
	if s == nil {
		l.Errorf(serviceNode, yamlsrc.Join(field, "service"), "service %q is not defined (services: %s)", r.Service, serviceNames(l.p))
		return r, false
	}
	if !exposes(s, r.Port) {
		l.Errorf(portNode, yamlsrc.Join(field, "port"), "service %q does not expose port %d (its ports: %s)", s.Name, r.Port, portList(s))
		return r, false
	}
	return r, true
}

// exposes tells whether a route may target port: a container port of the service, or a
// published one (which the service also listens on in the cluster).
func exposes(s *Service, port int32) bool {
	for _, p := range s.Ports {
		if p.ContainerPort == port || p.HostPort == port {
			return true
		}
	}
	return false
}

func portList(s *Service) string {
	if len(s.Ports) == 0 {
		return "none"
	}
	parts := make([]string, len(s.Ports))
	for i, p := range s.Ports {
		if p.HostPort != 0 {
			parts[i] = fmt.Sprintf("%d:%d", p.HostPort, p.ContainerPort)
		} else {
			parts[i] = fmt.Sprint(p.ContainerPort)
		}
	}
	return strings.Join(parts, ", ")
}

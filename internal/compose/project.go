package compose

import (
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"
	"k8s.io/apimachinery/pkg/util/validation"
)

// project reads the top-level keys. Volumes are read first so service mounts can be checked
// against them, and endpoints last so their rules can be checked against the services.
func (l *loader) project(doc *yaml.Node, p *Project) {
	root := deref(doc)
	if doc.Kind == 0 || len(doc.Content) == 0 || isNull(root) {
		l.errs = append(l.errs, &Error{Pos: Position{File: l.file, Line: 1, Column: 1},
			Msg: "the compose file is empty; expected a mapping with a services key"})
		return
	}
	top, ok := l.mapping(root, "")
	if !ok {
		return
	}
	var services, volumes, endpoints *entry
	for i := range top {
		e := &top[i]
		switch {
		case e.key == "services":
			services = e
		case e.key == "volumes":
			volumes = e
		case e.key == "endpoints":
			endpoints = e
		case e.key == "name":
			p.Name, _ = l.str(e.val, "name")
		case e.key == "version":
			l.warnf("%s: the top-level version field is obsolete and ignored", l.pos(e.keyNode))
		case strings.HasPrefix(e.key, "x-"):
			// Extensions: usable through anchors, nothing to load.
		default:
			l.ignore(e.keyNode, e.key)
		}
	}
	if volumes != nil {
		l.volumes(volumes.val, p)
	}
	if services != nil {
		l.services(services.val, p)
		l.checkDependencies(p)
	}
	if endpoints != nil {
		p.Endpoints = l.endpoints(endpoints.val, "endpoints", p)
	}
}

// checkName reports a name that Kubernetes would refuse as an object name.
func (l *loader) checkName(n *yaml.Node, field, what, name string) bool {
	if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
		hint := ""
		if alt := strings.ToLower(strings.NewReplacer("_", "-", ".", "-").Replace(name)); len(validation.IsDNS1123Label(alt)) == 0 {
			hint = fmt.Sprintf(" (for example %q)", alt)
		}
		l.errorf(n, field, "%s name %q is not valid in Kubernetes: use at most 63 lower-case letters, digits and '-', starting and ending with a letter or digit%s", what, name, hint)
		return false
	}
	return true
}

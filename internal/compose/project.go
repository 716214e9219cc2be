package compose

import (
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/devtool/devtool/internal/yamlsrc"
)

// project reads the top-level keys. Volumes are read first so service mounts can be checked
// against them, and endpoints last so their rules can be checked against the services.
func (l *loader) project(doc *yaml.Node, p *Project) {
	root := yamlsrc.Deref(doc)
	if doc.Kind == 0 || len(doc.Content) == 0 || yamlsrc.IsNull(root) {
		l.Errs = append(l.Errs, &Error{Pos: Position{File: l.File, Line: 1, Column: 1},
			Msg: "the compose file is empty; expected a mapping with a services key"})
		return
	}
	top, ok := l.Mapping(root, "")
	if !ok {
		return
	}
	var services, volumes, endpoints *yamlsrc.Entry
	for i := range top {
		e := &top[i]
		switch {
		case e.Key == "services":
			services = e
		case e.Key == "volumes":
			volumes = e
		case e.Key == "endpoints":
			endpoints = e
		case e.Key == "name":
			p.Name, _ = l.Str(e.Val, "name")
		case e.Key == "version":
			l.Warnf("%s: the top-level version field is obsolete and ignored", l.Pos(e.KeyNode))
		case strings.HasPrefix(e.Key, "x-"):
			// Extensions: usable through anchors, nothing to load.
		default:
			l.Ignore(e.KeyNode, e.Key)
		}
	}
	if volumes != nil {
		l.volumes(volumes.Val, p)
	}
	if services != nil {
		l.services(services.Val, p)
		l.checkDependencies(p)
	}
	if endpoints != nil {
		p.Endpoints = ReadEndpoints(l.Reader, endpoints.Val, "endpoints", p)
	}
}

// checkName reports a name that Kubernetes would refuse as an object name.
func checkName(r *yamlsrc.Reader, n *yaml.Node, field, what, name string) bool {
	if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
		hint := ""
		if alt := strings.ToLower(strings.NewReplacer("_", "-", ".", "-").Replace(name)); len(validation.IsDNS1123Label(alt)) == 0 {
			hint = fmt.Sprintf(" (for example %q)", alt)
		}
		r.Errorf(n, field, "%s name %q is not valid in Kubernetes: use at most 63 lower-case letters, digits and '-', starting and ending with a letter or digit%s", what, name, hint)
		return false
	}
	return true
}

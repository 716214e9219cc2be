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
	var services, volumes, endpoints, secrets, configs *yamlsrc.Entry
	for i := range top {
		e := &top[i]
		switch {
		case e.Key == "services":
			services = e
		case e.Key == "volumes":
			volumes = e
		case e.Key == "endpoints":
			endpoints = e
		case e.Key == "secrets":
			secrets = e
		case e.Key == "configs":
			configs = e
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
	if secrets != nil {
		p.Secrets = l.fileObjects(secrets.Val, "secret")
	}
	if configs != nil {
		p.Configs = l.fileObjects(configs.Val, "config")
	}
	if services != nil {
		l.services(services.Val, p)
		l.checkDependencies(p)
	}
	if endpoints != nil {
		p.Endpoints = ReadEndpoints(l.Reader, endpoints.Val, "endpoints", p)
	}
	l.applyRenames(p)
}

// rename is a name written in the file that Kubernetes refuses, and the name it becomes.
type rename struct {
	what, from, to string
	node           *yaml.Node
	field          string
}

// kubeName checks a service or volume name. A name Kubernetes refuses only for its case or
// its '_' ("db_data", "Web") is converted (lower-case, '_' -> '-'); the conversion is applied
// once the whole file is read (applyRenames), so references in the file keep using the name
// as written. Any other invalid name is an error.
func (l *loader) kubeName(n *yaml.Node, field, what, name string) {
	if len(validation.IsDNS1123Label(name)) == 0 {
		return
	}
	to := kubeNameFor(name)
	if len(validation.IsDNS1123Label(to)) > 0 {
		checkName(l.Reader, n, field, what, name)
		return
	}
	l.renames = append(l.renames, rename{what: what, from: name, to: to, node: n, field: field})
}

// kubeNameFor is Compose name -> Kubernetes name: lower-case, '_' -> '-'.
func kubeNameFor(name string) string {
	return strings.ReplaceAll(strings.ToLower(name), "_", "-")
}

// applyRenames gives converted names to services and volumes and to everything that refers to
// them (depends_on, volume mounts, endpoint routes), with one warning naming each original and
// new name. Two names that end up the same are an error naming both.
func (l *loader) applyRenames(p *Project) {
	if len(l.renames) == 0 {
		return
	}
	services, volumes := map[string]string{}, map[string]string{}
	final := func(what, name string) string {
		m := services
		if what == "volume" {
			m = volumes
		}
		if to, ok := m[name]; ok {
			return to
		}
		return name
	}
	for _, r := range l.renames {
		if r.what == "service" {
			services[r.from] = r.to
		} else {
			volumes[r.from] = r.to
		}
	}
	// Collisions: a converted name equal to another name (converted or not) of the same kind.
	check := func(what string, names []string, posOf func(string) Position) bool {
		seen := map[string]string{}
		ok := true
		for _, n := range names {
			to := final(what, n)
			if other, dup := seen[to]; dup {
				l.Errs = append(l.Errs, &Error{Pos: posOf(n), Field: what + "s." + n,
					Msg: fmt.Sprintf("%s names %q and %q both become %q in Kubernetes (lower-case, '_' as '-'); rename one of them", what, other, n, to)})
				ok = false
				continue
			}
			seen[to] = n
		}
		return ok
	}
	var sNames, vNames []string
	for _, s := range p.Services {
		sNames = append(sNames, s.Name)
	}
	for _, v := range p.Volumes {
		vNames = append(vNames, v.Name)
	}
	okS := check("service", sNames, func(n string) Position { return p.Service(n).Pos })
	okV := check("volume", vNames, func(n string) Position { return p.Volume(n).Pos })
	if !okS || !okV {
		return
	}
	var parts, hosts []string
	for _, r := range l.renames {
		parts = append(parts, fmt.Sprintf("%s %q is %q (%s)", r.what, r.from, r.to, l.Pos(r.node)))
		if r.what == "service" {
			hosts = append(hosts, r.to)
		}
	}
	msg := "names converted for Kubernetes (lower-case, '_' as '-'): " + strings.Join(parts, ", ")
	if len(hosts) > 0 {
		msg += "; other services must reach a renamed service by its new host name (" + strings.Join(hosts, ", ") + ")"
	}
	l.Warnf("%s", msg)
	p.Renamed = map[string]string{}
	for _, r := range l.renames {
		p.Renamed[r.what+":"+r.from] = r.to
	}
	for _, s := range p.Services {
		s.Name = final("service", s.Name)
		for i := range s.DependsOn {
			s.DependsOn[i].Service = final("service", s.DependsOn[i].Service)
		}
		for i := range s.Volumes {
			if s.Volumes[i].Kind == VolumeNamed {
				s.Volumes[i].Source = final("volume", s.Volumes[i].Source)
			}
		}
	}
	for _, v := range p.Volumes {
		v.Name = final("volume", v.Name)
	}
	p.InvalidateIndex() // names changed in place
	for _, ep := range p.Endpoints {
		for i := range ep.Rules {
			ep.Rules[i].Service = final("service", ep.Rules[i].Service)
		}
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

package compose

import (
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/devtool/devtool/internal/yamlsrc"
)

// Fields beyond the spec's table that Compose users expect (issue 11).

// user reads "uid", "uid:gid" (numbers become runAsUser/runAsGroup) or a user name, which
// Kubernetes cannot use (it needs numeric ids): a warning says so. Okteto's mapping
// {runAsUser, runAsGroup} is read by userMapping (okteto.go).
func (l *loader) user(n *yaml.Node, field string, s *Service) {
	if d := yamlsrc.Deref(n); d != nil && d.Kind == yaml.MappingNode {
		l.userMapping(n, field, s)
		return
	}
	v, ok := l.Str(n, field)
	if !ok || strings.TrimSpace(v) == "" {
		return
	}
	u, g, hasGroup := strings.Cut(strings.TrimSpace(v), ":")
	uid, errU := strconv.ParseInt(u, 10, 64)
	if errU != nil || uid < 0 {
		l.Warnf("%s: %s: user %q is not a numeric id; Kubernetes runs the image's user (set a number such as 1000 or 1000:1000)", l.Pos(n), field, v)
		return
	}
	s.RunAsUser = &uid
	if hasGroup {
		gid, err := strconv.ParseInt(g, 10, 64)
		if err != nil || gid < 0 {
			l.Warnf("%s: %s: group %q is not a numeric id; only the user id is used", l.Pos(n), field, g)
			return
		}
		s.RunAsGroup = &gid
	}
}

// expose reads ports reachable by other services only: "3000", 3000, "3000-3005", "53/udp".
func (l *loader) expose(n *yaml.Node, field string) []Port {
	vals, ok := l.StrList(n, field)
	if !ok {
		return nil
	}
	d := yamlsrc.Deref(n)
	var out []Port
	for i, v := range vals {
		if strings.Contains(v, ":") {
			l.Errorf(d.Content[i], yamlsrc.Index(field, i), "expected a container port such as 3000 or 3000/udp, found %q", v)
			continue
		}
		ps, _, err := parsePort(v)
		if err != nil {
			l.Errorf(d.Content[i], yamlsrc.Index(field, i), "%v", err)
			continue
		}
		out = append(out, ps...)
	}
	return out
}

// shortResources reads Compose's service-level cpus, cpu_count (limits.cpu), mem_limit
// (limits.memory) and mem_reservation (requests.memory). A value also set through resources
// or deploy.resources must agree.
func (l *loader) shortResources(s *Service, field string, entries []*yamlsrc.Entry) {
	for _, e := range entries {
		f := yamlsrc.Join(field, e.Key)
		v, ok := l.Str(e.Val, f)
		if !ok || strings.TrimSpace(v) == "" {
			continue
		}
		var q string
		var err error
		var dst *string
		switch e.Key {
		case "cpus", "cpu_count":
			q, err = cpuQuantity(v)
			dst = &s.Resources.Limits.CPU
		case "mem_limit":
			q, err = memoryQuantity(v)
			dst = &s.Resources.Limits.Memory
		case "mem_reservation":
			q, err = memoryQuantity(v)
			dst = &s.Resources.Requests.Memory
		}
		if err != nil {
			l.Errorf(e.Val, f, "%v", err)
			continue
		}
		if *dst != "" && *dst != q {
			l.Errorf(e.KeyNode, f, "%s is %s but resources say %s; set one of them", e.Key, q, *dst)
			continue
		}
		*dst = q
	}
}

// storage reads resources.storage / resources.requests.storage: a size ("5Gi"), or
// {size, class} as Okteto writes it (class: the storage class of the anonymous volumes' claims).
func (l *loader) storage(n *yaml.Node, field string) (q, class string) {
	d := yamlsrc.Deref(n)
	var size string
	var sizeNode = n
	if d != nil && d.Kind == yaml.MappingNode {
		es, _ := l.Mapping(n, field)
		for _, e := range es {
			f := yamlsrc.Join(field, e.Key)
			switch e.Key {
			case "size":
				size, _ = l.Str(e.Val, f)
				sizeNode = e.Val
			case "class":
				class, _ = l.Str(e.Val, f)
			default:
				l.Ignore(e.KeyNode, f)
			}
		}
	} else {
		size, _ = l.Str(n, field)
	}
	if strings.TrimSpace(size) == "" {
		return "", class
	}
	q, err := sizeQuantity(size)
	if err != nil {
		l.Errorf(sizeNode, field, "expected a size such as 1Gi, 500Mi or 10G, found %q", size)
		return "", class
	}
	return q, class
}

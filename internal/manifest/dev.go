package manifest

import (
	"strconv"
	"strings"

	"github.com/mattn/go-shellwords"
	"gopkg.in/yaml.v3"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/devtool/devtool/internal/compose"
)

// devSection reads the dev map: development container name -> settings.
func (p *parser) devSection(n *yaml.Node, field string) []*Dev {
	es, _ := p.mapping(n, field)
	var out []*Dev
	for _, e := range es {
		f := join(field, e.key)
		p.checkName(e.keyNode, f, "development container", e.key)
		out = append(out, p.dev(e, f))
	}
	return out
}

func (p *parser) dev(e entry, field string) *Dev {
	d := &Dev{Name: e.key, Pos: p.pos(e.keyNode)}
	es, ok := p.mapping(e.val, field)
	if !ok {
		return d
	}
	for _, de := range es {
		f := join(field, de.key)
		switch de.key {
		case "image":
			d.Image, _ = p.str(de.val, f)
		case "command":
			d.Command = p.command(de.val, f)
		case "workdir":
			if s, ok := p.str(de.val, f); ok && s != "" {
				if !strings.HasPrefix(s, "/") {
					p.errorf(de.val, f, "expected an absolute path in the container, found %q", s)
				}
				d.Workdir = s
			}
		case "sync":
			d.Sync = p.syncs(de.val, f)
		case "forward":
			d.Forward = p.forwards(de.val, f)
		case "reverse":
			d.Reverse = p.reverses(de.val, f)
		case "environment":
			d.Environment = p.environment(de.val, f)
		case "resources":
			d.Resources = p.resources(de.val, f)
		case "securityContext":
			d.SecurityContext = p.securityContext(de.val, f)
		case "persistentVolume":
			d.PersistentVolume = p.persistentVolume(de.val, f)
		case "selector":
			d.Selector = p.stringMap(de.val, f)
		case "container":
			d.Container, _ = p.str(de.val, f)
		case "autocreate":
			d.Autocreate, _ = p.boolVal(de.val, f)
		default:
			if !strings.HasPrefix(de.key, "x-") {
				p.ignore(de.keyNode, f)
			}
		}
	}
	if d.Autocreate && d.Image == "" {
		p.errorf(e.keyNode, join(field, "image"), "image is required with autocreate: true (there is no workload to take it from)")
	}
	return d
}

// command reads a list as written, or a string split like a shell would (quotes respected).
func (p *parser) command(n *yaml.Node, field string) []string {
	if isNull(n) {
		return nil
	}
	vals, isString, ok := p.strOrList(n, field)
	if !ok {
		return nil
	}
	if !isString {
		if vals == nil {
			vals = []string{}
		}
		return vals
	}
	args, err := shellwords.Parse(vals[0])
	if err != nil {
		p.errorf(n, field, "cannot split %q into arguments: %v (check the quotes, or write a list)", vals[0], err)
		return nil
	}
	if args == nil {
		args = []string{}
	}
	return args
}

// environment reads a list of NAME=value or a map; a bare NAME takes its value from the
// variable sources and is dropped when they do not define it.
func (p *parser) environment(n *yaml.Node, field string) map[string]string {
	kvs := p.keyValues(n, field)
	if len(kvs) == 0 {
		return nil
	}
	out := map[string]string{}
	for _, e := range kvs {
		if e.hasValue {
			out[e.key] = e.value
		} else if v, ok := p.lookup(e.key); ok {
			out[e.key] = v
		}
	}
	return out
}

func (p *parser) itemStrings(n *yaml.Node, field, what string) ([]string, []*yaml.Node) {
	d := deref(n)
	if isNull(d) {
		return nil, nil
	}
	if d.Kind != yaml.SequenceNode {
		p.expected(n, field, "a list of "+what)
		return nil, nil
	}
	var vals []string
	var nodes []*yaml.Node
	for i, item := range d.Content {
		if s, ok := p.str(item, index(field, i)); ok {
			vals = append(vals, strings.TrimSpace(s))
			nodes = append(nodes, item)
		}
	}
	return vals, nodes
}

// syncs reads local:remote pairs; local is relative to the manifest, remote absolute.
func (p *parser) syncs(n *yaml.Node, field string) []Sync {
	vals, nodes := p.itemStrings(n, field, "local:remote folder pairs")
	var out []Sync
	for i, s := range vals {
		f := index(field, i)
		local, remote, ok := strings.Cut(s, ":")
		if !ok || local == "" || remote == "" || strings.Contains(remote, ":") {
			p.errorf(nodes[i], f, "expected local:remote (for example .:/app), found %q", s)
			continue
		}
		if !strings.HasPrefix(remote, "/") {
			p.errorf(nodes[i], f, "the remote folder must be an absolute path in the container, found %q", remote)
			continue
		}
		out = append(out, Sync{Local: p.absPath(local), Remote: remote})
	}
	return out
}

// forwards reads local:remote, local:service:remote, or a bare port (the same on both sides).
func (p *parser) forwards(n *yaml.Node, field string) []Forward {
	vals, nodes := p.itemStrings(n, field, "local:remote or local:service:remote ports")
	var out []Forward
	for i, s := range vals {
		f := index(field, i)
		parts := strings.Split(s, ":")
		var fw Forward
		ok := true
		switch len(parts) {
		case 1:
			fw.Local, ok = p.portText(nodes[i], f, parts[0])
			fw.Remote = fw.Local
		case 2:
			var ok2 bool
			fw.Local, ok = p.portText(nodes[i], f, parts[0])
			fw.Remote, ok2 = p.portText(nodes[i], f, parts[1])
			ok = ok && ok2
		case 3:
			var ok2 bool
			fw.Local, ok = p.portText(nodes[i], f, parts[0])
			fw.Service = parts[1]
			fw.Remote, ok2 = p.portText(nodes[i], f, parts[2])
			ok = ok && ok2
			if ok && !p.checkName(nodes[i], f, "service", fw.Service) {
				ok = false
			}
		default:
			p.errorf(nodes[i], f, "expected local:remote or local:service:remote (for example 8080:80 or 5432:db:5432), found %q", s)
			ok = false
		}
		if ok {
			out = append(out, fw)
		}
	}
	return out
}

// reverses reads remote:local pairs.
func (p *parser) reverses(n *yaml.Node, field string) []Reverse {
	vals, nodes := p.itemStrings(n, field, "remote:local ports")
	var out []Reverse
	for i, s := range vals {
		f := index(field, i)
		remote, local, found := strings.Cut(s, ":")
		if !found || strings.Contains(local, ":") {
			p.errorf(nodes[i], f, "expected remote:local (for example 9000:9000), found %q", s)
			continue
		}
		r, ok1 := p.portText(nodes[i], f, remote)
		l, ok2 := p.portText(nodes[i], f, local)
		if ok1 && ok2 {
			out = append(out, Reverse{Remote: r, Local: l})
		}
	}
	return out
}

func (p *parser) portText(n *yaml.Node, field, s string) (int32, bool) {
	v, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || v < 1 || v > 65535 {
		p.errorf(n, field, "expected a port between 1 and 65535, found %q", s)
		return 0, false
	}
	return int32(v), true
}

// resources reads {requests, limits}, each {cpu, memory} as Kubernetes quantities.
func (p *parser) resources(n *yaml.Node, field string) compose.Resources {
	var r compose.Resources
	es, _ := p.mapping(n, field)
	for _, e := range es {
		f := join(field, e.key)
		switch e.key {
		case "requests":
			r.Requests = p.resourceList(e.val, f)
		case "limits":
			r.Limits = p.resourceList(e.val, f)
		default:
			p.ignore(e.keyNode, f)
		}
	}
	return r
}

func (p *parser) resourceList(n *yaml.Node, field string) compose.ResourceList {
	var l compose.ResourceList
	es, _ := p.mapping(n, field)
	for _, e := range es {
		f := join(field, e.key)
		switch e.key {
		case "cpu":
			l.CPU, _ = p.quantity(e.val, f, "a CPU amount (for example 500m or 1)")
		case "memory":
			l.Memory, _ = p.quantity(e.val, f, "a memory amount (for example 512Mi or 1Gi)")
		default:
			p.ignore(e.keyNode, f)
		}
	}
	return l
}

func (p *parser) quantity(n *yaml.Node, field, what string) (string, bool) {
	s, ok := p.str(n, field)
	if !ok || s == "" {
		return "", ok
	}
	q, err := resource.ParseQuantity(strings.TrimSpace(s))
	if err != nil || q.Sign() < 0 {
		p.errorf(n, field, "expected %s, found %q", what, s)
		return "", false
	}
	return strings.TrimSpace(s), true
}

func (p *parser) securityContext(n *yaml.Node, field string) *SecurityContext {
	sc := &SecurityContext{}
	es, ok := p.mapping(n, field)
	if !ok {
		return nil
	}
	id := func(e entry, f string) *int64 {
		v, ok := p.int64Val(e.val, f)
		if !ok {
			return nil
		}
		if v < 0 || v > 2147483647 {
			p.errorf(e.val, f, "expected a user or group id between 0 and 2147483647, found %d", v)
			return nil
		}
		return &v
	}
	for _, e := range es {
		f := join(field, e.key)
		switch e.key {
		case "runAsUser":
			sc.RunAsUser = id(e, f)
		case "runAsGroup":
			sc.RunAsGroup = id(e, f)
		case "fsGroup":
			sc.FSGroup = id(e, f)
		case "runAsNonRoot":
			if b, ok := p.boolVal(e.val, f); ok {
				sc.RunAsNonRoot = &b
			}
		case "capabilities":
			ces, _ := p.mapping(e.val, f)
			for _, c := range ces {
				cf := join(f, c.key)
				switch c.key {
				case "add":
					sc.CapAdd, _ = p.strList(c.val, cf)
				case "drop":
					sc.CapDrop, _ = p.strList(c.val, cf)
				default:
					p.ignore(c.keyNode, cf)
				}
			}
		default:
			p.ignore(e.keyNode, f)
		}
	}
	return sc
}

func (p *parser) persistentVolume(n *yaml.Node, field string) *PersistentVolume {
	pv := &PersistentVolume{Enabled: true, Size: DefaultVolumeSize}
	es, ok := p.mapping(n, field)
	if !ok {
		return nil
	}
	for _, e := range es {
		f := join(field, e.key)
		switch e.key {
		case "enabled":
			pv.Enabled, _ = p.boolVal(e.val, f)
		case "size":
			if s, ok := p.quantity(e.val, f, "a volume size (for example 2Gi)"); ok && s != "" {
				pv.Size = s
			}
		case "storageClass":
			pv.StorageClass, _ = p.str(e.val, f)
		default:
			p.ignore(e.keyNode, f)
		}
	}
	return pv
}

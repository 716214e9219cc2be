package manifest

import (
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/devtool/devtool/internal/compose"
	"github.com/devtool/devtool/internal/yamlsrc"
)

// devSection reads the dev map: development container name -> settings.
func (p *parser) devSection(n *yaml.Node, field string) []*Dev {
	es, _ := p.Mapping(n, field)
	var out []*Dev
	for _, e := range es {
		f := yamlsrc.Join(field, e.Key)
		p.checkName(e.KeyNode, f, "development container", e.Key)
		out = append(out, p.dev(e, f))
	}
	return out
}

func (p *parser) dev(e yamlsrc.Entry, field string) *Dev {
	d := &Dev{Name: e.Key, Pos: p.Pos(e.KeyNode)}
	es, ok := p.Mapping(e.Val, field)
	if !ok {
		return d
	}
	for _, de := range es {
		f := yamlsrc.Join(field, de.Key)
		switch de.Key {
		case "image":
			d.Image, _ = p.Str(de.Val, f)
			d.SetSource("image", p.Pos(yamlsrc.Deref(de.Val)), f)
		case "command":
			d.Command = p.Command(de.Val, f)
		case "workdir":
			// Judged by the dev commands' input checks (internal/dev.Validate: absolute and clean,
			// exit 2), not here: the file itself is well formed.
			if s, ok := p.Str(de.Val, f); ok && s != "" {
				d.Workdir = s
				d.SetSource("workdir", p.Pos(yamlsrc.Deref(de.Val)), f)
			}
		case "sync":
			d.Sync = p.syncs(d, de.Val, f)
		case "forward":
			d.Forward = p.forwards(d, de.Val, f)
		case "reverse":
			d.Reverse = p.reverses(d, de.Val, f)
		case "environment":
			d.Environment = p.environment(d, de.Val, f)
		case "resources":
			d.Resources = p.resources(d, de.Val, f)
		case "securityContext":
			d.SecurityContext = p.securityContext(de.Val, f)
		case "persistentVolume":
			d.PersistentVolume = p.persistentVolume(de.Val, f)
		case "selector":
			d.Selector = p.StringMap(de.Val, f)
		case "container":
			d.Container, _ = p.Str(de.Val, f)
		case "autocreate":
			d.Autocreate, _ = p.Bool(de.Val, f)
		case "services":
			d.Services = p.devServices(de.Val, f)
		default:
			if !strings.HasPrefix(de.Key, "x-") {
				p.Ignore(de.KeyNode, f)
			}
		}
	}
	if d.Autocreate && d.Image == "" {
		p.Errorf(e.KeyNode, yamlsrc.Join(field, "image"), "image is required with autocreate: true (there is no workload to take it from)")
	}
	return d
}

// devServices reads the services `restart` acts on: a list of service names, each once.
func (p *parser) devServices(n *yaml.Node, field string) []string {
	vals, nodes := p.itemStrings(n, field, "service names")
	var out []string
	seen := map[string]bool{}
	for i, s := range vals {
		f := yamlsrc.Index(field, i)
		if !p.checkName(nodes[i], f, "service", s) {
			continue
		}
		if seen[s] {
			p.Errorf(nodes[i], f, "service %q is listed twice", s)
			continue
		}
		seen[s] = true
		out = append(out, s)
	}
	return out
}

// environment reads a list of NAME=value or a map; a bare NAME takes its value from the
// variable sources and is dropped when they do not define it.
func (p *parser) environment(d *Dev, n *yaml.Node, field string) map[string]string {
	kvs, _ := p.KeyValues(n, field)
	if len(kvs) == 0 {
		return nil
	}
	list := yamlsrc.Deref(n).Kind == yaml.SequenceNode
	out := map[string]string{}
	for i, e := range kvs {
		f := yamlsrc.Join(field, e.Key)
		if list {
			f = yamlsrc.Index(field, i)
		}
		if e.HasValue {
			out[e.Key] = e.Value
		} else if v, ok := p.Lookup(e.Key); ok {
			out[e.Key] = v
		} else {
			continue
		}
		d.SetSource(yamlsrc.Join("environment", e.Key), p.Pos(e.Node), f)
	}
	return out
}

func (p *parser) itemStrings(n *yaml.Node, field, what string) ([]string, []*yaml.Node) {
	d := yamlsrc.Deref(n)
	if yamlsrc.IsNull(d) {
		return nil, nil
	}
	if d.Kind != yaml.SequenceNode {
		p.Expected(n, field, "a list of "+what)
		return nil, nil
	}
	var vals []string
	var nodes []*yaml.Node
	for i, item := range d.Content {
		if s, ok := p.Str(item, yamlsrc.Index(field, i)); ok {
			vals = append(vals, strings.TrimSpace(s))
			nodes = append(nodes, item)
		}
	}
	return vals, nodes
}

// syncs reads local:remote pairs; local is relative to the manifest. The remote folder is judged by
// internal/dev.Validate (absolute, clean, not a system folder).
func (p *parser) syncs(d *Dev, n *yaml.Node, field string) []Sync {
	vals, nodes := p.itemStrings(n, field, "local:remote folder pairs")
	var out []Sync
	for i, s := range vals {
		f := yamlsrc.Index(field, i)
		local, remote, ok := strings.Cut(s, ":")
		if !ok || local == "" || remote == "" || strings.Contains(remote, ":") {
			p.Errorf(nodes[i], f, "expected local:remote (for example .:/app), found %q", s)
			continue
		}
		d.SetSource(yamlsrc.Index("sync", len(out)), p.Pos(nodes[i]), f)
		out = append(out, Sync{Local: p.absPath(local), Remote: remote})
	}
	return out
}

// forwards reads local:remote, local:service:remote, or a bare port (the same on both sides).
func (p *parser) forwards(d *Dev, n *yaml.Node, field string) []Forward {
	vals, nodes := p.itemStrings(n, field, "local:remote or local:service:remote ports")
	var out []Forward
	for i, s := range vals {
		f := yamlsrc.Index(field, i)
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
			p.Errorf(nodes[i], f, "expected local:remote or local:service:remote (for example 8080:80 or 5432:db:5432), found %q", s)
			ok = false
		}
		if ok {
			d.SetSource(yamlsrc.Index("forward", len(out)), p.Pos(nodes[i]), f)
			out = append(out, fw)
		}
	}
	return out
}

// reverses reads remote:local pairs.
func (p *parser) reverses(d *Dev, n *yaml.Node, field string) []Reverse {
	vals, nodes := p.itemStrings(n, field, "remote:local ports")
	var out []Reverse
	for i, s := range vals {
		f := yamlsrc.Index(field, i)
		remote, local, found := strings.Cut(s, ":")
		if !found || strings.Contains(local, ":") {
			p.Errorf(nodes[i], f, "expected remote:local (for example 9000:9000), found %q", s)
			continue
		}
		r, ok1 := p.portText(nodes[i], f, remote)
		l, ok2 := p.portText(nodes[i], f, local)
		if ok1 && ok2 {
			d.SetSource(yamlsrc.Index("reverse", len(out)), p.Pos(nodes[i]), f)
			out = append(out, Reverse{Remote: r, Local: l})
		}
	}
	return out
}

func (p *parser) portText(n *yaml.Node, field, s string) (int32, bool) {
	v, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || v < 1 || v > 65535 {
		p.Errorf(n, field, "expected a port between 1 and 65535, found %q", s)
		return 0, false
	}
	return int32(v), true
}

// resources reads {requests, limits}, each {cpu, memory} as Kubernetes quantities.
func (p *parser) resources(d *Dev, n *yaml.Node, field string) compose.Resources {
	var r compose.Resources
	es, _ := p.Mapping(n, field)
	for _, e := range es {
		f := yamlsrc.Join(field, e.Key)
		switch e.Key {
		case "requests", "limits":
			l := p.resourceList(e.Val, f)
			for _, k := range []string{"cpu", "memory"} {
				if pos, ok := l.pos[k]; ok {
					d.SetSource("resources."+e.Key+"."+k, pos, yamlsrc.Join(f, k))
				}
			}
			if e.Key == "requests" {
				r.Requests = l.ResourceList
			} else {
				r.Limits = l.ResourceList
			}
		default:
			p.Ignore(e.KeyNode, f)
		}
	}
	return r
}

// positionedList is a resource list with where each of its values was written.
type positionedList struct {
	compose.ResourceList
	pos map[string]yamlsrc.Position
}

func (p *parser) resourceList(n *yaml.Node, field string) positionedList {
	l := positionedList{pos: map[string]yamlsrc.Position{}}
	es, _ := p.Mapping(n, field)
	for _, e := range es {
		f := yamlsrc.Join(field, e.Key)
		switch e.Key {
		case "cpu":
			l.CPU, _ = p.quantity(e.Val, f, "a CPU amount (for example 500m or 1)")
			l.pos["cpu"] = p.Pos(yamlsrc.Deref(e.Val))
		case "memory":
			l.Memory, _ = p.quantity(e.Val, f, "a memory amount (for example 512Mi or 1Gi)")
			l.pos["memory"] = p.Pos(yamlsrc.Deref(e.Val))
		default:
			p.Ignore(e.KeyNode, f)
		}
	}
	return l
}

func (p *parser) quantity(n *yaml.Node, field, what string) (string, bool) {
	s, ok := p.Str(n, field)
	if !ok || s == "" {
		return "", ok
	}
	q, err := resource.ParseQuantity(strings.TrimSpace(s))
	if err != nil || q.Sign() < 0 {
		p.Errorf(n, field, "expected %s, found %q", what, s)
		return "", false
	}
	return strings.TrimSpace(s), true
}

func (p *parser) securityContext(n *yaml.Node, field string) *SecurityContext {
	sc := &SecurityContext{}
	es, ok := p.Mapping(n, field)
	if !ok {
		return nil
	}
	id := func(e yamlsrc.Entry, f string) *int64 {
		v, ok := p.Int64(e.Val, f)
		if !ok {
			return nil
		}
		if v < 0 || v > 2147483647 {
			p.Errorf(e.Val, f, "expected a user or group id between 0 and 2147483647, found %d", v)
			return nil
		}
		return &v
	}
	for _, e := range es {
		f := yamlsrc.Join(field, e.Key)
		switch e.Key {
		case "runAsUser":
			sc.RunAsUser = id(e, f)
		case "runAsGroup":
			sc.RunAsGroup = id(e, f)
		case "fsGroup":
			sc.FSGroup = id(e, f)
		case "runAsNonRoot":
			if b, ok := p.Bool(e.Val, f); ok {
				sc.RunAsNonRoot = &b
			}
		case "capabilities":
			ces, _ := p.Mapping(e.Val, f)
			for _, c := range ces {
				cf := yamlsrc.Join(f, c.Key)
				switch c.Key {
				case "add":
					sc.CapAdd, _ = p.StrList(c.Val, cf)
				case "drop":
					sc.CapDrop, _ = p.StrList(c.Val, cf)
				default:
					p.Ignore(c.KeyNode, cf)
				}
			}
		default:
			p.Ignore(e.KeyNode, f)
		}
	}
	return sc
}

func (p *parser) persistentVolume(n *yaml.Node, field string) *PersistentVolume {
	pv := &PersistentVolume{Enabled: true, Size: DefaultVolumeSize}
	es, ok := p.Mapping(n, field)
	if !ok {
		return nil
	}
	for _, e := range es {
		f := yamlsrc.Join(field, e.Key)
		switch e.Key {
		case "enabled":
			pv.Enabled, _ = p.Bool(e.Val, f)
		case "size":
			if s, ok := p.quantity(e.Val, f, "a volume size (for example 5Gi)"); ok && s != "" {
				pv.Size = s
			}
		case "storageClass":
			pv.StorageClass, _ = p.Str(e.Val, f)
		default:
			p.Ignore(e.KeyNode, f)
		}
	}
	return pv
}

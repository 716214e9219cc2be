package compose

import (
	"fmt"
	"path"
	"strings"

	"gopkg.in/yaml.v3"
	"k8s.io/apimachinery/pkg/api/resource"
)

// DefaultVolumeSize is the size of a volume without driver_opts.size (A3).
const DefaultVolumeSize = "1Gi"

// volumes reads the top-level volumes (A3).
func (l *loader) volumes(n *yaml.Node, p *Project) {
	es, _ := l.mapping(n, "volumes")
	for _, e := range es {
		field := joinField("volumes", e.key)
		l.checkName(e.keyNode, field, "volume", e.key)
		v := &Volume{Name: e.key, Size: DefaultVolumeSize, Pos: l.pos(e.keyNode)}
		fields, _ := l.mapping(e.val, field)
		for _, f := range fields {
			ff := joinField(field, f.key)
			switch f.key {
			case "labels":
				v.Labels = l.stringMap(f.val, ff)
			case "driver_opts":
				l.driverOpts(f.val, ff, v)
			default:
				if !strings.HasPrefix(f.key, "x-") {
					l.ignore(f.keyNode, ff)
				}
			}
		}
		p.Volumes = append(p.Volumes, v)
	}
}

// sizeQuantity accepts a Kubernetes quantity ("10Gi"), the same with a trailing B ("10GiB"),
// or Docker's binary notation ("10G", "10gb").
func sizeQuantity(s string) (string, error) {
	s = strings.TrimSpace(s)
	if composeBytes.MatchString(s) {
		// Docker's notation first: "10G" means 10 GiB there, not 10^10 bytes.
		q, err := memoryQuantity(s)
		if err != nil || q == "0" {
			return "", fmt.Errorf("invalid size %q", s)
		}
		return q, nil
	}
	if k8s, ok := strings.CutSuffix(s, "iB"); ok {
		s = k8s + "i"
	}
	q, err := resource.ParseQuantity(s)
	if err != nil || q.Sign() <= 0 {
		return "", fmt.Errorf("invalid size %q", s)
	}
	return q.String(), nil
}

func (l *loader) driverOpts(n *yaml.Node, field string, v *Volume) {
	es, _ := l.mapping(n, field)
	for _, e := range es {
		f := joinField(field, e.key)
		switch e.key {
		case "class":
			v.Class, _ = l.str(e.val, f)
		case "size":
			s, ok := l.str(e.val, f)
			if !ok || s == "" {
				continue
			}
			q, err := sizeQuantity(s)
			if err != nil {
				l.errorf(e.val, f, "expected a size such as 1Gi, 500Mi or 10G, found %q", s)
				continue
			}
			v.Size = q
		default:
			l.ignore(e.keyNode, f)
		}
	}
}

// serviceVolumes reads a service's volumes: "name:/path", "/path", "./host:/path" (with an
// optional ":ro"), or the long syntax {type, source, target, read_only}.
func (l *loader) serviceVolumes(n *yaml.Node, field string, p *Project) []VolumeMount {
	d := deref(n)
	if isNull(d) {
		return nil
	}
	if d.Kind != yaml.SequenceNode {
		l.expected(n, field, "a list of volumes")
		return nil
	}
	var out []VolumeMount
	for i, item := range d.Content {
		f := index(field, i)
		var m VolumeMount
		var ok bool
		if id := deref(item); id != nil && id.Kind == yaml.MappingNode {
			m, ok = l.longVolume(item, f)
		} else if s, good := l.str(item, f); good {
			m, ok = l.shortVolume(s, item, f)
		}
		if !ok {
			continue
		}
		m.Pos = l.pos(deref(item))
		if m.Kind == VolumeNamed && p.Volume(m.Source) == nil {
			l.errorf(item, f, "volume %q is not defined in the top-level volumes (defined: %s)", m.Source, volumeNames(p))
			continue
		}
		out = append(out, m)
	}
	return out
}

func (l *loader) shortVolume(s string, n *yaml.Node, field string) (VolumeMount, bool) {
	parts := strings.Split(s, ":")
	var m VolumeMount
	switch len(parts) {
	case 1:
		m.Kind, m.Target = VolumeAnonymous, parts[0]
	case 2, 3:
		m.Target = parts[1]
		l.setSource(&m, parts[0])
		if len(parts) == 3 {
			for _, opt := range strings.Split(parts[2], ",") {
				switch opt {
				case "ro":
					m.ReadOnly = true
				case "rw", "":
				default:
					l.warnf("%s: %s: volume option %q ignored", l.pos(n), field, opt)
				}
			}
		}
	default:
		l.errorf(n, field, "expected name:/path, /path or ./host/path:/path with an optional :ro, found %q", s)
		return m, false
	}
	return m, l.checkMount(m, n, field)
}

// setSource decides between a named volume and a host path, the way Compose does: a source
// that starts with '.', '/' or '~' is a path.
func (l *loader) setSource(m *VolumeMount, src string) {
	if src == "." || strings.HasPrefix(src, "./") || strings.HasPrefix(src, "../") ||
		strings.HasPrefix(src, "/") || src == "~" || strings.HasPrefix(src, "~/") || src == ".." {
		m.Kind, m.Source = VolumeHost, l.absPath(src)
		return
	}
	m.Kind, m.Source = VolumeNamed, src
}

func (l *loader) checkMount(m VolumeMount, n *yaml.Node, field string) bool {
	if m.Kind == VolumeNamed && m.Source == "" {
		l.errorf(n, field, "the volume source is empty")
		return false
	}
	if !path.IsAbs(m.Target) {
		l.errorf(n, field, "the container path must be absolute, found %q", m.Target)
		return false
	}
	return true
}

func (l *loader) longVolume(n *yaml.Node, field string) (VolumeMount, bool) {
	var m VolumeMount
	typ, src := "", ""
	es, _ := l.mapping(n, field)
	for _, e := range es {
		f := joinField(field, e.key)
		switch e.key {
		case "type":
			typ, _ = l.str(e.val, f)
		case "source":
			src, _ = l.str(e.val, f)
		case "target":
			m.Target, _ = l.str(e.val, f)
		case "read_only":
			m.ReadOnly, _ = l.boolVal(e.val, f)
		default:
			if !strings.HasPrefix(e.key, "x-") {
				l.ignore(e.keyNode, f)
			}
		}
	}
	switch typ {
	case "volume":
		if src == "" {
			m.Kind = VolumeAnonymous
		} else {
			m.Kind, m.Source = VolumeNamed, src
		}
	case "bind":
		if src == "" {
			l.errorf(n, field, "a bind mount needs a source")
			return m, false
		}
		m.Kind, m.Source = VolumeHost, l.absPath(src)
	case "":
		l.errorf(n, field, "type is required (volume or bind)")
		return m, false
	default:
		l.errorf(n, joinField(field, "type"), "expected volume or bind, found %q (other mount types are not supported)", typ)
		return m, false
	}
	return m, l.checkMount(m, n, field)
}

func volumeNames(p *Project) string {
	if len(p.Volumes) == 0 {
		return "none"
	}
	names := make([]string, len(p.Volumes))
	for i, v := range p.Volumes {
		names[i] = v.Name
	}
	return strings.Join(names, ", ")
}

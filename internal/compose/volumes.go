package compose

import (
	"fmt"
	"path"
	"strings"

	"gopkg.in/yaml.v3"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/devtool/devtool/internal/projectpath"
	"github.com/devtool/devtool/internal/yamlsrc"
)

// DefaultVolumeSize is the size of a volume without driver_opts.size (A3).
const DefaultVolumeSize = "1Gi"

// volumes reads the top-level volumes (A3).
func (l *loader) volumes(n *yaml.Node, p *Project) {
	es, _ := l.Mapping(n, "volumes")
	for _, e := range es {
		field := yamlsrc.Join("volumes", e.Key)
		l.kubeName(e.KeyNode, field, "volume", e.Key)
		v := &Volume{Name: e.Key, Size: DefaultVolumeSize, Pos: l.Pos(e.KeyNode)}
		fields, _ := l.Mapping(e.Val, field)
		for _, f := range fields {
			ff := yamlsrc.Join(field, f.Key)
			switch f.Key {
			case "labels":
				v.Labels = l.StringMap(f.Val, ff)
			case "driver_opts":
				l.driverOpts(f.Val, ff, v)
			case "annotations":
				v.Annotations = l.StringMap(f.Val, ff)
			case "size", "class":
				// Okteto's short form of driver_opts.size and driver_opts.class.
				m := &yaml.Node{Kind: yaml.MappingNode, Content: []*yaml.Node{f.KeyNode, f.Val}}
				l.driverOpts(m, field, v)
			default:
				if !strings.HasPrefix(f.Key, "x-") {
					l.Ignore(f.KeyNode, ff)
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
			return "", fmt.Errorf("invalid size %s", yamlsrc.Quote(s))
		}
		return q, nil
	}
	if k8s, ok := strings.CutSuffix(s, "iB"); ok {
		s = k8s + "i"
	}
	q, err := resource.ParseQuantity(s)
	if err != nil || q.Sign() <= 0 {
		return "", fmt.Errorf("invalid size %s", yamlsrc.Quote(s))
	}
	return q.String(), nil
}

func (l *loader) driverOpts(n *yaml.Node, field string, v *Volume) {
	es, _ := l.Mapping(n, field)
	for _, e := range es {
		f := yamlsrc.Join(field, e.Key)
		switch e.Key {
		case "class":
			v.Class, _ = l.Str(e.Val, f)
		case "size":
			s, ok := l.Str(e.Val, f)
			if !ok || s == "" {
				continue
			}
			q, err := sizeQuantity(s)
			if err != nil {
				l.Errorf(e.Val, f, "expected a size such as 1Gi, 500Mi or 10G, found %q", s)
				continue
			}
			v.Size = q
		default:
			l.Ignore(e.KeyNode, f)
		}
	}
}

// serviceVolumes reads a service's volumes: "name:/path", "/path", "./host:/path" (with an
// optional ":ro"), or the long syntax {type, source, target, read_only}.
func (l *loader) serviceVolumes(n *yaml.Node, field string, p *Project) []VolumeMount {
	d := yamlsrc.Deref(n)
	if yamlsrc.IsNull(d) {
		return nil
	}
	if d.Kind != yaml.SequenceNode {
		l.Expected(n, field, "a list of volumes")
		return nil
	}
	var out []VolumeMount
	for i, item := range d.Content {
		f := yamlsrc.Index(field, i)
		var m VolumeMount
		var ok bool
		if id := yamlsrc.Deref(item); id != nil && id.Kind == yaml.MappingNode {
			m, ok = l.longVolume(item, f)
		} else if s, good := l.Str(item, f); good {
			m, ok = l.shortVolume(s, item, f)
		}
		if !ok {
			continue
		}
		m.Pos = l.Pos(yamlsrc.Deref(item))
		if m.Kind == VolumeHost && projectpath.IsSystemPath(m.Source) {
			l.systemMounts = append(l.systemMounts, fmt.Sprintf("%s: %s: %s", m.Pos, f, m.Source))
			continue
		}
		if m.Kind == VolumeNamed && p.Volume(m.Source) == nil {
			l.Errorf(item, f, "volume %q is not defined in the top-level volumes (defined: %s)", m.Source, volumeNames(p))
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
		l.setSource(&m, parts[0], n)
		if len(parts) == 3 {
			for _, opt := range strings.Split(parts[2], ",") {
				switch opt {
				case "ro":
					m.ReadOnly = true
				case "rw", "":
				case "cached", "delegated", "consistent", "z", "Z", "nocopy":
					// Docker Desktop's file-sharing hints and SELinux relabelling: nothing to
					// do on a cluster, and Compose accepts them, so they are accepted here.
				default:
					l.Warnf("%s: %s: volume option %q ignored", l.Pos(n), field, opt)
				}
			}
		}
	default:
		l.Errorf(n, field, "expected name:/path, /path or ./host/path:/path with an optional :ro, found %q", s)
		return m, false
	}
	return m, l.checkMount(m, n, field)
}

// setSource decides between a named volume and a host path, the way Compose does: a source
// that starts with '.', '/' or '~' is a path.
func (l *loader) setSource(m *VolumeMount, src string, n *yaml.Node) {
	if isHostPath(src) {
		m.Kind, m.Source = VolumeHost, l.absPath(n, src)
		return
	}
	m.Kind, m.Source = VolumeNamed, src
}

// isHostPath is Compose's rule for the source of a short volume: a path when it starts with
// '.', '/' or '~' (".psqlrc", ".:/app", "../x", "~/x", "/abs"), a volume name otherwise.
func isHostPath(src string) bool {
	return strings.HasPrefix(src, ".") || strings.HasPrefix(src, "/") || strings.HasPrefix(src, "~")
}

func (l *loader) checkMount(m VolumeMount, n *yaml.Node, field string) bool {
	if m.Kind == VolumeNamed && m.Source == "" {
		l.Errorf(n, field, "the volume source is empty")
		return false
	}
	if !path.IsAbs(m.Target) {
		l.Errorf(n, field, "the container path must be absolute, found %q", m.Target)
		return false
	}
	return true
}

func (l *loader) longVolume(n *yaml.Node, field string) (VolumeMount, bool) {
	var m VolumeMount
	typ, src := "", ""
	es, _ := l.Mapping(n, field)
	for _, e := range es {
		f := yamlsrc.Join(field, e.Key)
		switch e.Key {
		case "type":
			typ, _ = l.Str(e.Val, f)
		case "source":
			src, _ = l.Str(e.Val, f)
		case "target":
			m.Target, _ = l.Str(e.Val, f)
		case "read_only":
			m.ReadOnly, _ = l.Bool(e.Val, f)
		case "consistency":
			// Docker Desktop's file-sharing hint: nothing to do on a cluster.
		case "bind", "volume":
			// create_host_path, propagation, selinux, nocopy, subpath: Docker-host details.
			opts, _ := l.Mapping(e.Val, f)
			for _, o := range opts {
				switch o.Key {
				case "create_host_path", "propagation", "selinux", "nocopy":
				default:
					l.Ignore(o.KeyNode, yamlsrc.Join(f, o.Key))
				}
			}
		case "tmpfs":
			opts, _ := l.Mapping(e.Val, f)
			for _, o := range opts {
				of := yamlsrc.Join(f, o.Key)
				switch o.Key {
				case "size":
					if s, ok := l.Str(o.Val, of); ok && s != "" && s != "0" {
						q, err := sizeQuantity(s)
						if err != nil {
							l.Errorf(o.Val, of, "expected a size such as 64Mi or 100m, found %q", s)
						}
						m.Size = q
					}
				case "mode":
				default:
					l.Ignore(o.KeyNode, of)
				}
			}
		default:
			if !strings.HasPrefix(e.Key, "x-") {
				l.Ignore(e.KeyNode, f)
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
			l.Errorf(n, field, "a bind mount needs a source")
			return m, false
		}
		m.Kind, m.Source = VolumeHost, l.absPath(n, src)
	case "tmpfs":
		m.Kind = VolumeTmpfs
	case "":
		l.Errorf(n, field, "type is required (volume, bind or tmpfs)")
		return m, false
	default:
		l.Errorf(n, yamlsrc.Join(field, "type"), "expected volume, bind or tmpfs, found %q (other mount types are not supported)", typ)
		return m, false
	}
	return m, l.checkMount(m, n, field)
}

// systemMountsWarning is the one warning for the host volumes dropped because they name the
// Docker host itself (its socket, clock, kernel file systems), not a project file.
func systemMountsWarning(mounts []string) string {
	return "not mounted: system paths of the Docker host, not project files, which mean nothing on a cluster node: " + strings.Join(mounts, "; ")
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

// tmpfs reads the service's tmpfs field: a path or a list of paths, each with optional
// options after a colon ("/run:size=64m,mode=1777"); size is kept, the rest has no meaning
// in a cluster.
func (l *loader) tmpfs(n *yaml.Node, field string) []VolumeMount {
	vals, isString, ok := l.StrOrList(n, field)
	if !ok {
		return nil
	}
	d := yamlsrc.Deref(n)
	var out []VolumeMount
	for i, v := range vals {
		item, f := d, field
		if !isString {
			item, f = d.Content[i], yamlsrc.Index(field, i)
		}
		target, opts, _ := strings.Cut(v, ":")
		m := VolumeMount{Kind: VolumeTmpfs, Target: target, Pos: l.Pos(yamlsrc.Deref(item))}
		for _, o := range strings.Split(opts, ",") {
			if size, ok := strings.CutPrefix(o, "size="); ok {
				q, err := sizeQuantity(size)
				if err != nil {
					l.Errorf(item, f, "expected a size such as 64m or 64Mi, found %q", size)
					continue
				}
				m.Size = q
			}
		}
		if l.checkMount(m, item, f) {
			out = append(out, m)
		}
	}
	return out
}

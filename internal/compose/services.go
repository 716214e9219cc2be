package compose

import (
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/devtool/devtool/internal/yamlsrc"
)

func (l *loader) services(n *yaml.Node, p *Project) {
	es, _ := l.Mapping(n, "services")
	for i, e := range es {
		if i%256 == 0 && l.cancelled() != nil {
			return
		}
		field := yamlsrc.Join("services", e.Key)
		l.kubeName(e.KeyNode, field, "service", e.Key)
		p.Services = append(p.Services, l.service(e, field, p))
	}
}

// service reads one service. Fields with two notations (resources, restart, scale) are
// collected first and unified at the end.
func (l *loader) service(e yamlsrc.Entry, field string, p *Project) *Service {
	s := &Service{Name: e.Key, Pos: l.Pos(e.KeyNode), Scale: 1, Restart: Restart{Policy: RestartAlways}}
	fields, ok := l.Mapping(e.Val, field)
	if !ok {
		return s
	}
	var envFiles, env, scale, resources, deploy, restart *yamlsrc.Entry
	var short []*yamlsrc.Entry // cpus, cpu_count, mem_limit, mem_reservation
	seen := map[string]string{}
	for i := range fields {
		f := &fields[i]
		ff := yamlsrc.Join(field, f.Key)
		key, ok := l.serviceKey(f, field, seen) // Okteto's spellings (okteto.go)
		if !ok {
			continue
		}
		switch key {
		case "build":
			s.Build = l.build(f.Val, ff)
		case "image":
			s.Image, _ = l.Str(f.Val, ff)
		case "cap_add":
			s.CapAdd, _ = l.StrList(f.Val, ff)
		case "cap_drop":
			s.CapDrop, _ = l.StrList(f.Val, ff)
		case "command":
			s.Command = l.Command(f.Val, ff)
		case "entrypoint":
			s.Entrypoint = l.Command(f.Val, ff)
		case "working_dir":
			s.WorkingDir, _ = l.Str(f.Val, ff)
		case "depends_on":
			s.DependsOn = l.dependsOn(f.Val, ff)
		case "env_file":
			envFiles = f
		case "environment":
			env = f
		case "healthcheck":
			s.Healthcheck = l.healthcheck(f.Val, ff)
		case "labels":
			s.Labels = l.StringMap(f.Val, ff)
		case "ports":
			s.Ports = l.ports(f.Val, ff)
		case "scale":
			scale = f
		case "resources":
			resources = f
		case "deploy":
			deploy = f
		case "restart":
			restart = f
		case "stop_grace_period":
			if d, ok := l.duration(f.Val, ff, true); ok {
				s.StopGracePeriod = &d
			}
		case "volumes":
			s.Volumes = append(s.Volumes, l.serviceVolumes(f.Val, ff, p)...)
		case "tmpfs":
			s.Volumes = append(s.Volumes, l.tmpfs(f.Val, ff)...)
		case "x-node-selector":
			s.NodeSelector = l.StringMap(f.Val, ff)
		case "annotations":
			s.Annotations = l.StringMap(f.Val, ff)
		case "user":
			l.user(f.Val, ff, s)
		case "expose":
			s.Ports = append(s.Ports, l.expose(f.Val, ff)...)
		case "cpus", "cpu_count", "mem_limit", "mem_reservation":
			short = append(short, f)
		case "secrets":
			s.Secrets = l.fileMounts(f.Val, ff, "secret", p)
		case "configs":
			s.Configs = l.fileMounts(f.Val, ff, "config", p)
		default:
			if !strings.HasPrefix(f.Key, "x-") {
				l.Ignore(f.KeyNode, ff)
			}
		}
	}
	s.Environment = l.environment(envFiles, env, field)
	l.unifyDeploy(s, field, scale, resources, deploy, restart)
	l.shortResources(s, field, short)
	if s.Image == "" && s.Build == nil {
		l.Errorf(e.KeyNode, field, "image is required when build is not set")
	}
	return s
}

// environment merges env_file files (in order, later wins) with environment, which wins even
// when a value is empty or undefined. A name without a value takes it from the variable
// sources and is dropped when they do not define it.
func (l *loader) environment(envFiles, env *yamlsrc.Entry, field string) map[string]string {
	out := map[string]string{}
	if envFiles != nil {
		l.envFiles(envFiles, field, out)
	}
	if env != nil {
		kvs, _ := l.KeyValues(env.Val, yamlsrc.Join(field, "environment"))
		for _, e := range kvs {
			if e.HasValue {
				out[e.Key] = e.Value
			} else if v, ok := l.Lookup(e.Key); ok {
				out[e.Key] = v
			} else {
				delete(out, e.Key)
			}
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// envFiles reads env_file: a string, a list of strings, or a list of {path, required}.
func (l *loader) envFiles(e *yamlsrc.Entry, field string, out map[string]string) {
	field = yamlsrc.Join(field, "env_file")
	d := yamlsrc.Deref(e.Val)
	if d != nil && d.Kind == yaml.ScalarNode && !yamlsrc.IsNull(d) {
		for k, v := range l.readEnvFile(d.Value, true, d, field) {
			out[k] = v
		}
		return
	}
	if yamlsrc.IsNull(d) {
		return
	}
	if d.Kind != yaml.SequenceNode {
		l.Expected(e.Val, field, "a path or a list of paths")
		return
	}
	for i, item := range d.Content {
		f := yamlsrc.Index(field, i)
		path, required := "", true
		if id := yamlsrc.Deref(item); id != nil && id.Kind == yaml.MappingNode {
			es, _ := l.Mapping(item, f)
			for _, pe := range es {
				switch pe.Key {
				case "path":
					path, _ = l.Str(pe.Val, yamlsrc.Join(f, "path"))
				case "required":
					required, _ = l.Bool(pe.Val, yamlsrc.Join(f, "required"))
				default:
					l.Ignore(pe.KeyNode, yamlsrc.Join(f, pe.Key))
				}
			}
			if path == "" {
				l.Errorf(item, f, "path is required")
				continue
			}
		} else if s, ok := l.Str(item, f); ok && s != "" {
			path = s
		} else {
			if ok {
				l.Errorf(item, f, "expected a path, found an empty value")
			}
			continue
		}
		for k, v := range l.readEnvFile(path, required, yamlsrc.Deref(item), f) {
			out[k] = v
		}
	}
}

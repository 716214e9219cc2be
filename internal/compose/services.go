package compose

import (
	"strings"

	"github.com/mattn/go-shellwords"
	"gopkg.in/yaml.v3"
)

func (l *loader) services(n *yaml.Node, p *Project) {
	es, _ := l.mapping(n, "services")
	for _, e := range es {
		field := joinField("services", e.key)
		l.checkName(e.keyNode, field, "service", e.key)
		p.Services = append(p.Services, l.service(e, field, p))
	}
}

// service reads one service. Fields with two notations (resources, restart, scale) are
// collected first and unified at the end.
func (l *loader) service(e entry, field string, p *Project) *Service {
	s := &Service{Name: e.key, Pos: l.pos(e.keyNode), Scale: 1, Restart: Restart{Policy: RestartAlways}}
	fields, ok := l.mapping(e.val, field)
	if !ok {
		return s
	}
	var envFiles, env, scale, resources, deploy, restart *entry
	for i := range fields {
		f := &fields[i]
		ff := joinField(field, f.key)
		switch f.key {
		case "build":
			s.Build = l.build(f.val, ff)
		case "image":
			s.Image, _ = l.str(f.val, ff)
		case "cap_add":
			s.CapAdd, _ = l.strList(f.val, ff)
		case "cap_drop":
			s.CapDrop, _ = l.strList(f.val, ff)
		case "command":
			s.Command = l.command(f.val, ff)
		case "entrypoint":
			s.Entrypoint = l.command(f.val, ff)
		case "working_dir":
			s.WorkingDir, _ = l.str(f.val, ff)
		case "depends_on":
			s.DependsOn = l.dependsOn(f.val, ff)
		case "env_file":
			envFiles = f
		case "environment":
			env = f
		case "healthcheck":
			s.Healthcheck = l.healthcheck(f.val, ff)
		case "labels":
			s.Labels = l.stringMap(f.val, ff)
		case "ports":
			s.Ports = l.ports(f.val, ff)
		case "scale":
			scale = f
		case "resources":
			resources = f
		case "deploy":
			deploy = f
		case "restart":
			restart = f
		case "stop_grace_period":
			if d, ok := l.duration(f.val, ff, true); ok {
				s.StopGracePeriod = &d
			}
		case "volumes":
			s.Volumes = l.serviceVolumes(f.val, ff, p)
		case "x-node-selector":
			s.NodeSelector = l.stringMap(f.val, ff)
		default:
			if !strings.HasPrefix(f.key, "x-") {
				l.ignore(f.keyNode, ff)
			}
		}
	}
	s.Environment = l.environment(envFiles, env, field)
	l.unifyDeploy(s, field, scale, resources, deploy, restart)
	if s.Image == "" && s.Build == nil {
		l.errorf(e.keyNode, field, "image is required when build is not set")
	}
	return s
}

// command reads command or entrypoint: a list as written, or a string split like a shell
// would split it (quotes respected, no expansion). Null means "not set".
func (l *loader) command(n *yaml.Node, field string) []string {
	if isNull(n) {
		return nil
	}
	vals, isString, ok := l.strOrList(n, field)
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
		l.errorf(n, field, "cannot split %q into arguments: %v (check the quotes, or write a list)", vals[0], err)
		return nil
	}
	if args == nil {
		args = []string{}
	}
	return args
}

// environment merges env_file files (in order, later wins) with environment, which wins even
// when a value is empty or undefined. A name without a value takes it from the variable
// sources and is dropped when they do not define it.
func (l *loader) environment(envFiles, env *entry, field string) map[string]string {
	out := map[string]string{}
	if envFiles != nil {
		l.envFiles(envFiles, field, out)
	}
	if env != nil {
		kvs, _ := l.keyValues(env.val, joinField(field, "environment"))
		for _, e := range kvs {
			if e.Value != nil {
				out[e.Key] = *e.Value
			} else if v, ok := l.lookup(e.Key); ok {
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
func (l *loader) envFiles(e *entry, field string, out map[string]string) {
	field = joinField(field, "env_file")
	d := deref(e.val)
	if d != nil && d.Kind == yaml.ScalarNode && !isNull(d) {
		for k, v := range l.readEnvFile(d.Value, true, d, field) {
			out[k] = v
		}
		return
	}
	if isNull(d) {
		return
	}
	if d.Kind != yaml.SequenceNode {
		l.expected(e.val, field, "a path or a list of paths")
		return
	}
	for i, item := range d.Content {
		f := index(field, i)
		path, required := "", true
		if id := deref(item); id != nil && id.Kind == yaml.MappingNode {
			es, _ := l.mapping(item, f)
			for _, pe := range es {
				switch pe.key {
				case "path":
					path, _ = l.str(pe.val, joinField(f, "path"))
				case "required":
					required, _ = l.boolVal(pe.val, joinField(f, "required"))
				default:
					l.ignore(pe.keyNode, joinField(f, pe.key))
				}
			}
			if path == "" {
				l.errorf(item, f, "path is required")
				continue
			}
		} else if s, ok := l.str(item, f); ok && s != "" {
			path = s
		} else {
			if ok {
				l.errorf(item, f, "expected a path, found an empty value")
			}
			continue
		}
		for k, v := range l.readEnvFile(path, required, deref(item), f) {
			out[k] = v
		}
	}
}

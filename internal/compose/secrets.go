package compose

import (
	"errors"
	"io/fs"
	"path"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/devtool/devtool/internal/safefile"
	"github.com/devtool/devtool/internal/yamlsrc"
)

// MaxSecretSize is the most a secret or config may hold: Kubernetes refuses a Secret or
// ConfigMap over 1 MiB.
const MaxSecretSize = 1 << 20

// KubeObjectName is the name of the Secret or ConfigMap made for a top-level secret or config:
// lower-case, '_' and '.' as '-'.
func KubeObjectName(name string) string {
	return strings.Trim(strings.NewReplacer("_", "-", ".", "-").Replace(strings.ToLower(name)), "-")
}

// fileObjects reads the top-level secrets or configs (what is "secret" or "config"):
// file: (read now, relative to the compose file), environment: (a variable), content:
// (configs only). external: true is not created by devtool: a warning says the Secret or
// ConfigMap must exist in the namespace.
func (l *loader) fileObjects(n *yaml.Node, what string) []*FileObject {
	field := what + "s"
	es, _ := l.Mapping(n, field)
	var out []*FileObject
	seen := map[string]string{}
	for _, e := range es {
		f := yamlsrc.Join(field, e.Key)
		o := &FileObject{Name: e.Key, Pos: l.Pos(e.KeyNode)}
		kn := KubeObjectName(e.Key)
		if errs := validation.IsDNS1123Subdomain(kn); len(errs) > 0 || kn == "" {
			l.Errorf(e.KeyNode, f, "%s name %q cannot name a Kubernetes object", what, e.Key)
			continue
		}
		if other, dup := seen[kn]; dup {
			l.Errorf(e.KeyNode, f, "%s names %q and %q both become %q in Kubernetes; rename one of them", what, other, e.Key, kn)
			continue
		}
		seen[kn] = e.Key
		if l.failedObjects == nil {
			l.failedObjects = map[string]bool{}
		}
		l.failedObjects[what+"/"+e.Key] = true
		var fileNode, envNode, contentNode *yaml.Node
		external := false
		fields, _ := l.Mapping(e.Val, f)
		for _, fe := range fields {
			ff := yamlsrc.Join(f, fe.Key)
			switch fe.Key {
			case "file":
				o.File, _ = l.Str(fe.Val, ff)
				fileNode = fe.Val
			case "environment":
				o.Environment, _ = l.Str(fe.Val, ff)
				envNode = fe.Val
			case "content":
				if what == "config" {
					s, _ := l.Str(fe.Val, ff)
					o.Data = []byte(s)
					contentNode = fe.Val
				} else {
					l.Ignore(fe.KeyNode, ff)
				}
			case "external":
				switch d := yamlsrc.Deref(fe.Val); {
				case d != nil && d.Kind == yaml.MappingNode:
					// The deprecated external: {name: ...}: external, named elsewhere.
					external = true
				case d != nil && d.Kind == yaml.ScalarNode && strings.TrimSpace(d.Value) == "":
					// external: ${X:-} with X unset: not external.
				default:
					external, _ = l.Bool(fe.Val, ff)
				}
			case "name":
				if s, _ := l.Str(fe.Val, ff); s != "" {
					l.Warnf("%s: %s: a %s's name is not used; the Kubernetes object is named %q", l.Pos(fe.Val), ff, what, kn)
				}
			case "labels", "driver", "driver_opts", "template_driver":
				l.Ignore(fe.KeyNode, ff)
			default:
				if !strings.HasPrefix(fe.Key, "x-") {
					l.Ignore(fe.KeyNode, ff)
				}
			}
		}
		sources := 0
		for _, sn := range []*yaml.Node{fileNode, envNode, contentNode} {
			if sn != nil {
				sources++
			}
		}
		switch {
		case external:
			if sources > 0 {
				l.Errorf(e.KeyNode, f, "an external %s has no file, environment or content", what)
				continue
			}
			l.Warnf("%s: %s: %s %q is external: devtool does not create it; a %s named %q must exist in the namespace", o.Pos, f, what, e.Key, kubeKind(what), kn)
			o.Data = nil
			o.File, o.Environment = "", ""
		case sources != 1:
			l.Errorf(e.KeyNode, f, "set exactly one of file, environment%s", map[bool]string{true: " or content", false: ""}[what == "config"])
			continue
		case fileNode != nil:
			if o.File == "" {
				l.Errorf(fileNode, yamlsrc.Join(f, "file"), "the path is empty")
				continue
			}
			o.File = l.absPath(fileNode, o.File)
			data, err := safefile.Read(o.File, MaxSecretSize)
			if err != nil {
				msg := yamlsrc.UnwrapPathError(err).Error()
				if errors.Is(err, fs.ErrNotExist) {
					msg = "no such file"
				}
				l.Errorf(fileNode, yamlsrc.Join(f, "file"), "cannot read %s: %s", o.File, msg)
				continue
			}
			o.Data = data
		case envNode != nil:
			v, ok := l.Lookup(o.Environment)
			if !ok {
				l.Errorf(envNode, yamlsrc.Join(f, "environment"), "variable %s is not set", o.Environment)
				continue
			}
			o.Data = []byte(v)
		}
		delete(l.failedObjects, what+"/"+e.Key)
		out = append(out, o)
	}
	return out
}

func kubeKind(what string) string {
	if what == "secret" {
		return "Secret"
	}
	return "ConfigMap"
}

// fileMounts reads a service's secrets or configs: names, or {source, target, mode, uid, gid}.
// A secret's default target is /run/secrets/<source> (a relative target goes under
// /run/secrets); a config's is /<source>.
func (l *loader) fileMounts(n *yaml.Node, field, what string, p *Project) []FileMount {
	d := yamlsrc.Deref(n)
	if yamlsrc.IsNull(d) {
		return nil
	}
	if d.Kind != yaml.SequenceNode {
		l.Expected(n, field, "a list of "+what+" names or {source, target}")
		return nil
	}
	var out []FileMount
	targets := map[string]bool{}
	for i, item := range d.Content {
		f := yamlsrc.Index(field, i)
		m := FileMount{Pos: l.Pos(yamlsrc.Deref(item))}
		if id := yamlsrc.Deref(item); id != nil && id.Kind == yaml.MappingNode {
			es, _ := l.Mapping(item, f)
			for _, e := range es {
				ef := yamlsrc.Join(f, e.Key)
				switch e.Key {
				case "source":
					m.Source, _ = l.Str(e.Val, ef)
				case "target":
					m.Target, _ = l.Str(e.Val, ef)
				case "mode":
					s, ok := l.Str(e.Val, ef)
					if !ok || strings.TrimSpace(s) == "" {
						continue
					}
					// Compose reads a mode as octal ("0440", "440", or 0440 unquoted); YAML
					// may already have turned an unquoted 0440 into decimal 288, so a number
					// whose digits are not all octal is read as decimal.
					v, err := strconv.ParseInt(strings.TrimPrefix(strings.TrimPrefix(s, "0o"), "0"), 8, 32)
					if err != nil {
						v, err = strconv.ParseInt(s, 10, 32)
					}
					if s == "0" {
						v, err = 0, nil
					}
					if err != nil || v < 0 || v > 0o7777 {
						l.Errorf(e.Val, ef, "expected a file mode such as 0440, found %q", s)
						continue
					}
					mode := int32(v)
					m.Mode = &mode
				case "uid", "gid":
					// File ownership: Kubernetes sets it through the pod's fsGroup, not per file.
					l.Ignore(e.KeyNode, ef)
				default:
					if !strings.HasPrefix(e.Key, "x-") {
						l.Ignore(e.KeyNode, ef)
					}
				}
			}
		} else {
			m.Source, _ = l.Str(item, f)
		}
		if m.Source == "" {
			l.Errorf(item, f, "source (the name of a top-level %s) is required", what)
			continue
		}
		if l.failedObjects[what+"/"+m.Source] {
			continue // its definition already has an error
		}
		lookup := p.Config
		if what == "secret" {
			lookup = p.Secret
		}
		if lookup(m.Source) == nil {
			l.Errorf(item, f, "%s %q is not defined in the top-level %ss", what, m.Source, what)
			continue
		}
		switch {
		case m.Target == "" && what == "secret":
			m.Target = "/run/secrets/" + m.Source
		case m.Target == "":
			m.Target = "/" + m.Source
		case !path.IsAbs(m.Target) && what == "secret":
			m.Target = "/run/secrets/" + m.Target
		case !path.IsAbs(m.Target):
			l.Errorf(item, f, "the target must be an absolute path, found %q", m.Target)
			continue
		}
		m.Target = path.Clean(m.Target)
		if targets[m.Target] {
			l.Errorf(item, f, "two %ss are mounted at %s", what, m.Target)
			continue
		}
		targets[m.Target] = true
		out = append(out, m)
	}
	return out
}

package manifest

import (
	"fmt"
	"slices"
	"strings"
)

// Mask replaces a secret value wherever a dry run shows it.
const Mask = "******"

// DryRunPlan is what a deploy of the manifest would do besides applying objects, for
// deploy --dry-run to show on stderr: the images it would build, the variables the commands
// would see (secret values masked), the commands in order (variables expanded, secrets masked),
// the dependencies that would be deployed and the Compose files that would be loaded as one
// project. It touches nothing.
type DryRunPlan struct {
	Variables    []string // "NAME=value" sorted by name; secret values are Mask
	Commands     []Command
	Dependencies []*Dependency
	ComposeFiles []string

	// Images are the build section's images as the deploy names them (set by the caller, which
	// knows the registry and the namespace).
	Images []PlannedImage
	// DependencyNotes says, by Dependency.Name, why a dependency would not be deployed or what is
	// not known about it (set by the caller, which may ask the cluster).
	DependencyNotes map[string]string
	// Environ holds further values the commands' variables expand to (the shell's environment)
	// without being listed.
	Environ map[string]string

	vars     map[string]string
	isSecret func(string) bool
}

// PlannedImage is one image of the build section in a dry run.
type PlannedImage struct {
	Service string
	Ref     string // the reference the deploy would push and deploy
	Note    string // when it would be built ("" is said as: when the registry does not have it)
}

// Plan makes the dry-run plan of a deploy (destroy false) or destroy (true). vars are the
// variables the commands would get (DEVTOOL_*, DEVTOOL_BUILD_*, --var, .env); isSecret tells
// which values to mask (nil: IsSecretName).
func (m *Manifest) Plan(destroy bool, vars map[string]string, isSecret func(name string) bool) DryRunPlan {
	if isSecret == nil {
		isSecret = IsSecretName
	}
	p := DryRunPlan{vars: vars, isSecret: isSecret}
	for _, name := range slicesSortedKeys(vars) {
		v := vars[name]
		if isSecret(name) && v != "" {
			v = Mask
		}
		p.Variables = append(p.Variables, name+"="+v)
	}
	if destroy {
		p.Commands = slices.Clone(m.Destroy)
		return p
	}
	p.Commands = slices.Clone(m.Deploy.Commands)
	p.Dependencies = slices.Clone(m.Dependencies)
	p.ComposeFiles = m.Deploy.ComposeFiles()
	return p
}

// Lines renders the plan as the lines deploy --dry-run prints on stderr. Secret values are
// masked in the variables and in the command texts too; commands are shown with the variables
// the plan knows expanded as the shell would (outside single quotes), secret ones as Mask.
func (p DryRunPlan) Lines(secretValues ...string) []string {
	var out []string
	mask := func(s string) string {
		for _, v := range secretValues {
			if len(v) >= 4 {
				s = strings.ReplaceAll(s, v, Mask)
			}
		}
		return s
	}
	for _, f := range p.ComposeFiles {
		out = append(out, "compose file: "+f)
	}
	for _, d := range p.Dependencies {
		line := fmt.Sprintf("dependency %s: %s", d.Name, mask(d.Repository))
		if d.Branch != "" {
			line += " (branch " + d.Branch + ")"
		}
		if n := p.DependencyNotes[d.Name]; n != "" {
			line += ": " + n
		} else {
			line += ": would be deployed"
		}
		out = append(out, line)
		for _, k := range slicesSortedKeys(d.Variables) {
			v := d.Variables[k]
			if p.secret(k) && v != "" {
				v = Mask
			}
			out = append(out, "  variable "+mask(k+"="+v))
		}
	}
	for _, img := range p.Images {
		note := img.Note
		if note == "" {
			note = "built when the registry does not have it"
		}
		out = append(out, fmt.Sprintf("image for %s: %s (%s)", img.Service, img.Ref, note))
	}
	if len(p.Commands) > 0 {
		out = append(out, "variables:")
		for _, v := range p.Variables {
			out = append(out, "  "+mask(v))
		}
	}
	for _, c := range p.Commands {
		out = append(out, "would run: "+mask(p.Expand(c.Command)))
	}
	return out
}

func (p DryRunPlan) secret(name string) bool {
	if p.isSecret == nil {
		return IsSecretName(name)
	}
	return p.isSecret(name)
}

// Expand replaces $NAME and ${NAME} in a command with the values the plan knows (its variables,
// then Environ), secret ones with Mask. Text in single quotes, escaped dollars and names the
// plan does not know are left as written: the command may set them itself.
func (p DryRunPlan) Expand(cmd string) string {
	lookup := func(name string) (string, bool) {
		v, ok := p.vars[name]
		if !ok {
			v, ok = p.Environ[name]
		}
		if ok && p.secret(name) && v != "" {
			v = Mask
		}
		return v, ok
	}
	var b strings.Builder
	inSingle := false
	for i := 0; i < len(cmd); i++ {
		c := cmd[i]
		switch {
		case c == '\'':
			inSingle = !inSingle
		case c == '\\' && !inSingle && i+1 < len(cmd):
			b.WriteByte(c)
			i++
			c = cmd[i]
		case c == '$' && !inSingle:
			name, n := varRef(cmd[i+1:])
			if name != "" {
				if v, ok := lookup(name); ok {
					b.WriteString(v)
					i += n
					continue
				}
			}
		}
		b.WriteByte(c)
	}
	return b.String()
}

// varRef reads the variable name after a '$': NAME or {NAME}; n is how many bytes it took.
func varRef(s string) (name string, n int) {
	braced := strings.HasPrefix(s, "{")
	start := 0
	if braced {
		start = 1
	}
	end := start
	for end < len(s) {
		c := s[end]
		if c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || end > start && c >= '0' && c <= '9' {
			end++
			continue
		}
		break
	}
	if end == start {
		return "", 0
	}
	if braced {
		if end >= len(s) || s[end] != '}' {
			return "", 0 // ${NAME:-default} and the like: left as written
		}
		return s[start:end], end + 1
	}
	return s[:end], end
}

// IsSecretName tells a variable whose value a dry run masks: names with TOKEN, PASSWORD,
// PASSWD, SECRET, KEY, CREDENTIAL or AUTH in them (KUBECONFIG and paths excepted).
func IsSecretName(name string) bool {
	u := strings.ToUpper(name)
	if u == "KUBECONFIG" {
		return false
	}
	for _, w := range []string{"TOKEN", "PASSWORD", "PASSWD", "SECRET", "KEY", "CREDENTIAL", "AUTH"} {
		if strings.Contains(u, w) {
			return true
		}
	}
	return false
}

func slicesSortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

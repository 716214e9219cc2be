package manifest

import (
	"fmt"
	"slices"
	"strings"
)

// Mask replaces a secret value wherever a dry run shows it.
const Mask = "******"

// DryRunPlan is what a deploy of the manifest would do besides applying objects, for
// deploy --dry-run to show on stderr: the variables the commands would see (secret values
// masked), the commands in order, the dependencies that would be deployed and the Compose
// files that would be loaded as one project. It touches nothing.
type DryRunPlan struct {
	Variables    []string // "NAME=value" sorted by name; secret values are Mask
	Commands     []Command
	Dependencies []*Dependency
	ComposeFiles []string
}

// Plan makes the dry-run plan of a deploy (destroy false) or destroy (true). vars are the
// variables the commands would get (DEVTOOL_*, DEVTOOL_BUILD_*, --var, .env); isSecret tells
// which values to mask (nil: IsSecretName).
func (m *Manifest) Plan(destroy bool, vars map[string]string, isSecret func(name string) bool) DryRunPlan {
	if isSecret == nil {
		isSecret = IsSecretName
	}
	p := DryRunPlan{}
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
// masked in the variables and in the command texts too.
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
		out = append(out, line)
	}
	if len(p.Commands) > 0 {
		out = append(out, "variables:")
		for _, v := range p.Variables {
			out = append(out, "  "+mask(v))
		}
	}
	for _, c := range p.Commands {
		out = append(out, "would run: "+mask(c.Command))
	}
	return out
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

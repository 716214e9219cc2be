package manifest

import (
	"fmt"
	"net/url"
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
// variables the commands would get (DEVTOOL_*, DEVTOOL_BUILD_*, --var, .env; never the shell's
// environment, whose values a dry run does not show); isSecret tells which values to mask (nil:
// IsSecretName). Values that are URLs with a password are shown with it redacted.
func (m *Manifest) Plan(destroy bool, vars map[string]string, isSecret func(name string) bool) DryRunPlan {
	if isSecret == nil {
		isSecret = IsSecretName
	}
	p := DryRunPlan{vars: vars, isSecret: isSecret}
	for _, name := range slicesSortedKeys(vars) {
		p.Variables = append(p.Variables, name+"="+p.shownValue(name, vars[name]))
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
// secretValues (at least 4 bytes long) are masked wherever they appear, and every URL with a
// password has it redacted.
func (p DryRunPlan) Lines(secretValues ...string) []string {
	var out []string
	mask := func(s string) string {
		for _, v := range secretValues {
			if len(v) >= 4 {
				s = strings.ReplaceAll(s, v, Mask)
			}
		}
		return RedactURLs(s)
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
			out = append(out, "  variable "+mask(k+"="+p.shownValue(k, d.Variables[k])))
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

// shownValue is how the plan shows the value of variable name: Mask when the name is secret,
// else the value with any URL password redacted.
func (p DryRunPlan) shownValue(name, v string) string {
	if v == "" {
		return v
	}
	if p.secret(name) {
		return Mask
	}
	return RedactURL(v)
}

// Expand replaces $NAME and ${NAME} in a command with the values of the plan's variables, secret
// ones with Mask and URL passwords redacted. Text in single quotes, escaped dollars and names the
// plan does not have (the shell's environment, or what the command sets itself) are left as
// written.
func (p DryRunPlan) Expand(cmd string) string {
	lookup := func(name string) (string, bool) {
		v, ok := p.vars[name]
		if !ok {
			return "", false
		}
		return p.shownValue(name, v), true
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

// secretWords are the parts of a variable name that make its value secret (PASS covers PASSWORD
// and PASSWD).
var secretWords = []string{"TOKEN", "PASS", "PWD", "SECRET", "KEY", "CREDENTIAL", "AUTH", "DSN", "PRIVATE",
	"CERT", "SESSION", "COOKIE"}

// IsSecretName tells a variable whose value a dry run masks: names with TOKEN, PASS (PASSWORD,
// PASSWD), PWD, SECRET, KEY, CREDENTIAL, AUTH, DSN, PRIVATE, CERT, SESSION or COOKIE in them, in
// any case. KUBECONFIG, the shell's PWD and OLDPWD (paths) and deploy's own DEVTOOL_* variables
// (names, images, branches) are not. It is the one rule every dry run masks by.
func IsSecretName(name string) bool {
	u := strings.ToUpper(name)
	if u == "KUBECONFIG" || u == "PWD" || u == "OLDPWD" || strings.HasPrefix(u, "DEVTOOL_") {
		return false
	}
	for _, w := range secretWords {
		if strings.Contains(u, w) {
			return true
		}
	}
	return false
}

// RedactURL returns v with its password replaced by "xxxxx" when v is a URL with a user password
// (postgres://u:pw@db/x); any other value is returned as is.
func RedactURL(v string) string {
	if !strings.Contains(v, "://") {
		return v
	}
	u, err := url.Parse(v)
	if err != nil || u.User == nil {
		return v
	}
	if _, ok := u.User.Password(); !ok {
		return v
	}
	return u.Redacted()
}

// RedactURLs applies RedactURL to every URL-like word of s (a run of characters without blanks
// or quotes around a "://"), so that a command line or a repository address shows no password.
func RedactURLs(s string) string {
	if !strings.Contains(s, "://") {
		return s
	}
	stop := func(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '"' || c == '\'' || c == '`' }
	var b strings.Builder
	for i := 0; i < len(s); {
		j := strings.Index(s[i:], "://")
		if j < 0 {
			b.WriteString(s[i:])
			break
		}
		j += i
		start := j
		for start > i && !stop(s[start-1]) {
			start--
		}
		end := j + 3
		for end < len(s) && !stop(s[end]) {
			end++
		}
		b.WriteString(s[i:start])
		b.WriteString(redactWord(s[start:end]))
		i = end
	}
	return b.String()
}

// redactWord redacts the password of a URL word, trying it whole and then from its scheme on
// (for NAME=postgres://u:pw@db). A word with a user password that does not parse as a URL loses
// everything between "://" and the last "@".
func redactWord(w string) string {
	if _, err := url.Parse(w); err == nil {
		return RedactURL(w)
	}
	j := strings.Index(w, "://")
	k := j
	for k > 0 && isSchemeChar(w[k-1]) {
		k--
	}
	if k > 0 {
		if _, err := url.Parse(w[k:]); err == nil {
			return w[:k] + RedactURL(w[k:])
		}
	}
	if at := strings.LastIndex(w, "@"); at > j && strings.Contains(w[j+3:at], ":") {
		return w[:j+3] + "xxxxx" + w[at:]
	}
	return w
}

func isSchemeChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.'
}

func slicesSortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

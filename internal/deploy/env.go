package deploy

import (
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"sort"
	"strings"
	"time"
)

// EnvHandoffVar names the file through which a command hands variables to the later ones.
const EnvHandoffVar = "DEVTOOL_ENV"

// reservedVars are set by deploy itself and cannot be given with --var (nor any DEVTOOL_ name).
var reservedVars = map[string]bool{"KUBECONFIG": true, "KUBECACHEDIR": true, "BUILDKIT_HOST": true, "PATH": true}

// Reserved reports whether a variable name is deploy's own: --var and the DEVTOOL_ENV hand-off
// cannot set it.
func Reserved(name string) bool {
	u := strings.ToUpper(name)
	return strings.HasPrefix(u, "DEVTOOL_") || reservedVars[u]
}

var varName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// ParseVar parses one --var NAME=value. Names that are not shell variable names, that start
// with DEVTOOL_ or that deploy sets itself are refused.
func ParseVar(s string) (name, value string, err error) {
	name, value, ok := strings.Cut(s, "=")
	if !ok {
		return "", "", fmt.Errorf("--var %q: expected NAME=value", s)
	}
	if !varName.MatchString(name) {
		return "", "", fmt.Errorf("--var %q: %q is not a valid variable name (letters, digits and _, not starting with a digit)", s, name)
	}
	if Reserved(name) {
		return "", "", fmt.Errorf("--var %q: %s is reserved: deploy sets it itself", s, name)
	}
	return name, value, nil
}

// BuiltImage is one image of the build section, as the commands see it.
type BuiltImage struct {
	Ref    string // the reference deployed
	Digest string // sha256:… when known
}

// CommandEnv is what the deploy and destroy commands see.
type CommandEnv struct {
	Environ      map[string]string // the user's environment
	DotEnv       map[string]string // the manifest's .env values (below the shell)
	Secrets      map[string]string // the platform's stored secrets (below .env: spec A6)
	Vars         map[string]string // --var values
	Namespace    string
	Context      string
	Name         string
	Registry     string
	GitBranch    string
	GitCommit    string
	BuildkitHost string
	Images       map[string]BuiltImage // by build service
	Kubeconfig   string                // the labelling proxy's kubeconfig
	KubeCacheDir string
	EnvFile      string // DEVTOOL_ENV
}

// Build returns the environment: stored secrets, then .env, then the shell, then --var, then
// deploy's own values (a later source wins).
func (e CommandEnv) Build() map[string]string {
	out := map[string]string{}
	for k, v := range e.Secrets {
		out[k] = v
	}
	for k, v := range e.DotEnv {
		out[k] = v
	}
	for k, v := range e.Environ {
		out[k] = v
	}
	for k, v := range e.Vars {
		out[k] = v
	}
	set := func(k, v string) { out[k] = v }
	set("DEVTOOL_NAMESPACE", e.Namespace)
	set("DEVTOOL_CONTEXT", e.Context)
	set("DEVTOOL_NAME", e.Name)
	set("DEVTOOL_REGISTRY_URL", e.Registry)
	set("DEVTOOL_GIT_BRANCH", e.GitBranch)
	set("DEVTOOL_GIT_COMMIT", e.GitCommit)
	if e.BuildkitHost != "" {
		set("BUILDKIT_HOST", e.BuildkitHost)
	}
	for svc, img := range e.Images {
		p := "DEVTOOL_BUILD_" + EnvKey(svc) + "_"
		reg, repo, tag := SplitImageRef(img.Ref)
		set(p+"IMAGE", img.Ref)
		set(p+"REGISTRY", reg)
		set(p+"REPOSITORY", repo)
		set(p+"TAG", tag)
		set(p+"SHA", img.Digest)
	}
	if e.Kubeconfig != "" {
		set("KUBECONFIG", e.Kubeconfig)
	}
	if e.KubeCacheDir != "" {
		set("KUBECACHEDIR", e.KubeCacheDir)
	}
	if e.EnvFile != "" {
		set(EnvHandoffVar, e.EnvFile)
	}
	return out
}

var nonAlnum = regexp.MustCompile(`[^A-Z0-9]`)

// EnvKey makes a service name part of a variable name: upper case, non-alphanumerics as _.
func EnvKey(s string) string { return nonAlnum.ReplaceAllString(strings.ToUpper(s), "_") }

// SplitImageRef splits registry/repository:tag[@digest]. The registry is the first path part when
// it looks like a host (has a dot or a port, or is localhost), else docker.io.
func SplitImageRef(ref string) (registry, repository, tag string) {
	rest := ref
	if i := strings.Index(rest, "@"); i >= 0 {
		rest = rest[:i]
	}
	if i := strings.LastIndex(rest, ":"); i > strings.LastIndex(rest, "/") {
		rest, tag = rest[:i], rest[i+1:]
	}
	if first, after, ok := strings.Cut(rest, "/"); ok && (strings.ContainsAny(first, ".:") || first == "localhost") {
		return first, after, tag
	}
	return "docker.io", rest, tag
}

// EnvList turns a map into sorted NAME=value entries for exec.Cmd.Env.
func EnvList(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// gitInfoTimeout bounds each git command of GitInfo: the information is optional, and a
// repository whose HEAD is a FIFO or a hung filesystem must not stop a deploy.
var gitInfoTimeout = 10 * time.Second

// GitInfo returns the branch and commit of the repository dir is in ("" when not a repository,
// when git does not answer within gitInfoTimeout, or when ctx ends: Ctrl-C stops it at once). It
// runs git rev-parse, which only reads.
func GitInfo(ctx context.Context, dir string) (branch, commit string) {
	run := func(args ...string) string {
		ctx, cancel := context.WithTimeout(ctx, gitInfoTimeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, "git", append([]string{"-C", dir}, args...)...)
		cmd.WaitDelay = time.Second
		out, err := cmd.Output()
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(out))
	}
	commit = run("rev-parse", "HEAD")
	if commit == "" {
		return "", ""
	}
	branch = run("rev-parse", "--abbrev-ref", "HEAD")
	if branch == "HEAD" {
		branch = ""
	}
	return branch, commit
}

// Package runspec is the contract between the platform, which starts a pipeline run as a Job, and
// the runner in that Job (`devtool pipeline runner`): where the run's Secret is mounted, what it
// holds, and the result the runner leaves as its termination message. A leaf: both sides import it.
package runspec

import (
	"errors"
	"fmt"
	"net/url"
	"path"
	"regexp"
	"strings"
	"time"
)

// Paths inside the runner's container.
const (
	// MountDir holds the run's Secret: SpecFile, TokenFile, CAFile.
	MountDir  = "/var/run/devtool/run"
	SpecFile  = "run.json"
	TokenFile = "token" // the triggering user's Kubernetes token (a TokenRequest sized to the timeout)
	CAFile    = "ca.crt"
	// BuilderCertFile, BuilderKeyFile and BuilderCAFile are, when the platform has a hosted build
	// service, a client certificate of the builder CA for the run's user, its key and the CA of
	// BuildKit's certificate (DEVTOOL_BUILDKIT_CERT, _KEY, _CA), sized to the run's timeout.
	BuilderCertFile = "builder.crt"
	BuilderKeyFile  = "builder.key"
	BuilderCAFile   = "builder-ca.crt"
	// KubeCADir holds the cluster's kube-root-ca.crt ConfigMap (every namespace has it).
	KubeCADir  = "/var/run/devtool/kube"
	KubeCAFile = "ca.crt"
	// WorkDir is the runner's writable folder (an emptyDir): the clone, HOME, the kubeconfig.
	WorkDir = "/work"
	// TerminationLog is where the runner writes its Result (the kubelet keeps at most 4096 bytes).
	TerminationLog = "/dev/termination-log"
	// Container names the runner's container in the Job's pod.
	Container = "runner"
)

// MaxResultBytes is what the kubelet keeps of a termination message.
const MaxResultBytes = 4096

// Spec is the run, as the platform hands it to the runner (SpecFile, JSON). It is in a Secret
// because Vars, Secrets and GitToken may hold secrets; the Job's spec holds none of it.
type Spec struct {
	Action     string `json:"action"` // deploy or destroy
	Namespace  string `json:"namespace"`
	Name       string `json:"name"`
	User       string `json:"user"`
	Number     int    `json:"number"`
	Repository string `json:"repository"`
	Branch     string `json:"branch,omitempty"` // "" = the repository's default branch
	File       string `json:"file,omitempty"`
	Volumes    bool   `json:"volumes,omitempty"`
	// Deadline is when the run must be over (its timeout from its creation); the Job's
	// activeDeadlineSeconds stops it there too, so the runner ends a little earlier and says so.
	Deadline time.Time         `json:"deadline"`
	Vars     map[string]string `json:"vars,omitempty"`
	// Secrets are the stored secrets the run may use: the third ${NAME} source after the shell
	// (here: Vars) and .env. Their values are masked in the run's log.
	Secrets map[string]string `json:"secrets,omitempty"`
	// ClusterDomain and Registry are the platform's (DEVTOOL_CLUSTER_DOMAIN, DEVTOOL_REGISTRY): the
	// endpoints' host names and where images go, as on a platform context.
	ClusterDomain string `json:"clusterDomain,omitempty"`
	Registry      string `json:"registry,omitempty"`
	// Builder is the platform's hosted BuildKit (tcp://host:port; BUILDKIT_HOST with the
	// BuilderCertFile, BuilderKeyFile and BuilderCAFile of the run's Secret); "" without one.
	// Registry is then the hosted registry, which the runner authenticates to with the user's token
	// (a Docker config in WorkDir).
	Builder string `json:"builder,omitempty"`
	// IngressClass and EndpointPort are the platform's ingress's (DEVTOOL_INGRESS_CLASS,
	// DEVTOOL_ENDPOINT_PORT), so the run's endpoints are served as a developer's are.
	IngressClass string `json:"ingressClass,omitempty"`
	EndpointPort int    `json:"endpointPort,omitempty"`
	// GitUsername and GitToken authenticate an https clone (never sent over http).
	GitUsername string `json:"gitUsername,omitempty"`
	GitToken    string `json:"gitToken,omitempty"`
	// GitCA is the stored CA of the repository's host (GitCASecret), PEM.
	GitCA string `json:"gitCA,omitempty"`
}

// Result is the runner's termination message (JSON, at most MaxResultBytes).
type Result struct {
	// Step is the step that failed ("" when the run succeeded).
	Step        string `json:"step,omitempty"`
	TimedOut    bool   `json:"timedOut,omitempty"`
	Commit      string `json:"commit,omitempty"`
	Branch      string `json:"branch,omitempty"`
	CloneMillis int64  `json:"cloneMillis,omitempty"`
	// Tail is the failed step's last output (masked).
	Tail string `json:"tail,omitempty"`
}

// GitTokenSecret names the stored secret holding an HTTPS token for host (its port dropped):
// GIT_TOKEN_ and the host in upper case with every other character than a letter or digit as '_',
// e.g. GIT_TOKEN_GITHUB_COM. GitUserSecret names the optional user name to send with it.
func GitTokenSecret(host string) string { return "GIT_TOKEN_" + hostKey(host) }

// GitUserSecret: see GitTokenSecret.
func GitUserSecret(host string) string { return "GIT_USERNAME_" + hostKey(host) }

// GitCASecret names the optional stored secret holding the CA (PEM) that signed host's https
// certificate, for a git server with a private CA: the runner trusts it besides the system's roots.
func GitCASecret(host string) string { return "GIT_CA_" + hostKey(host) }

func hostKey(host string) string {
	if i := strings.LastIndex(host, ":"); i >= 0 && !strings.Contains(host[i:], "]") {
		host = host[:i]
	}
	host = strings.Trim(host, "[]")
	var b strings.Builder
	for _, r := range strings.ToUpper(host) {
		if (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

// DefaultGitUsername is sent with a token when no GIT_USERNAME_<HOST> is stored: GitHub, GitLab and
// Gitea accept a personal access token as the password with any user name.
const DefaultGitUsername = "devtool"

// Limits of a run's request.
const (
	maxURLLen    = 2048
	maxBranchLen = 255
	maxFileLen   = 1024
)

var dnsLabel = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// ValidName says why name cannot name a pipeline ("" when it can): a DNS label.
func ValidName(name string) string {
	switch {
	case name == "":
		return "required"
	case len(name) > 63:
		return "at most 63 characters"
	case !dnsLabel.MatchString(name):
		return "lower-case letters, digits and '-', starting and ending with a letter or digit"
	}
	return ""
}

// CheckRepository checks a repository URL: https, or http (the caller warns), with a host, no
// user name or password (tokens come from stored secrets) and no fragment.
func CheckRepository(raw string) (*url.URL, error) {
	if len(raw) > maxURLLen {
		return nil, fmt.Errorf("longer than %d characters", maxURLLen)
	}
	if !strings.Contains(raw, "://") {
		return nil, errors.New("must be an https:// URL (or http:// on a private network); ssh remotes such as git@host:path are not supported: use https://host/path")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("not a URL: %v", err)
	}
	switch {
	case u.Scheme != "https" && u.Scheme != "http":
		return nil, errors.New("must be an https:// URL (or http:// on a private network); ssh and other schemes are not supported")
	case u.Host == "" || u.Hostname() == "":
		return nil, errors.New("has no host")
	case u.User != nil:
		return nil, fmt.Errorf("must not hold a user name or token: store the token as the secret %s instead", GitTokenSecret(u.Host))
	case u.Fragment != "" || u.RawQuery != "":
		return nil, errors.New("must not have a query or fragment")
	case strings.ContainsAny(raw, " \t\r\n\x00"):
		return nil, errors.New("must not contain spaces or control characters")
	}
	return u, nil
}

// CheckSourceURL checks a preview's pull or merge request URL: https (or http), with a host, at
// most 2048 characters.
func CheckSourceURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || len(raw) > maxURLLen {
		return errors.New("the pull or merge request's https:// URL")
	}
	return nil
}

// CheckBranch applies git's rules for a branch name (git check-ref-format --branch).
func CheckBranch(b string) error {
	switch {
	case len(b) > maxBranchLen:
		return fmt.Errorf("longer than %d characters", maxBranchLen)
	case strings.HasPrefix(b, "-"), strings.HasPrefix(b, "/"), strings.HasSuffix(b, "/"), strings.HasSuffix(b, "."),
		strings.HasSuffix(b, ".lock"), strings.Contains(b, ".."), strings.Contains(b, "@{"), strings.Contains(b, "//"), b == "@":
		return fmt.Errorf("%q is not a valid branch name", b)
	}
	for _, r := range b {
		if r < 0x20 || r == 0x7f || strings.ContainsRune(" ~^:?*[\\", r) {
			return fmt.Errorf("%q is not a valid branch name", b)
		}
	}
	return nil
}

// CheckFile checks the manifest path: relative, inside the repository.
func CheckFile(f string) error {
	switch {
	case len(f) > maxFileLen:
		return fmt.Errorf("longer than %d characters", maxFileLen)
	case strings.ContainsRune(f, 0):
		return errors.New("contains a NUL byte")
	case path.IsAbs(f) || strings.HasPrefix(f, "\\"):
		return errors.New("must be a path inside the repository, not an absolute one")
	}
	if c := path.Clean(strings.ReplaceAll(f, "\\", "/")); c == ".." || strings.HasPrefix(c, "../") {
		return errors.New("leaves the repository")
	}
	return nil
}

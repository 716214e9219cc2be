// Package build builds and pushes container images: with a BuildKit daemon (its Go client and the
// built-in Dockerfile frontend), with the local Docker daemon (the Engine API), or — later — with the
// platform's build service. It also names images, computes content-hash tags so an unchanged build
// is a no-op, and ensures the images a deploy needs exist (EnsureImages).
//
// The package never prints to the terminal: progress goes to the io.Writer of the Request.
package build

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/devtool/devtool/internal/safefile"
)

// Builder builds one image. Implementations: *BuildKit, *Docker, *Platform.
type Builder interface {
	// Name says which builder this is, for messages ("buildkit tcp://127.0.0.1:1234", "docker unix:///…").
	Name() string
	Build(ctx context.Context, req Request) (Result, error)
}

// Request is one image build.
type Request struct {
	// Context is the absolute path of the build context folder.
	Context string
	// Dockerfile is relative to Context, or absolute. Default "Dockerfile".
	Dockerfile string
	Target     string
	// Args are the build args, already resolved (see ExpandArgs).
	Args map[string]string
	// Tags are the image references to give the result (the first one is reported in Result.Ref).
	Tags []string
	// Push pushes every tag to its registry.
	Push    bool
	NoCache bool
	Secrets []Secret
	// ExportCache is an image reference to export the build cache to; CacheFrom are references to import it from.
	ExportCache string
	CacheFrom   []string

	// Progress receives the build's progress display; nil discards it.
	Progress io.Writer
	// ProgressMode is "auto" (default: a live display on a terminal, plain lines otherwise), "tty", "plain" or "quiet".
	ProgressMode string
}

// Result is what a build produced.
type Result struct {
	Ref    string // the first tag
	Digest string // manifest digest when known ("" when the builder does not report it)
	// Skipped is true when the registry already had the content-hash tag and nothing was built.
	Skipped bool
}

// Secret is one --secret id=<id>,src=<path>: the file at Src is mounted at /run/secrets/<ID> by RUN --mount=type=secret.
type Secret struct {
	ID  string
	Src string
}

// ParseSecret parses the --secret flag value "id=<id>,src=<path>" (also "source=" and "type=file", as docker accepts).
func ParseSecret(s string) (Secret, error) {
	var sec Secret
	for _, field := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(field), "=")
		if !ok {
			return Secret{}, fmt.Errorf("secret %q: %q is not key=value (want id=<id>,src=<path>)", s, field)
		}
		switch strings.ToLower(k) {
		case "id":
			sec.ID = v
		case "src", "source":
			sec.Src = v
		case "type":
			if v != "file" {
				return Secret{}, fmt.Errorf("secret %q: only type=file is supported", s)
			}
		default:
			return Secret{}, fmt.Errorf("secret %q: unknown key %q (want id=<id>,src=<path>)", s, k)
		}
	}
	if sec.ID == "" {
		return Secret{}, fmt.Errorf("secret %q: id is missing (want id=<id>,src=<path>)", s)
	}
	if sec.Src == "" {
		return Secret{}, fmt.Errorf("secret %q: src is missing (want id=<id>,src=<path>)", s)
	}
	return sec, nil
}

// ExpandArgs resolves build args whose value holds "$" from the environment ($NAME and ${NAME};
// "$$" is a literal "$"). Values without "$" are kept as they are.
func ExpandArgs(args map[string]string, getenv func(string) string) map[string]string {
	if args == nil {
		return nil
	}
	out := make(map[string]string, len(args))
	for k, v := range args {
		if strings.Contains(v, "$") {
			const dollar = "\x00devtool-dollar\x00"
			v = strings.ReplaceAll(v, "$$", dollar)
			v = os.Expand(v, getenv)
			v = strings.ReplaceAll(v, dollar, "$")
		}
		out[k] = v
	}
	return out
}

// dockerfilePath returns the absolute path of the request's Dockerfile.
func (r Request) dockerfilePath() string {
	df := r.Dockerfile
	if df == "" {
		df = "Dockerfile"
	}
	if filepath.IsAbs(df) {
		return df
	}
	return filepath.Join(r.Context, df)
}

func (r Request) validate() error {
	if r.Context == "" || !filepath.IsAbs(r.Context) {
		return fmt.Errorf("build context %q must be an absolute path", r.Context)
	}
	if st, err := os.Stat(r.Context); err != nil {
		return fmt.Errorf("build context: %w", err)
	} else if !st.IsDir() {
		return fmt.Errorf("build context %s is not a folder", r.Context)
	}
	// The builders hand the Dockerfile to BuildKit or the daemon: check here that it is a
	// regular file under the cap, so no builder waits on a FIFO or streams /dev/zero.
	if _, err := safefile.Read(r.dockerfilePath(), MaxDockerfileBytes); err != nil {
		return fmt.Errorf("dockerfile: %w", err)
	}
	if len(r.Tags) == 0 {
		return errors.New("no image name to build")
	}
	for _, s := range r.Secrets {
		// BuildKit reads the file during the build (os.ReadFile): check it is a regular file
		// within BuildKit's own limit first, so a FIFO or /dev/zero is an error, not a hang.
		if _, err := safefile.Read(s.Src, MaxBuildSecretBytes); err != nil {
			return fmt.Errorf("secret %s: %w", s.ID, err)
		}
	}
	return nil
}

// MaxBuildSecretBytes is BuildKit's limit for a build secret (secrets.MaxSecretSize).
const MaxBuildSecretBytes = 500 * 1024

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

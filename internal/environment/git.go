package environment

import (
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
)

// scpLike is git's user@host:path notation.
var scpLike = regexp.MustCompile(`^[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:[^:]`)

// CloneURL checks a dependency's repository against the schemes devtool supports (https, http,
// ssh, git, file, user@host:path, a local path resolved against dir) and returns what to give
// git clone. Anything else (ext::, fd::, a leading '-') is refused: git would run it.
func CloneURL(repo, dir string) (string, error) {
	if repo == "" {
		return "", errors.New("repository is empty")
	}
	if strings.HasPrefix(repo, "-") {
		return "", fmt.Errorf("repository %q starts with '-'", short(repo))
	}
	if strings.Contains(repo, "::") {
		return "", fmt.Errorf("repository %q: git transport helpers (<transport>::<address>) are not supported", short(repo))
	}
	if i := strings.Index(repo, "://"); i >= 0 {
		u, err := url.Parse(repo)
		if err != nil {
			return "", fmt.Errorf("repository %q: %v", short(repo), err)
		}
		switch strings.ToLower(u.Scheme) {
		case "https", "http", "ssh", "git", "file":
			return repo, nil
		default:
			return "", fmt.Errorf("repository %q: scheme %q is not supported (use https, http, ssh, git or file)", short(repo), u.Scheme)
		}
	}
	if scpLike.MatchString(repo) {
		return repo, nil
	}
	if !filepath.IsAbs(repo) {
		repo = filepath.Join(dir, repo)
	}
	return "file://" + repo, nil // --depth is honoured for file:// URLs only
}

// InsideDir joins rel to root and refuses a result outside root (absolute paths, '..' that climbs
// out, symlinks that point out).
func InsideDir(root, rel string) (string, error) {
	if filepath.IsAbs(rel) {
		return "", errors.New("must be a path inside the repository, not an absolute path")
	}
	p := filepath.Join(root, rel)
	if !within(root, p) {
		return "", errors.New("leaves the repository")
	}
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		return "", err
	}
	if real, err := filepath.EvalSymlinks(p); err == nil && !within(realRoot, real) {
		return "", errors.New("is a symbolic link that leaves the repository")
	}
	return p, nil
}

func within(root, p string) bool {
	r, err := filepath.Rel(root, p)
	return err == nil && r != ".." && !strings.HasPrefix(r, ".."+string(filepath.Separator))
}

// short quotes at most a short prefix of a value in errors.
func short(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

package deploy

import (
	"bufio"
	"bytes"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/devtool/devtool/internal/safefile"
)

var invalidNameChars = regexp.MustCompile(`[^a-z0-9-]+`)

// EnvironmentName picks the environment name: the flag, else the name written in the manifest,
// else the repository's name from its git origin remote, else the name of the folder holding
// .git, else the manifest folder's name; made a valid Kubernetes name (lower case, [a-z0-9-],
// at most 63 characters). A subfolder of a repository gets the repository's name.
func EnvironmentName(flag, manifestName, dir string) string {
	origin, top := gitRepoName(dir)
	for _, n := range []string{flag, manifestName, origin, top, filepath.Base(dir)} {
		if s := SanitizeName(n); s != "" {
			return s
		}
	}
	return "default"
}

// SanitizeName turns any string into a DNS-1123 label, or "" when nothing usable is left.
func SanitizeName(s string) string {
	s = strings.ToLower(strings.TrimSpace(s))
	s = strings.ReplaceAll(s, "_", "-")
	s = strings.ReplaceAll(s, ".", "-")
	s = invalidNameChars.ReplaceAllString(s, "-")
	s = strings.Trim(s, "-")
	if len(s) > 63 {
		s = strings.TrimRight(s[:63], "-")
	}
	return s
}

// maxGitConfig bounds the git config read for the origin remote.
const maxGitConfig = 1 << 20

// gitRepoName names the repository dir belongs to: origin is the last path element of its
// origin remote's URL (without .git), "" when there is none; top is the folder holding .git.
// It reads .git/config directly (no git process), following a worktree's or submodule's .git file.
func gitRepoName(dir string) (origin, top string) {
	for d := dir; ; d = filepath.Dir(d) {
		gitPath := filepath.Join(d, ".git")
		if st, err := os.Lstat(gitPath); err == nil {
			return originName(gitDir(gitPath, st.IsDir())), filepath.Base(d)
		}
		if parent := filepath.Dir(d); parent == d {
			return "", ""
		}
	}
}

// gitDir finds the folder holding the repository's shared config.
func gitDir(gitPath string, isDir bool) string {
	if isDir {
		return gitPath
	}
	b, err := readSmall(gitPath, 4096)
	if err != nil {
		return ""
	}
	gd, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "gitdir:")
	if !ok {
		return ""
	}
	gd = strings.TrimSpace(gd)
	if !filepath.IsAbs(gd) {
		gd = filepath.Join(filepath.Dir(gitPath), gd)
	}
	if c, err := readSmall(filepath.Join(gd, "commondir"), 4096); err == nil {
		common := strings.TrimSpace(string(c))
		if !filepath.IsAbs(common) {
			common = filepath.Join(gd, common)
		}
		return common
	}
	return gd
}

func originName(gitDir string) string {
	if gitDir == "" {
		return ""
	}
	b, err := readSmall(filepath.Join(gitDir, "config"), maxGitConfig)
	if err != nil {
		return ""
	}
	inOrigin := false
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "[") {
			inOrigin = strings.ReplaceAll(line, " ", "") == `[remote"origin"]`
			continue
		}
		if !inOrigin {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || !strings.EqualFold(strings.TrimSpace(k), "url") {
			continue
		}
		return repoNameFromURL(strings.Trim(strings.TrimSpace(v), `"`))
	}
	return ""
}

// repoNameFromURL is the last path element of a git URL (https://h/o/shop.git, git@h:o/shop.git, /srv/shop).
func repoNameFromURL(u string) string {
	u = strings.TrimRight(u, "/")
	if i := strings.LastIndexAny(u, "/:"); i >= 0 {
		u = u[i+1:]
	}
	return strings.TrimSuffix(path.Base(u), ".git")
}

// readSmall reads a regular file of at most max bytes, never blocking on a FIFO or a device.
func readSmall(p string, max int64) ([]byte, error) {
	return safefile.Read(p, max)
}

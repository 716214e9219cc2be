package manifest

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strings"

	"github.com/devtool/devtool/internal/safefile"
)

// maxGitConfig caps the git config read for the remote's name.
const maxGitConfig = 1 << 20

// GitRemoteName is the repository name (RepositoryName) of the git remote of the repository
// holding dir: the "origin" remote, else the first remote listed. "" when dir is in no git
// repository or it has no remote. CI and pipeline clones live in folders named otherwise, so
// --name defaults to this before the folder name. It reads .git/config itself (a .git file's
// "gitdir:" is followed): nothing is run.
func GitRemoteName(dir string) string {
	cfg := gitConfigPath(dir)
	if cfg == "" {
		return ""
	}
	data, err := safefile.Read(cfg, maxGitConfig)
	if err != nil {
		return ""
	}
	if url := remoteURL(data); url != "" {
		return RepositoryName(url)
	}
	return ""
}

// gitConfigPath finds the config file of the repository holding dir, walking up.
func gitConfigPath(dir string) string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return ""
	}
	for i := 0; i < 256; i++ {
		dotGit := filepath.Join(abs, ".git")
		if st, err := os.Stat(dotGit); err == nil {
			if st.IsDir() {
				return filepath.Join(dotGit, "config")
			}
			// A worktree or submodule: ".git" is a file "gitdir: <path>".
			data, err := safefile.Read(dotGit, 4096)
			if err != nil {
				return ""
			}
			gitdir, ok := strings.CutPrefix(strings.TrimSpace(string(data)), "gitdir:")
			if !ok {
				return ""
			}
			gitdir = strings.TrimSpace(gitdir)
			if !filepath.IsAbs(gitdir) {
				gitdir = filepath.Join(abs, gitdir)
			}
			// A linked worktree keeps its config in the main repository ("commondir").
			if c, err := safefile.Read(filepath.Join(gitdir, "commondir"), 4096); err == nil {
				common := strings.TrimSpace(string(c))
				if !filepath.IsAbs(common) {
					common = filepath.Join(gitdir, common)
				}
				return filepath.Join(common, "config")
			}
			return filepath.Join(gitdir, "config")
		}
		parent := filepath.Dir(abs)
		if parent == abs {
			return ""
		}
		abs = parent
	}
	return ""
}

// remoteURL reads the url of remote "origin" from a git config, else of the first remote.
func remoteURL(data []byte) string {
	var first, origin, section string
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "[") {
			section = strings.ToLower(strings.Join(strings.Fields(strings.Trim(line, "[]")), " "))
			continue
		}
		if !strings.HasPrefix(section, "remote ") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || !strings.EqualFold(strings.TrimSpace(k), "url") {
			continue
		}
		v = strings.Trim(strings.TrimSpace(v), `"`)
		if first == "" {
			first = v
		}
		if section == `remote "origin"` && origin == "" {
			origin = v
		}
	}
	if origin != "" {
		return origin
	}
	return first
}

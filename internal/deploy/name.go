package deploy

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

var invalidNameChars = regexp.MustCompile(`[^a-z0-9-]+`)

// EnvironmentName picks the environment name: the flag, else the name written in the manifest,
// else the git repository's folder name, else the manifest folder's name; made a valid
// Kubernetes name (lower case, [a-z0-9-], at most 63 characters).
func EnvironmentName(flag, manifestName, dir string) string {
	for _, n := range []string{flag, manifestName, gitRepoName(dir), filepath.Base(dir)} {
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

// gitRepoName is the name of the repository dir belongs to: the folder holding .git.
func gitRepoName(dir string) string {
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, ".git")); err == nil {
			return filepath.Base(d)
		}
		if parent := filepath.Dir(d); parent == d {
			return ""
		}
	}
}

package filesync

import (
	"errors"
	"fmt"
	"path"
	"regexp"
	"strings"
	"time"
)

const (
	// tmpPrefix starts the name of every temporary file the engine writes;
	// scans and watchers skip such names and a start removes stale ones.
	tmpPrefix  = ".devtool-tmp-"
	maxPathLen = 4096
	maxNameLen = 255
)

// errEscape marks a path from the peer that would leave the root.
var errEscape = errors.New("path leaves the synchronized folder")

// checkPath validates a slash-separated relative path received from the
// peer: not empty, not absolute, clean, no "..", no NUL, bounded lengths, and
// never inside .git or one of the engine's temporary names.
func checkPath(p string) error {
	switch {
	case p == "" || p == ".":
		return fmt.Errorf("%w: empty path", errEscape)
	case len(p) > maxPathLen:
		return fmt.Errorf("%w: path longer than %d bytes", errEscape, maxPathLen)
	case strings.IndexByte(p, 0) >= 0:
		return fmt.Errorf("%w: NUL byte in %q", errEscape, p)
	case strings.HasPrefix(p, "/") || strings.Contains(p, "\\") || (len(p) >= 2 && p[1] == ':'):
		return fmt.Errorf("%w: absolute path %q", errEscape, p)
	case path.Clean(p) != p:
		return fmt.Errorf("%w: unclean path %q", errEscape, p)
	}
	for _, part := range strings.Split(p, "/") {
		switch {
		case part == "..":
			return fmt.Errorf("%w: %q climbs out with ..", errEscape, p)
		case len(part) > maxNameLen:
			return fmt.Errorf("%w: a name in %q is longer than %d bytes", errEscape, p, maxNameLen)
		case part == ".git":
			return fmt.Errorf("%w: %q is inside .git, never synced", errEscape, p)
		case strings.HasPrefix(part, tmpPrefix):
			return fmt.Errorf("%w: %q is a temporary name", errEscape, p)
		}
	}
	return nil
}

// conflictName is the name a conflicting copy gets beside p: the side it
// came from and when, before the extension, e.g.
// src/a.conflict-remote-20261123-101500.go. A conflict on a conflict copy
// gets a name of the original's (another copy of it, never a copy of the
// copy): names never grow with repeated conflicts.
func conflictName(p, side string, t time.Time, n int) string {
	dir, file := path.Split(p)
	if f := conflictTag.ReplaceAllString(file, ""); f != "" {
		file = f
	}
	ext := path.Ext(file)
	if ext == file { // ".bashrc": no stem
		ext = ""
	}
	stem := strings.TrimSuffix(file, ext)
	tag := ".conflict-" + side + "-" + t.UTC().Format("20060102-150405")
	if n > 1 {
		tag += fmt.Sprintf("-%d", n)
	}
	return dir + stem + tag + ext
}

// conflictTag matches the tag conflictName puts in a name.
var conflictTag = regexp.MustCompile(`\.conflict-(local|remote)-[0-9]{8}-[0-9]{6}(-[0-9]+)?`)

// isConflictCopy reports whether p's name is a conflict copy's.
func isConflictCopy(p string) bool { return conflictTag.MatchString(path.Base(p)) }

// isUnder reports whether q is p or below p.
func isUnder(q, p string) bool {
	return q == p || (len(q) > len(p) && q[len(p)] == '/' && q[:len(p)] == p)
}

// Package projectpath is the one rule for paths a project file names on the user's machine (host
// volumes, build contexts, Dockerfiles, build secrets, env files, dev sync folders): they must lie
// inside the project folder, symlinks followed, unless the user opts in with AllowFlag. It also
// knows the system paths that name the machine Docker would run on rather than a project file
// (IsSystemPath), which mean nothing on a cluster node.
package projectpath

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// AllowFlag is the one opt-in for paths outside the project folder, on every command that loads
// an environment.
const AllowFlag = "--allow-outside-volumes"

// Hint ends the message of a refused path.
const Hint = "pass " + AllowFlag + " to allow it, or move it into the project folder"

// OutsideError says a path lies outside the project folder.
type OutsideError struct {
	Path     string // the path as resolved against its file's folder (absolute)
	Resolved string // where its symlinks lead ("" when it is not reached through one)
	Root     string // the project folder
}

func (e *OutsideError) Error() string {
	if e.Resolved != "" {
		return fmt.Sprintf("%s links to %s, outside the project folder %s", e.Path, e.Resolved, e.Root)
	}
	return fmt.Sprintf("%s is outside the project folder %s", e.Path, e.Root)
}

// Check returns an *OutsideError when path (absolute, or relative to root) lies outside root
// once every symlink of both is followed: "..", absolute paths and links that lead out are all
// outside. A path that does not exist yet is judged by its longest existing parent. Check only
// reads link targets: it opens nothing.
func Check(root, path string) error {
	if !filepath.IsAbs(path) {
		path = filepath.Join(root, path)
	}
	path = filepath.Clean(path)
	rroot := Resolve(root)
	rpath := Resolve(path)
	if Within(rroot, rpath) {
		return nil
	}
	e := &OutsideError{Path: path, Root: root}
	if Within(rroot, path) || Within(filepath.Clean(root), path) {
		e.Resolved = rpath // written inside, reached through a link that leads out
	}
	return e
}

// Within reports whether path is root or lies under it, lexically (no symlink is followed).
func Within(root, path string) bool {
	rel, err := filepath.Rel(root, path)
	if err != nil {
		return false
	}
	return rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}

// Resolve returns the absolute path with its symlinks followed, one component at a time, so a
// link that leads nowhere (or to a path that does not exist yet) still counts where it points.
func Resolve(path string) string {
	return resolve(filepath.Clean(path), 0)
}

func resolve(path string, depth int) string {
	if r, err := filepath.EvalSymlinks(path); err == nil {
		return r
	}
	parent := filepath.Dir(path)
	if parent == path || depth > 40 {
		return path
	}
	dir := resolve(parent, depth+1)
	p := filepath.Join(dir, filepath.Base(path))
	target, err := os.Readlink(p)
	if err != nil { // not a link, or not there: as written
		return p
	}
	if !filepath.IsAbs(target) {
		target = filepath.Join(dir, target)
	}
	return resolve(filepath.Clean(target), depth+1)
}

// systemPaths name the machine Docker runs on: its daemon's and runtimes' sockets and state, its
// clock and timezone, the kernel's pseudo file systems. Mounting them is about the host, never
// about the project, and a cluster node's are not the user's. Each one covers what lies under it.
var systemPaths = []string{
	"/var/run/docker.sock", "/run/docker.sock", "/var/run/docker", "/run/docker",
	"/var/run/containerd", "/run/containerd", "/var/run/podman", "/run/podman",
	"/var/lib/docker", "/var/lib/containerd",
	"/etc/localtime", "/etc/timezone",
	"/proc", "/sys", "/dev",
	"/lib/modules", "/run/udev", "/var/run/utmp",
}

// IsSystemPath reports whether p (as written, absolute) is one of the host's system paths or
// lies under one: /var/run/docker.sock, /etc/localtime, /etc/timezone, /proc, /sys, /dev and the
// like. A home folder path is never one.
func IsSystemPath(p string) bool {
	if !strings.HasPrefix(p, "/") {
		return false
	}
	p = filepath.ToSlash(filepath.Clean(p))
	for _, s := range systemPaths {
		if p == s || strings.HasPrefix(p, s+"/") {
			return true
		}
	}
	return false
}

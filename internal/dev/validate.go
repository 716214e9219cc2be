package dev

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/distribution/reference"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/devtool/devtool/internal/manifest"
	"github.com/devtool/devtool/internal/projectpath"
	"github.com/devtool/devtool/internal/yamlsrc"
)

// OutsideFlag is the flag of `up` that allows a sync folder outside the project folder: the
// one opt-in of every command for paths outside the project (internal/projectpath).
const OutsideFlag = projectpath.AllowFlag

// systemFolders are folders of a container's file system a sync folder must not replace: the
// dev volume mounted there would hide the image's programs, libraries or configuration.
var systemFolders = []string{"/bin", "/boot", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/sbin", "/usr", "/usr/bin", "/usr/lib", "/usr/sbin", "/usr/local", "/var", "/run"}

// virtualFolders are kernel or devtool file systems: no sync folder lies at or below them.
var virtualFolders = []string{"/proc", "/sys", "/dev", Home}

// CheckOptions are the inputs of Validate besides the dev entry: the project and what up was
// asked, and the parts of the machine it looks at (replaceable in tests).
type CheckOptions struct {
	// ProjectDir is the project folder: sync folders lie inside it unless AllowOutside.
	ProjectDir string
	// AllowOutside allows sync folders outside the project folder (OutsideFlag).
	AllowOutside bool
	// Env is up's --env (already checked by ParseEnvFlags); checked again here with the entry.
	Env map[string]string
	// Stat follows links (nil: os.Stat); EvalSymlinks resolves them (nil: filepath.EvalSymlinks).
	Stat         func(string) (fs.FileInfo, error)
	EvalSymlinks func(string) (string, error)
	// PortFree says whether a local port can be listened on 127.0.0.1 (nil: ports not probed);
	// its error says why not (PortInUse).
	PortFree func(port int) error
}

// Errors is every problem Validate found in a dev entry, in file order.
type Errors []*yamlsrc.Error

func (es Errors) Error() string   { return yamlsrc.FormatErrors("dev entry", es) }
func (es Errors) Unwrap() []error { return yamlsrc.UnwrapErrors(es) }

type checker struct {
	d    *manifest.Dev
	o    CheckOptions
	errs Errors
}

func (c *checker) errorf(rel, format string, args ...any) {
	s := c.d.Source(rel)
	c.errs = append(c.errs, &yamlsrc.Error{Pos: s.Pos, Field: s.Field, Msg: fmt.Sprintf(format, args...)})
}

// Validate checks a dev entry before up changes anything in the cluster: sync folders (the local
// folder exists, is a folder, lies inside the project; the remote one is an absolute clean path,
// not the root or a system folder, neither repeated nor nested), forwards and reverses (no port
// twice; with PortFree, every local port of a forward free), environment names and values, the
// image reference, resources (limits not below requests) and the workdir. It returns Errors
// (every problem, each naming file, line and field), or nil.
func Validate(d *manifest.Dev, o CheckOptions) error {
	if o.Stat == nil {
		o.Stat = os.Stat
	}
	if o.EvalSymlinks == nil {
		o.EvalSymlinks = filepath.EvalSymlinks
	}
	c := &checker{d: d, o: o}
	c.image()
	c.workdir()
	c.syncs()
	c.ports()
	c.environment()
	c.resources()
	if len(c.errs) == 0 {
		return nil
	}
	yamlsrc.SortErrors(c.errs)
	return c.errs
}

func (c *checker) image() {
	if _, written := c.d.Sources["image"]; c.d.Image == "" && !written {
		return // not set: the workload's image
	}
	if msg := ImageRefError(c.d.Image); msg != "" {
		c.errorf("image", "%s", msg)
	}
}

// ImageRefError says what is wrong with an image reference ("" when it parses): the grammar of
// Docker's reference parser, which the kubelet's runtime uses.
func ImageRefError(s string) string {
	if s == "" {
		return "expected an image reference (for example registry.example/app:1.2), found an empty string"
	}
	if len(s) > 4*reference.NameTotalLengthMax {
		return fmt.Sprintf("expected an image reference, found a name of %d bytes (at most %d)", len(s), reference.NameTotalLengthMax)
	}
	if _, err := reference.ParseNormalizedNamed(s); err != nil {
		return fmt.Sprintf("expected an image reference (for example registry.example/app:1.2), found %s: %v", yamlsrc.Quote(s), err)
	}
	return ""
}

func (c *checker) workdir() {
	if c.d.Workdir == "" {
		return
	}
	if msg := containerPathError(c.d.Workdir); msg != "" {
		c.errorf("workdir", "%s", msg)
	}
}

// containerPathError says what is wrong with a path in the container ("" when it is absolute
// and clean).
func containerPathError(p string) string {
	if strings.ContainsAny(p, "\x00\n\r") {
		return fmt.Sprintf("the path %s contains a NUL byte or a line break", yamlsrc.Quote(p))
	}
	if !strings.HasPrefix(p, "/") {
		return fmt.Sprintf("expected an absolute path in the container, found %s", yamlsrc.Quote(p))
	}
	if clean := path.Clean(p); clean != p {
		return fmt.Sprintf("expected a clean absolute path in the container, found %s (write %s)", yamlsrc.Quote(p), yamlsrc.Quote(clean))
	}
	return ""
}

// inside reports whether p is dir or lies below it (both clean, slash-separated).
func inside(p, dir string) bool {
	return p == dir || dir == "/" || strings.HasPrefix(p, dir+"/")
}

func (c *checker) syncs() {
	var root string
	if c.o.ProjectDir != "" {
		root = c.o.ProjectDir
		if r, err := c.o.EvalSymlinks(root); err == nil {
			root = r
		}
	}
	var remotes []string // clean remote folders accepted so far, by index ("" when not)
	for i, s := range c.d.Sync {
		rel := yamlsrc.Index("sync", i)
		remotes = append(remotes, "")
		if msg := containerPathError(s.Remote); msg != "" {
			c.errorf(rel, "remote folder: %s", msg)
		} else {
			switch {
			case s.Remote == "/":
				c.errorf(rel, "the remote folder cannot be the root of the container: the dev volume would replace its whole file system; pick a folder such as /app")
			case slices.Contains(systemFolders, s.Remote):
				c.errorf(rel, "the remote folder %s is a system folder of the container: the dev volume would hide its content; pick a folder such as /app", s.Remote)
			case slices.ContainsFunc(virtualFolders, func(v string) bool { return inside(s.Remote, v) }):
				c.errorf(rel, "the remote folder %s lies in a folder the container's kernel or devtool manages; pick a folder such as /app", s.Remote)
			default:
				bad := false
				for j, r := range remotes[:i] {
					switch {
					case r == "":
					case r == s.Remote:
						c.errorf(rel, "the remote folder %s is also the one of sync[%d]", s.Remote, j)
						bad = true
					case inside(s.Remote, r) || inside(r, s.Remote):
						c.errorf(rel, "the remote folder %s and %s (sync[%d]) nest: sync folders cannot lie in one another", s.Remote, r, j)
						bad = true
					}
				}
				if !bad {
					remotes[i] = s.Remote
				}
			}
		}
		c.local(rel, s.Local, root)
	}
}

// local checks the local folder of a sync pair.
func (c *checker) local(rel, local, root string) {
	if strings.ContainsAny(local, "\x00\n\r") {
		c.errorf(rel, "the local folder %s contains a NUL byte or a line break", yamlsrc.Quote(local))
		return
	}
	fi, err := c.o.Stat(local)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			c.errorf(rel, "the local folder %s does not exist: create it, or fix the path", local)
		} else {
			c.errorf(rel, "the local folder %s: %v", local, yamlsrc.UnwrapPathError(err))
		}
		return
	}
	if !fi.IsDir() {
		c.errorf(rel, "the local folder %s is %s, not a folder", local, describeMode(fi.Mode()))
		return
	}
	if root == "" || c.o.AllowOutside {
		return
	}
	real := local
	if r, err := c.o.EvalSymlinks(local); err == nil {
		real = r
	}
	if !within(real, root) {
		through := ""
		if real != filepath.Clean(local) {
			through = " (a symbolic link leads to " + real + ")"
		}
		c.errorf(rel, "the local folder %s is outside the project folder %s%s: pass %s to sync it, or move it into the project", local, c.o.ProjectDir, through, OutsideFlag)
	}
}

// within reports whether p (absolute) is root or lies below it.
func within(p, root string) bool {
	r, err := filepath.Rel(root, p)
	return err == nil && r != ".." && !strings.HasPrefix(r, ".."+string(filepath.Separator)) && !filepath.IsAbs(r)
}

// describeMode names what a file that is not a folder is.
func describeMode(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	case m.IsRegular():
		return "a file"
	default:
		return "a special file"
	}
}

func (c *checker) ports() {
	locals := map[int32]int{}
	for i, f := range c.d.Forward {
		rel := yamlsrc.Index("forward", i)
		if j, ok := locals[f.Local]; ok {
			c.errorf(rel, "local port %d is also the one of forward[%d]", f.Local, j)
			continue
		}
		locals[f.Local] = i
		if c.o.PortFree != nil {
			if err := c.o.PortFree(int(f.Local)); err != nil {
				c.errorf(rel, "%v: stop it, or change the local port", err)
			}
		}
	}
	remotes := map[int32]int{}
	for i, r := range c.d.Reverse {
		rel := yamlsrc.Index("reverse", i)
		if j, ok := remotes[r.Remote]; ok {
			c.errorf(rel, "remote port %d is also the one of reverse[%d]", r.Remote, j)
			continue
		}
		remotes[r.Remote] = i
	}
}

func (c *checker) environment() {
	names := make([]string, 0, len(c.d.Environment))
	for k := range c.d.Environment {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		rel := yamlsrc.Join("environment", k)
		if msg := EnvNameError(k); msg != "" {
			c.errorf(rel, "%s", msg)
		} else if strings.ContainsRune(c.d.Environment[k], 0) {
			c.errorf(rel, "the value of %s contains a NUL byte", k)
		}
	}
	flags := make([]string, 0, len(c.o.Env))
	for k := range c.o.Env {
		flags = append(flags, k)
	}
	slices.Sort(flags)
	for _, k := range flags {
		msg := EnvNameError(k)
		if msg == "" && strings.ContainsRune(c.o.Env[k], 0) {
			msg = "the value of " + k + " contains a NUL byte"
		}
		if msg != "" {
			// Printed as "--env: <message>" (a flag has no line).
			c.errs = append(c.errs, &yamlsrc.Error{Pos: yamlsrc.Position{File: "--env"}, Msg: msg})
		}
	}
}

// EnvNameError says what is wrong with an environment variable name ("" when it is valid): the
// names the API server takes (letters, digits, '_', '-', '.', not starting with a digit).
func EnvNameError(k string) string {
	if k == "" {
		return "expected an environment variable name, found an empty one"
	}
	if errs := validation.IsEnvVarName(k); len(errs) > 0 {
		return fmt.Sprintf("%s is not a valid environment variable name: letters, digits, '_', '-' and '.' only, not starting with a digit", yamlsrc.Quote(k))
	}
	return ""
}

// EnvFlagError checks one --env NAME=value.
func EnvFlagError(k, v string) error {
	if msg := EnvNameError(k); msg != "" {
		return fmt.Errorf("--env %s=…: %s", yamlsrc.Shorten(k), msg)
	}
	if strings.ContainsRune(v, 0) {
		return fmt.Errorf("--env %s: the value contains a NUL byte", k)
	}
	return nil
}

func (c *checker) resources() {
	r := c.d.Resources
	for _, q := range []struct {
		name       string
		req, limit string
	}{{"cpu", r.Requests.CPU, r.Limits.CPU}, {"memory", r.Requests.Memory, r.Limits.Memory}} {
		if q.req == "" || q.limit == "" {
			continue
		}
		req, err1 := resource.ParseQuantity(q.req)
		lim, err2 := resource.ParseQuantity(q.limit)
		if err1 != nil || err2 != nil {
			continue // the loader reported them
		}
		if lim.Cmp(req) < 0 {
			c.errorf("resources.limits."+q.name, "the %s limit %s is below the request %s: a limit must be at least the request", q.name, q.limit, q.req)
		}
	}
}

// SyncableFolders keeps, of the sync folders of a dev entry made from Compose host volumes, those
// up can sync: folders inside the project folder, mounted read-write. Single files, sockets
// (such as /var/run/docker.sock), read-only mounts, missing paths and anything outside the
// project are taken out; it returns them described ("./nginx.conf (a file)"), for one warning.
func SyncableFolders(d *manifest.Dev, projectDir string) []string {
	root := projectDir
	if r, err := filepath.EvalSymlinks(root); err == nil {
		root = r
	}
	show := func(p string) string {
		if r, err := filepath.Rel(projectDir, p); err == nil && within(p, projectDir) {
			return "./" + filepath.ToSlash(r)
		}
		return p
	}
	var kept []manifest.Sync
	var keptSrc []manifest.Source
	var left []string
	for i, s := range d.Sync {
		why := ""
		fi, err := os.Stat(s.Local)
		real := s.Local
		if r, err := filepath.EvalSymlinks(s.Local); err == nil {
			real = r
		}
		switch {
		case err != nil && errors.Is(err, fs.ErrNotExist):
			why = "does not exist"
		case err != nil:
			why = yamlsrc.UnwrapPathError(err).Error()
		case !fi.IsDir():
			why = describeMode(fi.Mode())
		case !within(real, root):
			why = "outside the project"
		case s.ReadOnly:
			why = "read-only"
		}
		if why != "" {
			left = append(left, fmt.Sprintf("%s (%s)", show(s.Local), why))
			continue
		}
		kept = append(kept, s)
		keptSrc = append(keptSrc, d.Source(yamlsrc.Index("sync", i)))
	}
	d.Sync = kept
	for k := range d.Sources {
		if strings.HasPrefix(k, "sync[") {
			delete(d.Sources, k)
		}
	}
	for i, src := range keptSrc {
		d.SetSource(yamlsrc.Index("sync", i), src.Pos, src.Field)
	}
	return left
}

// Package testrelease builds binaries of an earlier devtool release from the git history,
// for the tests that check this release against the previous one (test/compat,
// test/e2e). The sources come from `git archive COMMIT`; the binaries are cached under
// the temporary folder, keyed by the commit and what is built, so only the first test
// run of a machine pays for the build. Nothing here is ever written into the repository.
package testrelease

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"syscall"
	"testing"
)

// Previous is the commit of the previous release: the version this release keeps working
// with both ways (N-1). Move it forward with each release.
const Previous = "1c4d819"

// Target is one binary to build from the release's sources.
type Target struct {
	// Name of the binary in the cache.
	Name string
	// Package to build, relative to the repository root ("./cmd/devtool").
	Package string
	// Files are added to the sources before building (path relative to the root ->
	// content): a small program of the test's own that uses the release's packages.
	Files map[string]string
	// Linux builds for linux/GOARCH with CGO off (the agent).
	Linux bool
}

// Release is a built earlier release.
type Release struct {
	Commit string // full hash
	Dir    string // the cache folder
	bins   map[string]string
}

// Bin is the path of a built target.
func (r *Release) Bin(name string) string { return r.bins[name] }

// Build builds targets from commit (see Previous), or takes them from the cache. It fails
// the test when the repository's history is not at hand (a shallow clone without the
// commit) or a build fails.
func Build(t testing.TB, commit string, targets ...Target) *Release {
	t.Helper()
	root, err := repoRoot()
	if err != nil {
		t.Fatalf("finding the repository: %v", err)
	}
	out, err := exec.Command("git", "-C", root, "rev-parse", "--verify", commit+"^{commit}").Output()
	if err != nil {
		t.Fatalf("commit %s of the previous release is not in this clone's history (%v); fetch it (git fetch --unshallow)", commit, err)
	}
	full := strings.TrimSpace(string(out))
	dir := filepath.Join(os.TempDir(), "devtool-release-"+full[:12]+"-"+targetsKey(targets))
	r := &Release{Commit: full, Dir: dir, bins: map[string]string{}}
	for _, tg := range targets {
		r.bins[tg.Name] = filepath.Join(dir, "bin", tg.Name)
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		t.Fatal(err)
	}
	// One builder at a time per cache folder (parallel tests, several test binaries).
	lock, err := os.OpenFile(dir+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	if _, err := os.Stat(filepath.Join(dir, "done")); err == nil {
		return r
	}
	_ = os.RemoveAll(dir)
	src := filepath.Join(dir, "src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Logf("building %s of release %s (cached in %s)", names(targets), commit, dir)
	arch := exec.Command("sh", "-c", `git -C "$1" archive --format=tar "$2" | tar -x -C "$3"`, "sh", root, full, src)
	if b, err := arch.CombinedOutput(); err != nil {
		t.Fatalf("git archive %s: %v\n%s", commit, err, b)
	}
	for _, tg := range targets {
		for p, content := range tg.Files {
			f := filepath.Join(src, filepath.FromSlash(p))
			if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(f, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		cmd := exec.Command("go", "build", "-trimpath", "-o", r.bins[tg.Name], tg.Package)
		cmd.Dir = src
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
		if tg.Linux {
			cmd.Env = append(cmd.Env, "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH)
		}
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("building %s of release %s: %v\n%s", tg.Package, commit, err, b)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "done"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return r
}

func names(targets []Target) string {
	var n []string
	for _, t := range targets {
		n = append(n, t.Name)
	}
	return strings.Join(n, ", ")
}

// targetsKey names what is built, so another set of targets gets its own cache folder.
func targetsKey(targets []Target) string {
	h := sha256.New()
	for _, t := range targets {
		fmt.Fprintf(h, "%s\x00%s\x00%v\x00", t.Name, t.Package, t.Linux)
		var paths []string
		for p := range t.Files {
			paths = append(paths, p)
		}
		sort.Strings(paths)
		for _, p := range paths {
			fmt.Fprintf(h, "%s\x00%s\x00", p, t.Files[p])
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:12]
}

func repoRoot() (string, error) {
	_, here, _, _ := runtime.Caller(0)
	out, err := exec.Command("git", "-C", filepath.Dir(here), "rev-parse", "--show-toplevel").Output()
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(out)), nil
}

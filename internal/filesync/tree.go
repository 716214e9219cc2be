package filesync

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/devtool/devtool/internal/filesync/ignore"
)

// tree is one side's folder: its index (the state last seen on disk, with
// content hashes) and the conditional operations that change it. Every
// operation from the peer checks that the path still is what the decision
// was made from, so a concurrent edit is never overwritten.
type tree struct {
	root string
	r    *os.Root
	log  *slog.Logger

	mu        sync.Mutex
	idx       map[string]Entry
	ign       *ignore.Matcher
	rules     []ruleFile // rules files found by the last full scan (client)
	excludes  []string
	readRules bool     // read .gitignore/.devtoolignore while scanning (client)
	newDirs   []string // folders made by parents(), reported to the peer
	never     []string // relative paths never synced (devtool's own state inside the folder)
	buf       []byte
	rootfd    int // the root for the fast put path (-1: none; see fastput_linux.go)
	// onDir, when set, is called for each folder a walk is about to read
	// (the watcher watches it before its content is read, so nothing
	// changed during the scan goes unseen and no second scan is needed).
	// Set only by scanAll, under mu, for the length of its walk.
	onDir  func(rel string)
	noFast atomic.Bool // the fast path turned out unavailable
	// stopped ends walks early (the session is ending: its teardown waits
	// for the reader, which may be in a whole scan).
	stopped atomic.Bool
	// scanErrs are the paths a scan could not read since the last
	// takeScanErrs: what they held is unknown, kept in the index as it was
	// (never taken for deleted), and reported.
	scanErrs []error
	// refreshed: a scan cleared a racy flag since takeRefreshed was last called.
	refreshed bool
	// caps is what the filesystem under root keeps (probed once per
	// session, see probeCaps).
	caps caps
	// foldNorm: the side folds Unicode form (caps.foldNorm, or the
	// client's view of it): parents refuses to make a name beside its twin.
	foldNorm bool
	// evenExec: where caps.noExec, a scanned file's exec bit is the one
	// the index held (what was received) instead of the disk's. The
	// agent's trees do this for a client that does not take the agent's
	// caps into its decisions (see Serve).
	evenExec bool
	// now is the clock that dates received files (tests inject one).
	now func() time.Time
	// w is the watcher of this tree (nil: none), told of the events this
	// tree's own writes cause (see watcher.own).
	w *watcher
}

var (
	errChanged  = errors.New("changed on this side since the decision")
	errNotEmpty = errors.New("directory not empty")
	errIgnored  = errors.New("ignored on this side")
	errStopped  = errors.New("scan stopped: the session is ending")
	// errVanished: a folder above the path vanished (or became a file) on
	// this side since the decision, a normal race with a local delete. It is
	// a change like any other: the side that saw it rescans the path's
	// folders and reconciles again; it is never reported as an error.
	errVanished = fmt.Errorf("a folder above it vanished: %w", errChanged)
	// errTwin: on a side that folds Unicode form, the name (or a folder
	// above it) would be made beside its twin (twinThere): a decision taken
	// before the twin appeared. It is decided again shortly (a silent retry).
	errTwin = fmt.Errorf("its twin is there: %w", errVanished)
)

// asVanished turns a "no such file" or "not a directory" error of an
// operation on p into errVanished.
func asVanished(p string, err error) error {
	if err == nil || errors.Is(err, errChanged) || errors.Is(err, errEscape) {
		return err
	}
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return fmt.Errorf("%s: %w (%v)", p, errVanished, err)
	}
	return err
}

// ancestors lists the folders above the given paths (and the paths), for a
// rescan after errVanished.
func ancestors(paths ...string) []string {
	var out []string
	seen := map[string]bool{}
	for _, p := range paths {
		for i := 0; i <= len(p); i++ {
			if i == len(p) || p[i] == '/' {
				if q := p[:i]; q != "" && !seen[q] {
					seen[q] = true
					out = append(out, q)
				}
			}
		}
	}
	return out
}

func openTree(root string, create bool, log *slog.Logger) (*tree, error) {
	if !filepath.IsAbs(root) {
		return nil, fmt.Errorf("sync folder %q is not an absolute path", root)
	}
	if create {
		if err := os.MkdirAll(root, 0o755); err != nil {
			return nil, fmt.Errorf("creating sync folder: %w", err)
		}
	}
	fi, err := os.Stat(root)
	if err != nil {
		return nil, fmt.Errorf("sync folder: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("sync folder %s is not a directory", root)
	}
	r, err := os.OpenRoot(root)
	if err != nil {
		return nil, fmt.Errorf("sync folder: %w", err)
	}
	t := &tree{root: root, r: r, log: log, idx: map[string]Entry{}, ign: ignore.New(nil), buf: make([]byte, 64<<10), rootfd: openRootFD(root), now: time.Now}
	t.caps = probeCaps(r)
	t.foldNorm = t.caps.foldNorm
	if t.caps != (caps{}) {
		log.Info("sync folder capabilities", "exec_bits", !t.caps.noExec, "case_insensitive", t.caps.foldCase,
			"normalization_insensitive", t.caps.foldNorm, "symlinks", !t.caps.noLinks)
	}
	return t, nil
}

func (t *tree) close() {
	t.r.Close()
	closeRootFD(t.rootfd)
	t.rootfd = -1
}

// skipName is true for names never synced whatever the rules say.
func skipName(name string) bool {
	return name == ".git" || strings.HasPrefix(name, tmpPrefix)
}

// ignored reports whether p is outside the synchronization. Callers hold mu.
func (t *tree) ignored(p string, isDir bool) bool {
	for _, n := range t.never {
		if isUnder(p, n) {
			return true
		}
	}
	for _, part := range strings.Split(p, "/") {
		if skipName(part) {
			return true
		}
	}
	return t.ign.Ignored(p, isDir)
}

// setRules replaces the ignore rules (server: the client's rules).
func (t *tree) setRules(excludes []string, files []ruleFile) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.excludes = excludes
	t.ign = ignore.New(excludes)
	for _, f := range files {
		t.ign.Add(f.Dir, f.Content)
	}
	t.rules = files
}

// hashFile hashes the file at p.
func (t *tree) hashFile(p string) (uint64, int64, error) {
	f, err := t.open(p)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	h := xxhash.New()
	n, err := io.CopyBuffer(h, f, t.buf)
	return h.Sum64(), n, err
}

// open opens file p for reading, never outside the root.
func (t *tree) open(p string) (io.ReadCloser, error) {
	if f, ok, err := t.openRead(p); ok {
		return f, err
	}
	return t.r.Open(p)
}

// changedAt returns when file p was last modified (zero: not a file, or
// unreadable); the settlers ask it before sending a file that waited.
func (t *tree) changedAt(p string) time.Time {
	fi, err := t.r.Lstat(filepath.FromSlash(p))
	if err != nil || !fi.Mode().IsRegular() {
		return time.Time{}
	}
	return fi.ModTime()
}

// openExpected checks that p still is want, as expect does, and opens it
// when it is a file. A file is checked by what its open descriptor says
// (size, mtime, exec bit) without hashing it again: the sender hashes what
// it sends, and the receiver refuses content that differs from want.
// Anything else, or a file that differs, takes expect's full check.
func (t *tree) openExpected(p string, want Entry) (Entry, io.ReadCloser, error) {
	if want.Kind == KindFile {
		if f, err := t.open(p); err == nil {
			fi, err := statOpen(f)
			if err == nil && fi.Mode().IsRegular() && fi.Size() == want.Size && fi.ModTime().UnixNano() == want.MTime {
				t.mu.Lock()
				exec := t.execBit(fi.Mode(), t.idx[p])
				t.mu.Unlock()
				if exec == want.Exec {
					return want, f, nil
				}
			}
			f.Close()
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	cur, err := t.expect(p, want)
	return cur, nil, err
}

// snapshot copies the index.
func (t *tree) snapshot() map[string]Entry {
	t.mu.Lock()
	defer t.mu.Unlock()
	m := make(map[string]Entry, len(t.idx))
	for k, v := range t.idx {
		m[k] = v
	}
	return m
}

func (t *tree) get(p string) Entry {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.idx[p]
}

// ignoredDir reports whether folder rel is outside the synchronization.
func (t *tree) ignoredDir(rel string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.ignored(rel, true)
}

// takeNewDirs returns the folders made for parents since the last call.
func (t *tree) takeNewDirs() []item {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []item
	for _, d := range t.newDirs {
		out = append(out, item{Path: d, E: t.idx[d]})
	}
	t.newDirs = nil
	return out
}

func (t *tree) isNever(p string) bool {
	for _, n := range t.never {
		if isUnder(p, n) {
			return true
		}
	}
	return false
}

// neverSync keeps dir (absolute; devtool's state) out of the sync when it
// lies inside the folder.
func (t *tree) neverSync(dir string) {
	if dir == "" {
		return
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return
	}
	rel, err := filepath.Rel(t.root, abs)
	if err != nil || rel == "." || strings.HasPrefix(rel, "..") {
		return
	}
	t.never = append(t.never, filepath.ToSlash(rel))
}

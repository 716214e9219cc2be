package filesync

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path"
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
	// caps is what the filesystem under root keeps (probed once per
	// session, see probeCaps).
	caps caps
	// now is the clock that dates received files (tests inject one).
	now func() time.Time
}

// testHookOpenDir, when set (tests only), can fail the reading of a folder
// as a permission or I/O error would (tests run as root, which reads all).
var testHookOpenDir func(root, dir string) error

// maxScanErrs bounds the unreadable paths kept for a report.
const maxScanErrs = 20

// unknown records that p could not be read (err): what the index knows
// under it is kept as it was. Callers hold mu.
func (t *tree) unknown(p string, err error, seen map[string]struct{}) {
	if len(t.scanErrs) < maxScanErrs {
		name := p
		if name == "" {
			name = "."
		}
		t.scanErrs = append(t.scanErrs, fmt.Errorf("%s: unreadable, kept as it was (nothing deleted on the other side): %w", name, err))
	}
	if seen == nil {
		return
	}
	for q := range t.idx {
		if p == "" || isUnder(q, p) {
			seen[q] = struct{}{}
		}
	}
}

// takeScanErrs returns the unreadable paths reported since the last call.
func (t *tree) takeScanErrs() []error {
	t.mu.Lock()
	defer t.mu.Unlock()
	errs := t.scanErrs
	t.scanErrs = nil
	return errs
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
	if !t.caps.exec || t.caps.foldCase || t.caps.foldNorm {
		log.Info("sync folder capabilities", "exec_bits", t.caps.exec, "case_insensitive", t.caps.foldCase, "normalization_insensitive", t.caps.foldNorm)
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

// statEntry turns an lstat result into an Entry, hashing a file only when
// its size or mtime differ from old. ok is false for what is not synced
// (devices, sockets, fifos).
func (t *tree) statEntry(p string, fi fs.FileInfo, old Entry) (e Entry, ok bool, err error) {
	switch m := fi.Mode(); {
	case m.IsRegular():
		e = Entry{Kind: KindFile, Exec: t.execBit(m, old), Size: fi.Size(), MTime: fi.ModTime().UnixNano()}
		if old.Kind == KindFile && old.Size == e.Size && old.MTime == e.MTime && !old.racy {
			e.Hash = old.Hash
			return e, true, nil
		}
		now := time.Now().UnixNano()
		h, n, err := t.hashFile(p)
		if err != nil {
			return e, false, err
		}
		e.Hash, e.Size = h, n
		e.racy = now-e.MTime < racyWindow
		return e, true, nil
	case m.IsDir():
		return Entry{Kind: KindDir}, true, nil
	case m&fs.ModeSymlink != 0:
		target, err := t.r.Readlink(p)
		if err != nil {
			return e, false, err
		}
		return Entry{Kind: KindSymlink, Target: target, MTime: fi.ModTime().UnixNano()}, true, nil
	}
	return e, false, nil
}

// differs reports whether a rescan found something new: content or mtime.
func differs(a, b Entry) bool {
	return !same(a, b) || a.MTime != b.MTime
}

// scanAll walks the whole tree, updating the index; it returns what changed
// (absent entries for removed paths). A client tree rereads its rules files
// on the way. Stale temporary files are removed when clean is set. onDir,
// when not nil, is called for each folder before it is read (see t.onDir).
func (t *tree) scanAll(clean bool, onDir func(rel string)) ([]item, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.onDir = onDir
	defer func() { t.onDir = nil }()
	if t.readRules {
		t.ign = ignore.New(t.excludes)
		t.rules = nil
	}
	seen := make(map[string]struct{}, len(t.idx))
	var changed []item
	nerr := len(t.scanErrs)
	err := t.walk("", clean, seen, &changed)
	if len(t.scanErrs) > nerr {
		if err == nil {
			err = errors.Join(t.scanErrs[nerr:]...)
		}
		t.scanErrs = t.scanErrs[:nerr]
	}
	if t.stopped.Load() {
		// Not all was seen: what was not is kept as it was, not taken
		// for removed.
		return changed, errStopped
	}
	for p := range t.idx {
		if _, ok := seen[p]; !ok {
			delete(t.idx, p)
			changed = append(changed, item{Path: p})
		}
	}
	return changed, err
}

// walk scans folder dir ("" = root) recursively. A folder or file that
// cannot be read is unknown, not absent: what the index holds for it is
// kept (marked seen) and the error is recorded (see unknown). Callers hold
// mu.
func (t *tree) walk(dir string, clean bool, seen map[string]struct{}, changed *[]item) error {
	if t.stopped.Load() {
		return errStopped
	}
	if t.onDir != nil {
		t.onDir(dir)
	}
	name := dir
	if name == "" {
		name = "."
	}
	f, err := t.r.Open(name)
	if err == nil && testHookOpenDir != nil {
		if herr := testHookOpenDir(t.root, dir); herr != nil {
			f.Close()
			f, err = nil, herr
		}
	}
	if err != nil {
		if dir != "" && (errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)) {
			return nil // vanished meanwhile: absent indeed
		}
		t.unknown(dir, err, seen)
		return nil
	}
	ents, err := f.ReadDir(-1)
	f.Close()
	if err != nil {
		// What was read is scanned; the rest of the folder is unknown.
		t.unknown(dir, err, seen)
	}
	if t.readRules {
		for _, rn := range ignore.FileNames {
			for _, de := range ents {
				if de.Name() == rn && de.Type().IsRegular() {
					if b, err := t.r.ReadFile(join(dir, rn)); err == nil && len(b) <= 1<<20 {
						t.ign.Add(dir, string(b))
						t.rules = append(t.rules, ruleFile{Dir: dir, Content: string(b)})
					}
				}
			}
		}
	}
	for _, de := range ents {
		if t.stopped.Load() {
			return errStopped
		}
		n := de.Name()
		p := join(dir, n)
		if strings.HasPrefix(n, tmpPrefix) {
			if clean {
				_ = t.r.Remove(p)
			}
			continue
		}
		if skipName(n) || t.ign.Match(p, de.IsDir()) || t.isNever(p) {
			continue
		}
		fi, err := de.Info()
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				t.unknown(p, err, seen)
			}
			continue // vanished
		}
		old := t.idx[p]
		e, ok, err := t.statEntry(p, fi, old)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				t.unknown(p, err, seen)
			}
			continue
		}
		if !ok {
			continue
		}
		seen[p] = struct{}{}
		if differs(old, e) {
			t.idx[p] = e
			*changed = append(*changed, item{Path: p, E: e})
		} else if old.racy != e.racy {
			t.idx[p] = e
		}
		if e.Kind == KindDir {
			if err := t.walk(p, clean, seen, changed); err != nil {
				return err
			}
		}
	}
	return nil
}

func join(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}

// scanPaths rescans the given paths (a new folder with its content), and
// returns what changed. A path whose rules file changed makes rules true.
func (t *tree) scanPaths(paths []string) (changed []item, rules bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var gone []string
	for _, p := range paths {
		if t.ignored(p, false) && t.ignored(p, true) {
			continue
		}
		base := path.Base(p)
		for _, rn := range ignore.FileNames {
			if base == rn {
				rules = true
			}
		}
		fi, err := t.r.Lstat(p)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) && t.parentsReal(p) {
				t.unknown(p, err, nil) // unknown, not gone
				continue
			}
			if _, ok := t.idx[p]; ok {
				gone = append(gone, p)
			}
			continue
		}
		if t.ignored(p, fi.IsDir()) || !t.parentsKnown(p) {
			continue
		}
		old := t.idx[p]
		e, ok, err := t.statEntry(p, fi, old)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			t.unknown(p, err, nil)
			continue
		}
		if err != nil || !ok {
			if old.Kind != KindNone {
				gone = append(gone, p)
			}
			continue
		}
		if differs(old, e) {
			t.idx[p] = e
			changed = append(changed, item{Path: p, E: e})
		} else if old.racy != e.racy {
			t.idx[p] = e
		}
		if e.Kind == KindDir && old.Kind != KindDir {
			seen := map[string]struct{}{}
			_ = t.walk(p, false, seen, &changed)
		}
		if old.Kind == KindDir && e.Kind != KindDir {
			gone = append(gone, p+"/")
		}
	}
	if len(gone) > 0 {
		for q := range t.idx {
			for _, g := range gone {
				if q == g || (strings.HasSuffix(g, "/") && strings.HasPrefix(q, g)) || isUnder(q, g) {
					delete(t.idx, q)
					changed = append(changed, item{Path: q})
					break
				}
			}
		}
	}
	return changed, rules
}

// parentsReal reports whether every folder above p is a real folder on
// disk now (not gone, nor a file or symlink in its place: then p is gone
// too, whatever error reading it gave). Callers hold mu.
func (t *tree) parentsReal(p string) bool {
	for i := 0; i < len(p); i++ {
		if p[i] == '/' {
			if fi, err := t.r.Lstat(p[:i]); err != nil || !fi.IsDir() {
				return false
			}
		}
	}
	return true
}

// parentsKnown reports whether every folder above p is in the index (so a
// path below an ignored or unknown folder is not picked up alone).
func (t *tree) parentsKnown(p string) bool {
	for i := len(p) - 1; i >= 0; i-- {
		if p[i] == '/' {
			if t.idx[p[:i]].Kind != KindDir {
				return false
			}
		}
	}
	return true
}

// current is the state of p on disk now. Callers hold mu.
func (t *tree) current(p string) (Entry, error) {
	fi, err := t.r.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return Entry{}, nil
	}
	if err != nil {
		return Entry{}, err
	}
	e, ok, err := t.statEntry(p, fi, t.idx[p])
	if err != nil {
		return Entry{}, err
	}
	if !ok {
		return Entry{}, fmt.Errorf("%s is neither file, folder nor symlink", p)
	}
	return e, nil
}

// expect checks that p still is what the decision saw. Callers hold mu.
func (t *tree) expect(p string, want Entry) (Entry, error) {
	cur, err := t.current(p)
	if err != nil {
		return cur, err
	}
	if !same(cur, want) {
		return cur, fmt.Errorf("%w (%s, expected %s)", errChanged, cur.Kind, want.Kind)
	}
	return cur, nil
}

// parents makes sure every folder above p is a real folder (never a
// symlink), creating missing ones. Callers hold mu.
func (t *tree) parents(p string) error {
	for i := 0; i < len(p); i++ {
		if p[i] != '/' {
			continue
		}
		d := p[:i]
		if t.idx[d].Kind == KindDir {
			continue // known folder (a symlink put in its place shows up in a rescan; os.Root keeps writes inside the root anyway)
		}
		fi, err := t.r.Lstat(d)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if err := t.r.Mkdir(d, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
				return err
			}
			t.idx[d] = Entry{Kind: KindDir}
			t.newDirs = append(t.newDirs, d)
		case err != nil:
			return err
		case fi.Mode()&fs.ModeSymlink != 0:
			return fmt.Errorf("%w: %s is a symlink on this side", errEscape, d)
		case !fi.IsDir():
			// it became a file since the decision: a change, reconciled again
			return fmt.Errorf("%s is a %s on this side, not a folder: %w", d, kindOf(fi), errVanished)
		}
	}
	return nil
}

func kindOf(fi fs.FileInfo) string {
	switch {
	case fi.IsDir():
		return "folder"
	case fi.Mode()&fs.ModeSymlink != 0:
		return "symlink"
	}
	return "file"
}

// checkPeerPath refuses what the peer may not touch. Callers hold mu.
func (t *tree) checkPeerPath(p string, isDir bool) error {
	if err := checkPath(p); err != nil {
		return err
	}
	if t.ignored(p, isDir) {
		return fmt.Errorf("%s: %w", p, errIgnored)
	}
	return nil
}

// clearFor removes what is at p (already checked against the expectation)
// so something of another kind can take its place. Callers hold mu.
func (t *tree) clearFor(p string, cur Entry, newKind Kind) error {
	if cur.Kind == KindDir && newKind != KindDir {
		if err := t.r.Remove(p); err != nil {
			if isNotEmpty(err) {
				return fmt.Errorf("%s: %w", p, errNotEmpty)
			}
			return err
		}
		delete(t.idx, p)
	}
	return nil
}

func isNotEmpty(err error) bool {
	return errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, syscall.EEXIST)
}

func tmpName(dir string) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return join(dir, tmpPrefix+hex.EncodeToString(b[:]))
}

// putFile is a file being received into a temporary file beside its path.
type putFile struct {
	t      *tree
	p, tmp string
	e      Entry
	expect Entry
	f      *os.File
	ff     *fastFile // the fast path (f is nil then)
	h      *xxhash.Digest
	n      int64
}

// beginPut starts receiving file p (state e) that must replace expect.
func (t *tree) beginPut(p string, e Entry, expect Entry) (*putFile, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.checkPeerPath(p, false); err != nil {
		return nil, err
	}
	if expect.Kind == KindNone {
		// A new file: the fast path puts it in place only if the path is
		// still free then, which is the check that counts.
		if err := t.parents(p); err != nil {
			return nil, err
		}
		ff, ok, err := t.beginFast(p, dirOf(p), e.Exec)
		if err != nil {
			return nil, err
		}
		if ok {
			return &putFile{t: t, p: p, e: e, expect: expect, ff: ff, h: xxhash.New()}, nil
		}
	}
	if _, err := t.expect(p, expect); err != nil {
		return nil, err
	}
	if err := t.parents(p); err != nil {
		return nil, err
	}
	tmp := tmpName(dirOf(p))
	mode := os.FileMode(0o644)
	if e.Exec {
		mode = 0o755
	}
	f, err := t.r.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return nil, err
	}
	return &putFile{t: t, p: p, tmp: tmp, e: e, expect: expect, f: f, h: xxhash.New()}, nil
}

func (pf *putFile) write(b []byte) error {
	pf.h.Write(b)
	pf.n += int64(len(b))
	if pf.n > pf.e.Size {
		return fmt.Errorf("%s: more data than its announced %d bytes", pf.p, pf.e.Size)
	}
	if pf.ff != nil {
		return pf.ff.write(b)
	}
	_, err := pf.f.Write(b)
	return err
}

func (pf *putFile) abort() {
	if pf.ff != nil {
		pf.ff.abort()
		return
	}
	pf.f.Close()
	_ = pf.t.r.Remove(pf.tmp)
}

// commit checks the content, then renames the temporary file over p if p
// still is what was expected. It returns p's state afterwards.
func (pf *putFile) commit() (Entry, error) {
	if pf.ff != nil {
		return pf.commitFast()
	}
	t := pf.t
	var err error
	if pf.n != pf.e.Size || pf.h.Sum64() != pf.e.Hash {
		err = fmt.Errorf("%s: content changed while it was sent", pf.p)
	}
	if err == nil {
		// The receiver's time, not the sender's: build tools on this side
		// see the file as new whatever the two clocks say.
		err = setMTime(pf.f, t.r, pf.tmp, t.now().UnixNano())
	}
	var fi fs.FileInfo
	if err == nil {
		fi, err = pf.f.Stat()
	}
	if cerr := pf.f.Close(); err == nil {
		err = cerr
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	var cur Entry
	if err == nil {
		cur, err = t.expect(pf.p, pf.expect)
	}
	if err == nil {
		err = t.clearFor(pf.p, cur, KindFile)
	}
	if err == nil {
		err = t.replace(pf.tmp, pf.p, cur)
	}
	if err != nil {
		_ = t.r.Remove(pf.tmp)
		cur, _ := t.current(pf.p)
		return cur, err
	}
	mt := fi.ModTime().UnixNano()
	e := Entry{Kind: KindFile, Exec: t.receivedExec(fi.Mode(), pf.e.Exec), Size: fi.Size(), MTime: mt, Hash: pf.e.Hash,
		racy: time.Now().UnixNano()-mt < racyWindow}
	t.idx[pf.p] = e
	return e, nil
}

// record puts p's state after a write into the index. Callers hold mu.
func (t *tree) record(p string, hash uint64) (Entry, error) {
	fi, err := t.r.Lstat(p)
	if err != nil {
		delete(t.idx, p)
		return Entry{}, err
	}
	old := Entry{}
	if fi.Mode().IsRegular() {
		mt := fi.ModTime().UnixNano()
		old = Entry{Kind: KindFile, Size: fi.Size(), MTime: mt, Hash: hash, racy: time.Now().UnixNano()-mt < racyWindow}
	}
	racy := old.racy
	old.racy = false
	e, ok, err := t.statEntry(p, fi, old)
	if err != nil || !ok {
		return e, err
	}
	e.racy = racy
	t.idx[p] = e
	return e, nil
}

// mkdir makes p a folder if it is still expect (or already a folder).
func (t *tree) mkdir(p string, expect Entry) (Entry, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.checkPeerPath(p, true); err != nil {
		return Entry{}, err
	}
	cur, err := t.current(p)
	if err != nil {
		return cur, err
	}
	if cur.Kind == KindDir {
		// Made on this side meanwhile, perhaps with content: the watcher puts what it holds in
		// the batch of its Create event (addNewTree), as the index now knows the folder.
		t.idx[p] = cur
		return cur, nil
	}
	if !same(cur, expect) {
		return cur, fmt.Errorf("%w (%s)", errChanged, cur.Kind)
	}
	if err := t.parents(p); err != nil {
		return cur, err
	}
	if cur.Kind != KindNone {
		if err := t.r.Remove(p); err != nil {
			return cur, err
		}
	}
	if err := t.r.Mkdir(p, 0o755); err != nil {
		c, _ := t.current(p)
		return c, err
	}
	e := Entry{Kind: KindDir}
	t.idx[p] = e
	return e, nil
}

// symlink makes p a symlink to target if p is still expect.
func (t *tree) symlink(p, target string, expect Entry) (Entry, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.checkPeerPath(p, false); err != nil {
		return Entry{}, err
	}
	if target == "" || strings.IndexByte(target, 0) >= 0 {
		return Entry{}, fmt.Errorf("%s: bad symlink target", p)
	}
	if linkEscapes(p, target) {
		return Entry{}, fmt.Errorf("%w: %s is a symlink to %s, outside the synchronized folder: not created", errEscape, p, target)
	}
	cur, err := t.expect(p, expect)
	if err != nil {
		return cur, err
	}
	if err := t.parents(p); err != nil {
		return cur, err
	}
	if err := t.clearFor(p, cur, KindSymlink); err != nil {
		return cur, err
	}
	tmp := tmpName(dirOf(p))
	if err := t.r.Symlink(target, tmp); err != nil {
		return cur, err
	}
	if err := t.r.Rename(tmp, p); err != nil {
		_ = t.r.Remove(tmp)
		c, _ := t.current(p)
		return c, err
	}
	return t.record(p, 0)
}

func dirOf(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[:i]
	}
	return ""
}

// remove deletes p if it is still expect (a folder only when empty).
func (t *tree) remove(p string, expect Entry) (Entry, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.checkPeerPath(p, expect.Kind == KindDir); err != nil {
		return Entry{}, err
	}
	cur, err := t.expect(p, expect)
	if err != nil {
		return cur, err
	}
	if cur.Kind == KindNone {
		delete(t.idx, p)
		return cur, nil
	}
	if err := t.r.Remove(p); err != nil {
		if isNotEmpty(err) {
			return cur, fmt.Errorf("%s: %w", p, errNotEmpty)
		}
		return cur, err
	}
	delete(t.idx, p)
	return Entry{}, nil
}

// move renames p to the free name to (a conflict copy) if p is still expect.
func (t *tree) move(p, to string, expect Entry) (Entry, Entry, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.checkPeerPath(p, expect.Kind == KindDir); err != nil {
		return Entry{}, Entry{}, err
	}
	if err := t.checkPeerPath(to, expect.Kind == KindDir); err != nil {
		return Entry{}, Entry{}, err
	}
	cur, err := t.expect(p, expect)
	if err != nil {
		return cur, Entry{}, err
	}
	if c, _ := t.current(to); c.Kind != KindNone {
		return cur, c, fmt.Errorf("%s already exists", to)
	}
	if err := t.parents(to); err != nil {
		return cur, Entry{}, err
	}
	if err := t.r.Rename(p, to); err != nil {
		return cur, Entry{}, err
	}
	delete(t.idx, p)
	e := cur
	t.idx[to] = e
	if e.Kind == KindDir {
		for q, qe := range t.idx {
			if strings.HasPrefix(q, p+"/") {
				delete(t.idx, q)
				t.idx[to+q[len(p):]] = qe
			}
		}
	}
	return Entry{}, e, nil
}

// freeName picks a conflict-copy name beside p that exists nowhere in idx
// nor on disk. Callers hold mu.
func (t *tree) freeName(p, side string, now time.Time, other map[string]Entry) string {
	for n := 1; ; n++ {
		c := conflictName(p, side, now, n)
		if _, ok := t.idx[c]; ok {
			continue
		}
		if _, ok := other[c]; ok {
			continue
		}
		if _, err := t.r.Lstat(c); err == nil {
			continue
		}
		return c
	}
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

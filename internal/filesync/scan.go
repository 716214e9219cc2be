package filesync

// Scanning a tree into its index: whole walks and rescans of watched paths.
// What cannot be read is unknown, kept as it was, never taken for removed.

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/devtool/devtool/internal/filesync/ignore"
)

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
// takeRefreshed reports whether a scan since the last call cleared an entry's racy flag (its
// hash is trusted from now on): the index is worth saving even though nothing changed, or
// every later start hashes those files again (all the files this side received, whose
// mtime is the time they were written).
func (t *tree) takeRefreshed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	r := t.refreshed
	t.refreshed = false
	return r
}

func (t *tree) takeScanErrs() []error {
	t.mu.Lock()
	defer t.mu.Unlock()
	errs := t.scanErrs
	t.scanErrs = nil
	return errs
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
		return symlinkEntry(target, fi.ModTime().UnixNano()), true, nil
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
			t.refreshed = t.refreshed || old.racy
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
// The paths are sorted (paths is reordered): a new folder comes before what
// it holds, and is walked whole, so the paths below it are not looked at
// again (a folder moved in arrives as its every path).
func (t *tree) scanPaths(paths []string) (changed []item, rules bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	slices.Sort(paths)
	var gone []string
	walked := "" // the last folder walked here
	for _, p := range paths {
		if walked != "" && isUnder(p, walked) {
			continue
		}
		if _, known := t.idx[p]; !known && !t.parentsKnown(p) {
			continue // below an unknown or ignored folder: found by its folder's scan
		}
		if t.ignored(p, false) && t.ignored(p, true) {
			continue
		}
		base := path.Base(p)
		for _, rn := range ignore.FileNames {
			if base == rn {
				rules = true
			}
		}
		fi, err := t.lstat(p)
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
			t.refreshed = t.refreshed || old.racy
		}
		if e.Kind == KindDir && old.Kind != KindDir {
			seen := map[string]struct{}{}
			_ = t.walk(p, false, seen, &changed)
			walked = p
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

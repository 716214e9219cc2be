package filesync

// Applying the peer's decisions to a tree: conditional puts, folders,
// symlinks, removals and moves, each checked against the state it was decided
// from and kept inside the root.

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/fsnotify/fsnotify"
)

// current is the state of p on disk now. Callers hold mu.
func (t *tree) current(p string) (Entry, error) {
	fi, err := t.lstat(p)
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
// symlink), creating missing ones, and that neither they nor p are made
// beside a twin (twinThere). Callers hold mu.
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
			if err := t.twinThere(d); err != nil {
				return err
			}
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
	if !t.foldNorm || normTwins(p) == nil {
		return nil // no twin to look for (every Linux side): no lstat on the put path
	}
	if _, err := t.r.Lstat(p); errors.Is(err, fs.ErrNotExist) {
		return t.twinThere(p)
	}
	return nil
}

// twinThere, on a side that folds Unicode form, refuses to make p (absent)
// beside a normalization twin of it the folder holds: that filesystem takes
// the twin for p. A decision made before the twin appeared (a folder paired
// under one spelling, its new file decided under the other) is then taken
// again. Callers hold mu.
func (t *tree) twinThere(p string) error {
	if !t.foldNorm {
		return nil
	}
	for _, tw := range normTwins(p) {
		if tw == p {
			continue
		}
		if _, err := t.r.Lstat(tw); err == nil {
			return fmt.Errorf("%s: this side holds %s, which it takes for the same name: %w", p, tw, errTwin)
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
	// delta, when set, rebuilds the file from this side's copy (basis, open
	// until the put ends) and the records received (rsync.go).
	delta *deltaApplier
	basis io.Closer
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
	pf.closeBasis()
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
	pf.closeBasis()
	if pf.ff != nil {
		return pf.commitFast()
	}
	t := pf.t
	var err error
	if pf.n != pf.e.Size || pf.h.Sum64() != pf.e.Hash {
		err = fmt.Errorf("%s: content changed while it was sent", pf.p)
		if pf.delta != nil {
			// the copy here changed since its signature was taken
			err = fmt.Errorf("%s: %w (rebuilt from a copy that changed meanwhile)", pf.p, errChanged)
		}
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
	t.ownEvent(pf.p, fsnotify.Create)
	return e, nil
}

// record puts p's state after a write into the index. Callers hold mu.
func (t *tree) record(p string, hash uint64) (Entry, error) {
	fi, err := t.lstat(p)
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
	if cur.Kind != KindDir {
		t.ownEvent(p, fsnotify.Remove)
	}
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

package filesync

import (
	"io/fs"
	"os"
	"path"
	"strings"

	"golang.org/x/text/unicode/norm"
)

// caps is what a side's filesystem keeps, probed once per session in its
// root: a side that cannot hold exec bits (exFAT, SMB, Windows, WSL on
// /mnt/c) never flips or loses them on the other side, and a
// case-insensitive side never receives two names that differ only in case.
type caps struct {
	exec     bool // a file's exec bit is kept as set
	foldCase bool // names that differ only in case are one file
	foldNorm bool // names equal under Unicode normalization are one file (macOS)
}

// nameKey is the form of p under which this side's filesystem takes two
// names for one file.
func (c caps) nameKey(p string) string {
	if c.foldNorm {
		p = norm.NFC.String(p)
	}
	if c.foldCase {
		p = strings.ToLower(p)
	}
	return p
}

// probeCaps probes the filesystem under r with a temporary file (skipped by
// scans like every temporary name). A root it cannot write to is taken to
// keep exec bits and case, as Linux filesystems do.
func probeCaps(r *os.Root) caps {
	c := caps{exec: true}
	name := path.Base(tmpName("")) + "-Aa"
	f, err := r.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return c
	}
	defer func() { _ = r.Remove(name) }()
	defer f.Close()
	mode := func(m os.FileMode) (bool, bool) {
		if f.Chmod(m) != nil {
			return false, false
		}
		fi, err := f.Stat()
		if err != nil {
			return false, false
		}
		return fi.Mode().Perm()&0o100 != 0, true
	}
	x1, ok1 := mode(0o700)
	x2, ok2 := mode(0o600)
	c.exec = ok1 && ok2 && x1 && !x2
	if _, err := r.Lstat(strings.TrimSuffix(name, "Aa") + "aA"); err == nil {
		c.foldCase = true
	}
	// The same with a name in decomposed form (e + combining acute) looked
	// up in composed form (é).
	nfd := path.Base(tmpName("")) + "-e\u0301"
	if g, err := r.OpenFile(nfd, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600); err == nil {
		g.Close()
		if _, err := r.Lstat(strings.TrimSuffix(nfd, "e\u0301") + "\u00e9"); err == nil {
			c.foldNorm = true
		}
		_ = r.Remove(nfd)
	}
	return c
}

// execBit is a scanned file's exec bit: what the filesystem says where it
// keeps exec bits, else what this side's index held (set by what was
// received, false for a file made here). Callers hold mu.
func (t *tree) execBit(m fs.FileMode, old Entry) bool {
	if t.caps.exec {
		return m.Perm()&0o111 != 0
	}
	return old.Kind == KindFile && old.Exec
}

// receivedExec is a received file's exec bit: as written where the
// filesystem keeps exec bits, else as sent.
func (t *tree) receivedExec(m fs.FileMode, sent bool) bool {
	if t.caps.exec {
		return m.Perm()&0o111 != 0
	}
	return sent
}

// linkEscapes reports whether a symlink at p to target leaves the folder:
// an absolute target, or one that climbs above the root with "..". Such a
// link is never created on the other side.
func linkEscapes(p, target string) bool {
	if strings.HasPrefix(target, "/") || strings.Contains(target, "\\") || (len(target) >= 2 && target[1] == ':') {
		return true
	}
	j := path.Join(dirOf(p), target)
	return j == ".." || strings.HasPrefix(j, "../")
}

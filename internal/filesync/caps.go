package filesync

import (
	"errors"
	"io/fs"
	"os"
	"path"
	"strings"

	"golang.org/x/text/unicode/norm"
)

// caps is what one side's filesystem keeps, probed once per session in its
// root (probeCaps). decide takes both sides' caps: a side that cannot hold
// exec bits (exFAT, SMB, Windows, WSL on /mnt/c) never flips or clears one
// on the other side, a side that folds case or Unicode form never receives
// a name beside its twin, and a side without symlinks never receives one.
//
// The zero value is a Linux filesystem (exec bits, case-sensitive, names
// taken as bytes, symlinks): it is also what the client assumes of an agent
// that does not report its caps (defaultRemoteCaps, protocol 2). The agent
// reports its caps in its protocol 3 hello answer (msg.go: capsBits).
type caps struct {
	noExec   bool // a file's exec bit is not kept as set (every file reads the same)
	foldCase bool // names that differ only in case are one file
	foldNorm bool // names equal under Unicode normalization are one file (macOS)
	noLinks  bool // symlinks cannot be made
}

func (c caps) folds() bool { return c.foldCase || c.foldNorm }

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

// probeCaps probes the filesystem under r with temporary names (skipped by
// scans like every temporary name). What cannot be probed (a root this side
// cannot write to) is taken as Linux filesystems do it.
func probeCaps(r *os.Root) caps {
	var c caps
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
	c.noExec = !(ok1 && ok2 && x1 && !x2)
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
	// A symlink that fails as unsupported (exFAT, FAT: ENOSYS or EPERM),
	// not for lack of room or rights.
	ln := path.Base(tmpName("")) + "-l"
	if err := r.Symlink("x", ln); err == nil {
		_ = r.Remove(ln)
	} else if errors.Is(err, errors.ErrUnsupported) || errors.Is(err, fs.ErrPermission) {
		c.noLinks = true
	}
	return c
}

// execBit is a scanned file's exec bit. On a tree that evens exec bits out
// (evenExec: the agent's side of a client that does not take the agent's
// caps) it is what the index held where the filesystem cannot keep exec
// bits (set by what was received, false for a file made here); everywhere
// else it is what the filesystem says, and decide knows what it is worth.
// Callers hold mu.
func (t *tree) execBit(m fs.FileMode, old Entry) bool {
	if t.evenExec && t.caps.noExec {
		return old.Kind == KindFile && old.Exec
	}
	return m.Perm()&0o111 != 0
}

// receivedExec is a received file's exec bit in the index: as sent where
// the tree evens exec bits out, else as written.
func (t *tree) receivedExec(m fs.FileMode, sent bool) bool {
	if t.evenExec && t.caps.noExec {
		return sent
	}
	return m.Perm()&0o111 != 0
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

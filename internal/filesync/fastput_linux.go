//go:build linux

package filesync

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/fsnotify/fsnotify"
	"golang.org/x/sys/unix"
)

// The fast path for a new file (nothing at its path when it was decided) on
// Linux: the parent folder is opened once beneath the root with openat2
// (RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS: no component may be a symlink or
// leave the root), and the file is created, written, dated and put in place
// relative to that descriptor: renameat2(RENAME_NOREPLACE) fails if anything
// appeared at the path meanwhile, as the hard link of the portable path does.
// About 7 system calls per file instead of about 23 through os.Root (which
// walks and reopens the path for every call), which is most of the agent's
// cost in an initial sync of many small files.

// fastFile is the platform part of a putFile on the fast path.
type fastFile struct {
	dirfd   int // the parent folder; rootfd itself for a file at the top
	ownDir  bool
	fd      int
	tmpBase string
	base    string
}

// openRootFD opens the root folder for the fast path (-1 when it cannot be).
func openRootFD(root string) int {
	fd, err := unix.Open(root, unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1
	}
	return fd
}

func closeRootFD(fd int) {
	if fd >= 0 {
		unix.Close(fd)
	}
}

// beginFast creates the temporary file for new file p in folder dir. ok is
// false when the fast path is not available (the caller takes the portable
// one).
func (t *tree) beginFast(p, dir string, exec bool) (ff *fastFile, ok bool, err error) {
	if t.rootfd < 0 || t.noFast.Load() {
		return nil, false, nil
	}
	dirfd, own := t.rootfd, false
	if dir != "" {
		var fast bool
		dirfd, fast, err = t.openBeneath(dir, unix.O_DIRECTORY|unix.O_RDONLY)
		if !fast {
			return nil, false, nil
		}
		if symlinkInTheWay(err) {
			return nil, false, fmt.Errorf("%s: %w (now a symlink on this side)", p, errVanished)
		}
		if err != nil {
			return nil, false, &os.PathError{Op: "open", Path: dir, Err: err}
		}
		own = true
	}
	// Refused early (before the data is received) when the path is taken.
	var st unix.Stat_t
	if err := unix.Fstatat(dirfd, baseOf(p), &st, unix.AT_SYMLINK_NOFOLLOW); !errors.Is(err, unix.ENOENT) {
		if own {
			unix.Close(dirfd)
		}
		if err == nil {
			return nil, false, fmt.Errorf("%s: %w (exists, expected absent)", p, errChanged)
		}
		return nil, false, &os.PathError{Op: "lstat", Path: p, Err: err}
	}
	tmp := tmpName("")
	mode := uint32(0o644)
	if exec {
		mode = 0o755
	}
	fd, err := unix.Openat(dirfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, mode)
	if err != nil {
		if own {
			unix.Close(dirfd)
		}
		return nil, false, &os.PathError{Op: "create", Path: join(dir, tmp), Err: err}
	}
	return &fastFile{dirfd: dirfd, ownDir: own, fd: fd, tmpBase: tmp, base: baseOf(p)}, true, nil
}

// openBeneath opens rel beneath the root with openat2, never through a symlink
// or out of the root. fast is false (and the fast path is switched off for the
// tree) when openat2 is unavailable: a kernel before 5.6, or a seccomp filter.
func (t *tree) openBeneath(rel string, flags int) (fd int, fast bool, err error) {
	fd, err = openat2(t.rootfd, rel, &unix.OpenHow{
		Flags:   uint64(flags | unix.O_CLOEXEC),
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EPERM) {
		t.noFast.Store(true)
		return -1, false, nil
	}
	return fd, true, err
}

// symlinkInTheWay tells openBeneath's refusal of a path that now runs through a
// symlink (or out of the root): a change on this side, not a failure.
func symlinkInTheWay(err error) bool {
	return errors.Is(err, unix.ELOOP) || errors.Is(err, unix.EXDEV)
}

// openat2 is unix.Openat2, or the error testHookOpenat2Err gives.
func openat2(dirfd int, p string, how *unix.OpenHow) (int, error) {
	if testHookOpenat2Err != nil {
		if err := testHookOpenat2Err(); err != nil {
			return -1, err
		}
	}
	return unix.Openat2(dirfd, p, how)
}

func baseOf(p string) string {
	for i := len(p) - 1; i >= 0; i-- {
		if p[i] == '/' {
			return p[i+1:]
		}
	}
	return p
}

func (ff *fastFile) write(b []byte) error {
	for len(b) > 0 {
		n, err := unix.Write(ff.fd, b)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

func (ff *fastFile) closeAll() {
	if ff.fd >= 0 {
		unix.Close(ff.fd)
		ff.fd = -1
	}
	if ff.ownDir {
		unix.Close(ff.dirfd)
		ff.ownDir = false
	}
}

func (ff *fastFile) abort() {
	if ff.fd >= 0 {
		unix.Close(ff.fd)
		ff.fd = -1
	}
	_ = unix.Unlinkat(ff.dirfd, ff.tmpBase, 0)
	ff.closeAll()
}

// commitFast dates the temporary file and puts it at its path if nothing is
// there. Callers hold no lock; it takes t.mu.
func (pf *putFile) commitFast() (Entry, error) {
	t, ff := pf.t, pf.ff
	defer ff.closeAll()
	var err error
	if pf.n != pf.e.Size || pf.h.Sum64() != pf.e.Hash {
		err = fmt.Errorf("%s: content changed while it was sent", pf.p)
	}
	// The receiver's time, not the sender's (see commit).
	mt := t.now().UnixNano()
	if err == nil {
		ts := unix.NsecToTimespec(mt)
		err = unix.UtimesNanoAt(ff.dirfd, ff.tmpBase, []unix.Timespec{ts, ts}, unix.AT_SYMLINK_NOFOLLOW)
	}
	// The entry records what is on disk (the mode after the umask, the
	// mtime as the filesystem keeps it), as the portable path does: else
	// every rescan would find the file changed.
	var st unix.Stat_t
	if err == nil {
		err = unix.Fstat(ff.fd, &st)
	}
	if cerr := unix.Close(ff.fd); err == nil {
		err = cerr
	}
	ff.fd = -1
	t.mu.Lock()
	defer t.mu.Unlock()
	if err == nil {
		if testHookBeforeReplace != nil {
			testHookBeforeReplace(pf.p)
		}
		err = renameNoReplace(ff.dirfd, ff.tmpBase, ff.base)
		if errors.Is(err, unix.EEXIST) || errors.Is(err, unix.ENOTEMPTY) {
			err = fmt.Errorf("%s: %w (created meanwhile)", pf.p, errChanged)
		} else if err != nil {
			err = &os.PathError{Op: "rename", Path: pf.p, Err: err}
		}
	}
	if err != nil {
		_ = unix.Unlinkat(ff.dirfd, ff.tmpBase, 0)
		cur, _ := t.current(pf.p)
		return cur, err
	}
	mt = st.Mtim.Nano()
	e := Entry{Kind: KindFile, Exec: t.receivedExec(os.FileMode(st.Mode&0o777), pf.e.Exec), Size: st.Size, MTime: mt, Hash: pf.e.Hash,
		racy: time.Now().UnixNano()-mt < racyWindow}
	t.idx[pf.p] = e
	t.ownEvent(pf.p, fsnotify.Create)
	return e, nil
}

// Test seams (tests only): when set, they replace the result of the system
// call they name, to exercise the fallbacks of filesystems and kernels that
// lack it.
var (
	testHookRenameErr  func() error // renameat2(RENAME_NOREPLACE)
	testHookLinkErr    func() error // linkat
	testHookOpenat2Err func() error // openat2
)

// renameNoReplace puts tmp at base in folder dirfd unless something is at
// base: renameat2(RENAME_NOREPLACE), or where the kernel or filesystem lacks
// it (EINVAL, ENOSYS; EPERM from a seccomp filter) a hard link, which fails
// the same way when the name is taken, or where hard links are not available
// either (CIFS, FUSE, 9p, vfat: EPERM, EOPNOTSUPP, EMLINK, ...) a plain
// rename after checking that base is still absent, as replace does on the
// portable path. EEXIST means something is at base (kept). Callers hold t.mu.
func renameNoReplace(dirfd int, tmp, base string) error {
	var err error
	if testHookRenameErr != nil {
		err = testHookRenameErr()
	} else {
		err = unix.Renameat2(dirfd, tmp, dirfd, base, unix.RENAME_NOREPLACE)
	}
	if !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOSYS) && !errors.Is(err, unix.EPERM) {
		return err
	}
	if testHookLinkErr != nil {
		err = testHookLinkErr()
	} else {
		err = unix.Linkat(dirfd, tmp, dirfd, base, 0)
	}
	if err == nil {
		_ = unix.Unlinkat(dirfd, tmp, 0)
		return nil
	}
	if errors.Is(err, unix.EEXIST) {
		return err
	}
	var st unix.Stat_t
	switch err := unix.Fstatat(dirfd, base, &st, unix.AT_SYMLINK_NOFOLLOW); {
	case err == nil:
		return unix.EEXIST
	case !errors.Is(err, unix.ENOENT):
		return err
	}
	return unix.Renameat(dirfd, tmp, dirfd, base)
}

// rawFile reads a file through its descriptor (no poller registration).
type rawFile struct{ fd int }

func (f *rawFile) Read(b []byte) (int, error) {
	for {
		n, err := unix.Read(f.fd, b)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 0, err
		}
		if n == 0 && len(b) > 0 {
			return 0, io.EOF
		}
		return n, nil
	}
}

func (f *rawFile) Close() error { return unix.Close(f.fd) }

// openRead opens file p for reading beneath the root, never through a
// symlink (one openat2 instead of os.Root's walk); ok is false when the
// fast path is not available.
func (t *tree) openRead(p string) (r io.ReadCloser, ok bool, err error) {
	if t.rootfd < 0 || t.noFast.Load() {
		return nil, false, nil
	}
	fd, fast, err := t.openBeneath(p, unix.O_RDONLY|unix.O_NOFOLLOW)
	if !fast {
		return nil, false, nil
	}
	if symlinkInTheWay(err) {
		// the file or a folder above it became a symlink: a change
		return nil, true, fmt.Errorf("%s: %w (now a symlink on this side)", p, errVanished)
	}
	if err != nil {
		return nil, true, &os.PathError{Op: "open", Path: p, Err: err}
	}
	return &rawFile{fd: fd}, true, nil
}

//go:build linux

package filesync

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// lstat is Lstat of p beneath the root: its folder opened with openat2
// (O_PATH, never through a symlink nor out of the root), then fstatat: two
// or three system calls where os.Root opens and closes every folder on the
// way (seven for a path three folders deep), which was most of a scan's cost
// when many files appear at once. A folder on the way that is a symlink
// reads as "not a directory" (the path is not in the synchronized tree).
// Where openat2 is unavailable it is os.Root's Lstat.
func (t *tree) lstat(p string) (fs.FileInfo, error) {
	if t.rootfd < 0 || t.noFast.Load() {
		return t.r.Lstat(p)
	}
	dirfd := t.rootfd
	if dir := dirOf(p); dir != "" {
		fd, fast, err := t.openBeneath(dir, unix.O_PATH|unix.O_DIRECTORY)
		if !fast {
			return t.r.Lstat(p)
		}
		if err != nil {
			if symlinkInTheWay(err) {
				err = unix.ENOTDIR
			}
			return nil, &os.PathError{Op: "lstat", Path: p, Err: err}
		}
		defer unix.Close(fd)
		dirfd = fd
	}
	var st unix.Stat_t
	for {
		err := unix.Fstatat(dirfd, baseOf(p), &st, unix.AT_SYMLINK_NOFOLLOW)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, &os.PathError{Op: "lstat", Path: p, Err: err}
		}
		break
	}
	return &statInfo{name: baseOf(p), st: st}, nil
}

// statInfo is an fs.FileInfo from a stat result.
type statInfo struct {
	name string
	st   unix.Stat_t
}

func (s *statInfo) Name() string       { return s.name }
func (s *statInfo) Size() int64        { return s.st.Size }
func (s *statInfo) ModTime() time.Time { return time.Unix(0, s.st.Mtim.Nano()) }
func (s *statInfo) IsDir() bool        { return s.st.Mode&unix.S_IFMT == unix.S_IFDIR }
func (s *statInfo) Sys() any           { return nil }

func (s *statInfo) Mode() fs.FileMode {
	m := fs.FileMode(s.st.Mode & 0o777)
	switch s.st.Mode & unix.S_IFMT {
	case unix.S_IFBLK:
		m |= fs.ModeDevice
	case unix.S_IFCHR:
		m |= fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFDIR:
		m |= fs.ModeDir
	case unix.S_IFIFO:
		m |= fs.ModeNamedPipe
	case unix.S_IFLNK:
		m |= fs.ModeSymlink
	case unix.S_IFSOCK:
		m |= fs.ModeSocket
	}
	if s.st.Mode&unix.S_ISGID != 0 {
		m |= fs.ModeSetgid
	}
	if s.st.Mode&unix.S_ISUID != 0 {
		m |= fs.ModeSetuid
	}
	if s.st.Mode&unix.S_ISVTX != 0 {
		m |= fs.ModeSticky
	}
	return m
}

// statOpen is the stat of a file opened by tree.open.
func statOpen(f io.ReadCloser) (fs.FileInfo, error) {
	switch f := f.(type) {
	case *rawFile:
		var st unix.Stat_t
		if err := unix.Fstat(f.fd, &st); err != nil {
			return nil, err
		}
		return &statInfo{st: st}, nil
	case *os.File:
		return f.Stat()
	}
	return nil, fmt.Errorf("no stat for %T", f)
}

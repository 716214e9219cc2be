//go:build unix

package filesync

import (
	"os"

	"golang.org/x/sys/unix"
)

// setMTime sets the mtime of an open file through its descriptor (no path
// lookup).
func setMTime(f *os.File, _ *os.Root, _ string, ns int64) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	tv := []unix.Timeval{unix.NsecToTimeval(ns), unix.NsecToTimeval(ns)}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = unix.Futimes(int(fd), tv) }); err != nil {
		return err
	}
	return serr
}

package filesync

import (
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// rootIdentity names the folder at root by device and inode and, where the
// filesystem keeps one (ext4, btrfs, xfs, tmpfs), its birth time: ext4 hands
// a freed inode number to the next folder made, so a folder deleted and made
// again often has the same device and inode but never the same birth time.
// Without statx (a kernel before 4.11, a seccomp filter refusing it) or a
// birth time, it is device and inode alone; "" where nothing is known.
func rootIdentity(root string) string {
	var sx unix.Statx_t
	err := unix.Statx(unix.AT_FDCWD, root, 0, unix.STATX_INO|unix.STATX_BTIME, &sx)
	if err != nil {
		fi, err := os.Stat(root)
		if err != nil {
			return ""
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return ""
		}
		return fmt.Sprintf("dev=%d ino=%d", uint64(st.Dev), uint64(st.Ino))
	}
	id := fmt.Sprintf("dev=%d ino=%d", unix.Mkdev(sx.Dev_major, sx.Dev_minor), sx.Ino)
	if sx.Mask&unix.STATX_BTIME != 0 {
		id += fmt.Sprintf(" born=%d.%09d", sx.Btime.Sec, sx.Btime.Nsec)
	}
	return id
}

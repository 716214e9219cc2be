//go:build unix && !linux

package filesync

import (
	"fmt"
	"os"
	"syscall"
)

// rootIdentity names the folder at root by device and inode ("" where that
// is unknown). macOS's APFS does not hand a freed inode number out again
// soon, so a folder made again gets another one there.
func rootIdentity(root string) string {
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

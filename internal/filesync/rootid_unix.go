//go:build unix

package filesync

import (
	"fmt"
	"io/fs"
	"syscall"
)

func fileIdentity(fi fs.FileInfo) string {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return ""
	}
	return fmt.Sprintf("dev=%d ino=%d", uint64(st.Dev), uint64(st.Ino))
}

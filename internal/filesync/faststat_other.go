//go:build !linux

package filesync

import (
	"fmt"
	"io"
	"io/fs"
	"os"
)

// lstat is os.Root's Lstat off Linux (see faststat_linux.go).
func (t *tree) lstat(p string) (fs.FileInfo, error) { return t.r.Lstat(p) }

// statOpen is the stat of a file opened by tree.open.
func statOpen(f io.ReadCloser) (fs.FileInfo, error) {
	if f, ok := f.(*os.File); ok {
		return f.Stat()
	}
	return nil, fmt.Errorf("no stat for %T", f)
}

// Package atomicfile is the one way devtool replaces a file of its own (the context store, the dev
// containers' state, keys and known_hosts, the sync state, the proxy kubeconfig, the files init
// writes): readers see the old content or the new one, never a part, and once a call returns the
// new content survives a crash.
//
// The content goes to a temporary file of a fresh random name in the same folder, created with
// O_EXCL (so never through a symbolic link or over an existing file), given its mode with fchmod
// (exact, whatever the umask), written, fsynced and closed; it then takes the destination's place
// (rename, or link for WriteNew) and the folder is fsynced so the new name is durable too. On any
// failure before that step the temporary file is removed and the destination is as it was.
//
// It is a package of its own, not part of internal/safefile (the reader for files named by user
// input): the agent links it too, and each keeps one contract in its doc.
package atomicfile

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
)

// Write replaces path with data, mode perm (0 means 0600). A symbolic link at path is replaced
// itself, never followed. Errors name path.
func Write(path string, data []byte, perm fs.FileMode) error {
	return write(path, data, perm, false, nil)
}

// WriteNew creates path with data, mode perm (0 means 0600), only when path does not exist: the
// temporary file is linked into place, so of two processes creating the same file one wins and
// the other gets an error wrapping fs.ErrExist (it then reads the winner's file).
func WriteNew(path string, data []byte, perm fs.FileMode) error {
	return write(path, data, perm, true, nil)
}

// WriteChecked is Write with beforeRename run once the temporary file (its path given) is
// complete and synced, before it replaces path; an error from it aborts the write (path
// unchanged, temporary file removed). It lets callers' tests fail a write at the last moment.
func WriteChecked(path string, data []byte, perm fs.FileMode, beforeRename func(tmp string) error) error {
	return write(path, data, perm, false, beforeRename)
}

// Test hooks: the fsync of the temporary file and of the folder, and the temporary file's name.
var (
	syncFile = func(f *os.File) error { return f.Sync() }
	syncDir  = syncFolder
	tempName = func(path string) string {
		b := make([]byte, 6)
		_, _ = rand.Read(b)
		return filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+"."+hex.EncodeToString(b)+".tmp")
	}
)

func write(path string, data []byte, perm fs.FileMode, exclusive bool, beforeRename func(string) error) (err error) {
	if perm == 0 {
		perm = 0o600
	}
	f, tmp, err := createTemp(path)
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	defer func() {
		if f != nil {
			f.Close()
		}
		if err != nil || exclusive {
			// After a link the temporary name is a second name of the new file: drop it.
			_ = os.Remove(tmp)
		}
		if err != nil {
			err = fmt.Errorf("writing %s: %w", path, err)
		}
	}()
	if err = f.Chmod(perm); err != nil {
		return err
	}
	if _, err = f.Write(data); err != nil {
		return err
	}
	if err = syncFile(f); err != nil {
		return err
	}
	err = f.Close()
	f = nil
	if err != nil {
		return err
	}
	if beforeRename != nil {
		if err = beforeRename(tmp); err != nil {
			return err
		}
	}
	if exclusive {
		err = os.Link(tmp, path)
	} else {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		var le *os.LinkError
		if errors.As(err, &le) {
			err = le.Err // the temporary name says nothing to the reader
			if exclusive && errors.Is(err, fs.ErrExist) {
				err = fmt.Errorf("%w: it exists already", fs.ErrExist)
			}
		}
		return err
	}
	return syncDir(filepath.Dir(path))
}

// createTemp creates a new temporary file beside path. O_EXCL makes the creation fail on any
// existing name, a symbolic link included (even a dangling one): a link planted at the name is
// never followed; another name is tried.
func createTemp(path string) (*os.File, string, error) {
	for range 100 {
		name := tempName(path)
		f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		return f, name, err
	}
	return nil, "", fmt.Errorf("no free temporary name in %s", filepath.Dir(path))
}

// syncFolder makes a rename or link in dir durable. Windows cannot sync a folder (NTFS journals
// the rename itself); a file system that does not support it (EINVAL) is not an error either.
func syncFolder(dir string) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOTSUP) {
		return fmt.Errorf("syncing the folder %s: %w", dir, err)
	}
	return nil
}

// Package safefile is the one reader for files devtool opens because of user input (Compose
// files, env files, .env, devtool.yml, Dockerfiles, the context store, kubeconfigs, ...).
//
// It accepts only regular files (after following symlinks), never blocks on a FIFO or a
// device (the file is opened with O_NONBLOCK and checked with fstat before any read), and
// stops at a size cap with an error that names the file and the cap.
//
// devtool's own files (everything under ~/.devtool/dev: state, status, pid, log, keys, known
// hosts) are read with the NoFollow variants, which also refuse a symbolic link at the path, and
// logs with Tail, which reads a bounded end of the file whatever its size.
package safefile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// DefaultMax is the size cap callers use when they have no better one: far above any real
// Compose file, manifest, env file or kubeconfig.
const DefaultMax int64 = 16 << 20

// ErrNotRegular is wrapped by the error for a path that is not a regular file (a folder, a
// FIFO, a device, a socket), so callers can tell it apart.
var ErrNotRegular = errors.New("not a regular file")

// ErrSymlink is wrapped by the error for a path that is a symbolic link where the NoFollow
// variants and Tail refuse one.
var ErrSymlink = errors.New("a symbolic link, not followed for devtool's own files")

// ErrTooLarge is wrapped by the error for a file larger than the cap.
var ErrTooLarge = errors.New("file too large")

// Read returns the content of the regular file at path, at most max bytes (max <= 0 means
// DefaultMax). Errors wrap fs.ErrNotExist, fs.ErrPermission, ErrNotRegular or ErrTooLarge and
// name the path; they never block, whatever path names.
func Read(path string, max int64) ([]byte, error) {
	f, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadAll(f, path, max)
}

// ReadNoFollow is Read for devtool's own files: a symbolic link at path is an error wrapping
// ErrSymlink, never followed.
func ReadNoFollow(path string, max int64) ([]byte, error) {
	f, err := OpenNoFollow(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadAll(f, path, max)
}

// OpenNoFollow is Open for devtool's own files: a symbolic link at path (its last element) is an
// error wrapping ErrSymlink, never followed.
func OpenNoFollow(path string) (*os.File, error) {
	return open(path, os.O_RDONLY, true)
}

// OpenFileNoFollow opens path with flag (os.O_RDWR|os.O_CREATE, os.O_WRONLY|os.O_APPEND...) and
// perm, never through a symbolic link and never blocking, and checks that it is a regular file:
// devtool's own files it writes in place (the pid file, logs).
func OpenFileNoFollow(path string, flag int, perm fs.FileMode) (*os.File, error) {
	return openFile(path, flag, perm, true)
}

// Tail returns at most the last max bytes of the regular file at path (max <= 0 means
// DefaultMax), never following a symbolic link at path, and whether the file was longer (the
// start was left out). Only those bytes are read, whatever the file's size.
func Tail(path string, max int64) ([]byte, bool, error) {
	if max <= 0 {
		max = DefaultMax
	}
	f, err := OpenNoFollow(path)
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, false, err
	}
	off, cut := int64(0), false
	if st.Size() > max {
		off, cut = st.Size()-max, true
	}
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return nil, false, &fs.PathError{Op: "read", Path: path, Err: err}
	}
	// The file may grow meanwhile (a running up appends to its log): still at most max bytes.
	data, err := readUpTo(f, make([]byte, 0, min(st.Size()-off, max)+1), max)
	if err != nil {
		return nil, false, &fs.PathError{Op: "read", Path: path, Err: err}
	}
	return data, cut, nil
}

// Open opens path for reading after checking that it is a regular file, without blocking on a
// FIFO or a device. The caller closes the file; ReadAll reads it with a cap.
func Open(path string) (*os.File, error) {
	return open(path, os.O_RDONLY, false)
}

func open(path string, flag int, noFollow bool) (*os.File, error) {
	return openFile(path, flag, 0, noFollow)
}

func openFile(path string, flag int, perm fs.FileMode, noFollow bool) (*os.File, error) {
	// O_NONBLOCK: opening a FIFO with no writer (or, for writing, no reader) returns at once
	// instead of waiting for one. O_NOCTTY: a terminal device never becomes our controlling
	// terminal.
	flag |= syscall.O_NONBLOCK | syscall.O_NOCTTY
	if noFollow {
		if err := refuseLink(path); err != nil {
			return nil, err
		}
		flag |= oNoFollow
	}
	f, err := os.OpenFile(path, flag, perm)
	if err != nil {
		if noFollow {
			// A link made between the check and the open: O_NOFOLLOW failed on it (ELOOP on
			// Linux, other errors elsewhere); say what it is.
			if lerr := refuseLink(path); lerr != nil {
				return nil, lerr
			}
		}
		// A FIFO opened for writing with no reader fails (ENXIO) instead of blocking: name it.
		if st, serr := os.Stat(path); serr == nil && !st.Mode().IsRegular() {
			return nil, notRegular(path, st.Mode())
		}
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, notRegular(path, st.Mode())
	}
	return f, nil
}

// ReadAll reads r (named path in errors) up to max bytes (max <= 0 means DefaultMax); more is
// an error naming the path and the cap. The size is checked while reading, so a file that
// grows after the check is still bounded.
func ReadAll(r io.Reader, path string, max int64) ([]byte, error) {
	if max <= 0 {
		max = DefaultMax
	}
	var buf []byte
	if f, ok := r.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Size() > max {
			return nil, tooLarge(path, max)
		} else if err == nil && st.Size() > 0 {
			buf = make([]byte, 0, st.Size()+1)
		}
	}
	data, err := readUpTo(r, buf, max+1)
	if err != nil {
		return nil, &fs.PathError{Op: "read", Path: path, Err: err}
	}
	if int64(len(data)) > max {
		return nil, tooLarge(path, max)
	}
	return data, nil
}

func readUpTo(r io.Reader, buf []byte, limit int64) ([]byte, error) {
	lr := io.LimitReader(r, limit)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := lr.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

func notRegular(path string, m fs.FileMode) error {
	return &fs.PathError{Op: "open", Path: path, Err: fmt.Errorf("%w (%s)", ErrNotRegular, kind(m))}
}

// refuseLink is an error wrapping ErrSymlink when path is a symbolic link.
func refuseLink(path string) error {
	if fi, err := os.Lstat(path); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		return &fs.PathError{Op: "open", Path: path, Err: ErrSymlink}
	}
	return nil
}

func tooLarge(path string, max int64) error {
	return &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf("%w: larger than the limit of %s", ErrTooLarge, FormatSize(max))}
}

// FormatSize writes a byte count the way errors show caps: "16 MiB", "512 KiB", "100 bytes".
func FormatSize(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	default:
		return fmt.Sprintf("%d bytes", n)
	}
}

func kind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a folder"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a device"
	default:
		return "not a regular file"
	}
}

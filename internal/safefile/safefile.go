// Package safefile is the one reader for files devtool opens because of user input (Compose
// files, env files, .env, devtool.yml, Dockerfiles, the context store, kubeconfigs, ...).
//
// It accepts only regular files (after following symlinks), never blocks on a FIFO or a
// device (the file is opened with O_NONBLOCK and checked with fstat before any read), and
// stops at a size cap with an error that names the file and the cap.
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

// Open opens path for reading after checking that it is a regular file, without blocking on a
// FIFO or a device. The caller closes the file; ReadAll reads it with a cap.
func Open(path string) (*os.File, error) {
	// O_NONBLOCK: opening a FIFO with no writer returns at once instead of waiting for one.
	// O_NOCTTY: a terminal device never becomes our controlling terminal.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf("%w (%s)", ErrNotRegular, kind(st.Mode()))}
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

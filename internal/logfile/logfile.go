// Package logfile is devtool's append-only log file with a size cap: up's devtool.log in the dev
// container's state folder and the agent's agent.log in the dev container. When a write would
// take the file past the cap it is renamed to NAME.1 (replacing the previous one) and a new file
// begun, so a log never takes more than about twice the cap on disk, however long it runs.
//
// The file is opened through safefile.OpenFileNoFollow: never through a symbolic link, never
// blocking on a FIFO, a regular file only.
package logfile

import (
	"fmt"
	"os"
	"sync"

	"github.com/devtool/devtool/internal/safefile"
)

// DefaultMax is the cap callers use: 10 MiB.
const DefaultMax int64 = 10 << 20

// File is an open log. Its Write is safe for concurrent use.
type File struct {
	mu   sync.Mutex
	path string
	max  int64
	f    *os.File
	size int64
}

// Open opens (creating it, 0600) the log at path for appending, capped at max bytes (max <= 0
// means DefaultMax). A log already past the cap is rotated at once. Errors name the path.
func Open(path string, max int64) (*File, error) {
	if max <= 0 {
		max = DefaultMax
	}
	l := &File{path: path, max: max}
	if err := l.open(); err != nil {
		return nil, err
	}
	if l.size >= max {
		if err := l.rotate(); err != nil {
			l.f.Close()
			return nil, err
		}
	}
	return l, nil
}

// Path is the log's path; Rotated the previous part's.
func (l *File) Path() string    { return l.path }
func (l *File) Rotated() string { return l.path + ".1" }

func (l *File) open() error {
	f, err := safefile.OpenFileNoFollow(l.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("opening the log: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("opening the log: %w", err)
	}
	l.f, l.size = f, st.Size()
	return nil
}

// rotate moves the full log to NAME.1 and begins a new one. When the rename fails the log is
// emptied instead: it stays bounded either way.
func (l *File) rotate() error {
	if err := os.Rename(l.path, l.Rotated()); err != nil {
		if terr := l.f.Truncate(0); terr != nil {
			return fmt.Errorf("rotating the log %s: %w", l.path, err)
		}
		l.size = 0
		return nil
	}
	old := l.f
	if err := l.open(); err != nil {
		l.f = old // keep writing to the rotated file rather than nowhere
		return err
	}
	old.Close()
	return nil
}

// Write appends p, rotating first when p would take the log past its cap.
func (l *File) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return 0, os.ErrClosed
	}
	if l.size > 0 && l.size+int64(len(p)) > l.max {
		if err := l.rotate(); err != nil {
			return 0, err
		}
	}
	n, err := l.f.Write(p)
	l.size += int64(n)
	return n, err
}

// Close closes the log.
func (l *File) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}

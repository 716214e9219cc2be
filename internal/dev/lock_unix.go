//go:build !windows

package dev

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// errLocked is tryLock's answer when another process holds the lock.
var errLocked = errors.New("locked by another process")

// tryLock takes an exclusive lock on f without waiting. The kernel drops it when the process
// dies, even by SIGKILL.
func tryLock(f *os.File) error {
	err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	if errors.Is(err, unix.EWOULDBLOCK) {
		return errLocked
	}
	return err
}

// isLocked reports whether another process holds a lock on f.
func isLocked(f *os.File) bool {
	if err := unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB); err != nil {
		return true
	}
	_ = unix.Flock(int(f.Fd()), unix.LOCK_UN)
	return false
}

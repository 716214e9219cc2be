// Package sharedwriter lets one writer take both output streams of a remote command, as os/exec
// allows: the exec and SSH clients copy stdout and stderr in two goroutines, and a writer such
// as bytes.Buffer given as both would be written concurrently (its ReadFrom, which io.Copy
// prefers, then loses or zeroes output).
package sharedwriter

import (
	"io"
	"sync"
)

// Guard returns stdout and stderr unchanged unless they are the same writer; then both become
// one writer that lets a single Write through at a time and offers nothing but Write.
func Guard(stdout, stderr io.Writer) (io.Writer, io.Writer) {
	if stdout == nil || stderr == nil || !same(stdout, stderr) {
		return stdout, stderr
	}
	w := &locked{w: stdout}
	return w, w
}

// same is stdout == stderr, false where the dynamic type cannot be compared (the == panics).
func same(a, b io.Writer) (eq bool) {
	defer func() {
		if recover() != nil {
			eq = false
		}
	}()
	return a == b
}

type locked struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *locked) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

//go:build !linux

package agent

import (
	"syscall"
	"time"
)

// signalSession sends sig to the process group of sid (no /proc to find the rest of its
// session here).
func signalSession(sid int, sig syscall.Signal) { _ = syscall.Kill(-sid, sig) }

// waitSessionGone waits until waited is closed, at most grace.
func waitSessionGone(sid int, waited <-chan struct{}, grace time.Duration) {
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-waited:
	case <-t.C:
	}
}

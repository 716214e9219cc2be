package agent

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// sessionMembers lists the live processes of the session led by (or once led by) sid: a
// terminal command and everything it started on or off its terminal, background jobs in
// their own process groups included.
func sessionMembers(sid int) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		// After the name: state ppid pgrp session ...
		f := strings.Fields(s[i+1:])
		if len(f) < 4 || f[0] == "Z" || f[0] == "X" {
			continue
		}
		if id, err := strconv.Atoi(f[3]); err == nil && id == sid {
			out = append(out, pid)
		}
	}
	return out
}

// signalSession sends sig to every process of sid's session.
func signalSession(sid int, sig syscall.Signal) {
	_ = syscall.Kill(-sid, sig)
	for _, pid := range sessionMembers(sid) {
		_ = syscall.Kill(pid, sig)
	}
}

// waitSessionGone waits until waited is closed and no process of sid's session is left, at
// most grace.
func waitSessionGone(sid int, waited <-chan struct{}, grace time.Duration) {
	deadline := time.NewTimer(grace)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-waited:
			if len(sessionMembers(sid)) == 0 {
				return
			}
		default:
		}
		select {
		case <-deadline.C:
			return
		case <-tick.C:
		}
	}
}

//go:build !linux

package filesync

import (
	"os"
	"time"
)

// The benchmarks measure CPU time and memory through /proc (Linux); other
// systems report zeros, so the package and its tests still build there.

func cpuTime() time.Duration    { return 0 }
func rssBytes() int64           { return 0 }
func procCPU(int) time.Duration { return 0 }
func procRSS(int) int64         { return 0 }

func pollable(fd int, name string) *os.File { return os.NewFile(uintptr(fd), name) }

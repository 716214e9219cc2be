//go:build !windows

package exec

import (
	"os"
	"syscall"
)

// forwardedSignals are passed on to the remote command (Ctrl-C goes through the context).
var forwardedSignals = []os.Signal{syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2}

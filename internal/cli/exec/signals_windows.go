//go:build windows

package exec

import (
	"os"
	"syscall"
)

// forwardedSignals are passed on to the remote command; Windows has only these to offer.
var forwardedSignals = []os.Signal{syscall.SIGHUP, syscall.SIGQUIT}

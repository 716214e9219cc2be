//go:build !unix

package devssh

import (
	"os"
	"syscall"

	"golang.org/x/crypto/ssh"
)

// notifyResize: no SIGWINCH here; the size is sent once with the PTY request.
func notifyResize() chan os.Signal { return make(chan os.Signal, 1) }

func sshSignal(sig os.Signal) (ssh.Signal, bool) {
	switch sig {
	case os.Interrupt:
		return ssh.SIGINT, true
	case syscall.SIGTERM:
		return ssh.SIGTERM, true
	}
	return "", false
}

//go:build unix

package devssh

import (
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/crypto/ssh"
)

// notifyResize delivers the terminal's size changes (SIGWINCH).
func notifyResize() chan os.Signal {
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGWINCH)
	return c
}

func sshSignal(sig os.Signal) (ssh.Signal, bool) {
	switch sig {
	case syscall.SIGINT:
		return ssh.SIGINT, true
	case syscall.SIGTERM:
		return ssh.SIGTERM, true
	case syscall.SIGHUP:
		return ssh.SIGHUP, true
	case syscall.SIGQUIT:
		return ssh.SIGQUIT, true
	case syscall.SIGUSR1:
		return ssh.SIGUSR1, true
	case syscall.SIGUSR2:
		return ssh.SIGUSR2, true
	}
	return "", false
}

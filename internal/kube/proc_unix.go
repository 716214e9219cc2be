//go:build unix

package kube

import (
	"os/exec"
	"syscall"
)

// killProcessGroup starts cmd in its own process group and makes cancellation kill the group, so
// a plugin that is a script leaves no sleeping child behind.
func killProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
}

//go:build unix

package deploy

import (
	"os/exec"
	"syscall"
)

// killProcessGroup starts cmd in its own process group and makes cancellation kill the group.
func killProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
}

//go:build unix

package environment

import (
	"os/exec"
	"syscall"
)

// ownSession starts cmd in a session of its own (no controlling terminal: nothing it starts can
// read the user's terminal) and makes cancellation kill its whole process group.
func ownSession(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
}

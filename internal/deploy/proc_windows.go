//go:build windows

package deploy

import "os/exec"

// killProcessGroup: on Windows cancellation kills the shell (exec.CommandContext's default).
func killProcessGroup(*exec.Cmd) {}

//go:build windows

package environment

import "os/exec"

// ownSession: on Windows cancellation kills git itself (exec.CommandContext's default).
func ownSession(*exec.Cmd) {}

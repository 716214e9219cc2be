//go:build windows

package kube

import "os/exec"

// killProcessGroup: on Windows cancellation kills the plugin itself (exec.CommandContext's default).
func killProcessGroup(*exec.Cmd) {}

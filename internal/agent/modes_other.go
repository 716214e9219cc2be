//go:build !linux

package agent

import "os"

func applyModes(tty *os.File, modes string) {}

//go:build !linux

package agent

import "os"

// HandoffVersion is 0: only the Linux agent hands its kept commands to its successor.
const HandoffVersion = 0

// Handoff is nothing here (handoff_linux.go).
type Handoff struct{ cmds []*keptCmd }

func (h *Handoff) abort() {}

func openPidfd(pid int) *os.File          { return nil }
func (c *keptCmd) watchExit() bool        { return true }
func (c *keptCmd) canHandOff() bool       { return false }
func (k *keeper) handOff(string) *Handoff { return nil }
func (k *keeper) adopt(string) int        { return 0 }

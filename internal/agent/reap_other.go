//go:build !linux

package agent

import "context"

type children struct{ pids map[int]bool }

func (c *children) start(f func() (int, error)) error { _, err := f(); return err }
func (c *children) done(pid int)                      {}
func (c *children) reap(ctx context.Context)          {}

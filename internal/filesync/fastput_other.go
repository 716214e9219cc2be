//go:build !linux

package filesync

import "io"

// fastFile: no fast path off Linux (see fastput_linux.go).
type fastFile struct{}

func openRootFD(string) int { return -1 }

func (t *tree) openRead(string) (io.ReadCloser, bool, error) { return nil, false, nil }
func closeRootFD(int)                                        {}

func (t *tree) beginFast(string, string, bool) (*fastFile, bool, error) { return nil, false, nil }
func (ff *fastFile) write([]byte) error                                 { return nil }
func (ff *fastFile) abort()                                             {}
func (pf *putFile) commitFast() (Entry, error)                          { panic("no fast path") }

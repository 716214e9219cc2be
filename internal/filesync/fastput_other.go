//go:build !linux

package filesync

// fastFile: no fast path off Linux (see fastput_linux.go).
type fastFile struct{}

func openRootFD(string) int { return -1 }
func closeRootFD(int)       {}

func (t *tree) beginFast(string, string, bool) (*fastFile, bool, error) { return nil, false, nil }
func (ff *fastFile) write([]byte) error                                 { return nil }
func (ff *fastFile) abort()                                             {}
func (pf *putFile) commitFast() (Entry, error)                          { panic("no fast path") }

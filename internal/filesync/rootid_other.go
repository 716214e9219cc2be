//go:build !unix

package filesync

// rootIdentity is unknown here: no replaced-root check (the emptied-root and
// mass-deletion halts still apply).
func rootIdentity(string) string { return "" }

//go:build !unix

package filesync

import "io/fs"

func fileIdentity(fs.FileInfo) string { return "" }

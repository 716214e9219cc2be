//go:build !unix

package filesync

import (
	"os"
	"time"
)

func setMTime(_ *os.File, r *os.Root, name string, ns int64) error {
	mt := time.Unix(0, ns)
	return r.Chtimes(name, mt, mt)
}

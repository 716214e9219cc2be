//go:build unix

package safefile

import "golang.org/x/sys/unix"

// oNoFollow makes an open fail on a symbolic link at the path's last element.
const oNoFollow = unix.O_NOFOLLOW

package agent

import (
	"encoding/binary"
	"os"

	"golang.org/x/sys/unix"
)

// applyModes sets the terminal flags a pty-req's encoded modes ask for (RFC 4254
// section 8); the ones not listed keep the kernel's defaults.
func applyModes(tty *os.File, modes string) {
	b := []byte(modes)
	if len(b) == 0 {
		return
	}
	t, err := unix.IoctlGetTermios(int(tty.Fd()), unix.TCGETS)
	if err != nil {
		return
	}
	set := func(flags *uint32, bit uint32, on bool) {
		if on {
			*flags |= bit
		} else {
			*flags &^= bit
		}
	}
	for len(b) >= 5 && b[0] != 0 && b[0] < 160 {
		op, v := b[0], binary.BigEndian.Uint32(b[1:5]) != 0
		b = b[5:]
		switch op {
		case 36: // ICRNL
			set(&t.Iflag, unix.ICRNL, v)
		case 38: // IXON
			set(&t.Iflag, unix.IXON, v)
		case 50: // ISIG
			set(&t.Lflag, unix.ISIG, v)
		case 51: // ICANON
			set(&t.Lflag, unix.ICANON, v)
		case 53: // ECHO
			set(&t.Lflag, unix.ECHO, v)
		case 70: // OPOST
			set(&t.Oflag, unix.OPOST, v)
		case 72: // ONLCR
			set(&t.Oflag, unix.ONLCR, v)
		}
	}
	_ = unix.IoctlSetTermios(int(tty.Fd()), unix.TCSETS, t)
}

//go:build unix

package agent

import (
	"os"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"
)

// openPTY opens a terminal pair. The master is non-blocking and in Go's poller, so closing
// it ends a Read in progress and write deadlines work; creack/pty's own master is blocking
// (its Fd calls made it so), and a Read of it returns only when every holder of the terminal
// is gone: a shell that exited with a background job on its terminal was answered only when
// the job ended. Never call Fd on the master (it would make it blocking again).
func openPTY() (ptmx, tty *os.File, err error) {
	p, t, err := pty.Open()
	if err != nil {
		return nil, nil, err
	}
	fd, err := unix.Dup(int(p.Fd()))
	p.Close()
	if err != nil {
		t.Close()
		return nil, nil, err
	}
	unix.CloseOnExec(fd)
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		t.Close()
		return nil, nil, err
	}
	return os.NewFile(uintptr(fd), "/dev/ptmx"), t, nil
}

// setSize sets the terminal's size on its master (without making it blocking).
func setSize(ptmx *os.File, rows, cols uint32) {
	if rows == 0 || cols == 0 {
		rows, cols = 24, 80
	}
	rc, err := ptmx.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Control(func(fd uintptr) {
		_ = unix.IoctlSetWinsize(int(fd), unix.TIOCSWINSZ, &unix.Winsize{Row: uint16(rows), Col: uint16(cols)})
	})
}

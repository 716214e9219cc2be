//go:build linux

package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/devtool/devtool/internal/atomicfile"
)

// The handoff: an agent that re-executes itself (a restart request, restart.go) hands its
// live kept commands to its successor, the new binary running in the same process. The
// commands are the process's children and stay so across exec; their terminals' masters
// stay open when close-on-exec is cleared on them. What the successor needs besides is
// written to Config.HandoffFile (0600, under the agent's home, versioned JSON): for each
// command its keep ID and client key, its pid, the number of its terminal's master, the
// output the ring holds with the byte counts, and how long it may still wait for its client.
//
// The successor reads the file once and removes it. It adopts a command only when the file
// is this process's (same pid and start time), the fd is an inherited terminal master whose
// session is the command's, and the command is its child leading its own session. What it
// cannot adopt ends as at any restart: an inherited terminal master that is not adopted
// (a garbled or missing file) is hung up and its session ended, so nothing leaks. An agent
// hands over only to a successor that says it reads this version (`devtool-agent
// capabilities`); with any other successor the commands end before the exec.

// HandoffVersion is the version of the handoff state this agent writes and reads.
const HandoffVersion = 1

// maxHandoffSize bounds the handoff file (maxKept rings, base64).
const maxHandoffSize = 8 << 20

type handoffState struct {
	Version int `json:"version"`
	// PID and Start (clock ticks after boot, /proc/PID/stat) name the agent process: the
	// same after exec, another after a container restart.
	PID      int          `json:"pid"`
	Start    uint64       `json:"start"`
	Commands []handoffCmd `json:"commands"`
}

type handoffCmd struct {
	ID  string `json:"id"`
	Key string `json:"key"`
	PID int    `json:"pid"`
	FD  int    `json:"fd"`
	// Total is how many bytes of output the command produced; Output the last of them
	// (what the ring held).
	Total  uint64 `json:"total"`
	Output []byte `json:"output"`
	// Input is how many bytes of input the command got.
	Input uint64 `json:"input"`
	// KeepMillis is how long the command may still wait for its client.
	KeepMillis int64 `json:"keepMillis"`
}

// openPidfd is a pidfd of process pid in the poller (readable once it exited), or nil.
func openPidfd(pid int) *os.File {
	fd, err := unix.PidfdOpen(pid, 0) // close-on-exec
	if err != nil {
		return nil
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil
	}
	f := os.NewFile(uintptr(fd), "pidfd")
	if err := f.SetReadDeadline(time.Time{}); err != nil { // not pollable: no deadlines
		f.Close()
		return nil
	}
	return f
}

// watchExit waits until the process has exited, without reaping it: true; false when a
// handoff stopped the wait.
func (c *keptCmd) watchExit() bool {
	if c.pidfd == nil {
		return true
	}
	rc, err := c.pidfd.SyscallConn()
	if err != nil {
		return true
	}
	err = rc.Read(func(fd uintptr) bool {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PIDFD, int(fd), &info, unix.WEXITED|unix.WNOWAIT|unix.WNOHANG, nil)
		if err == unix.EINTR {
			return false
		}
		return err != nil || info.Signo != 0
	})
	return err == nil || !c.handing.Load()
}

// Handoff is the kept commands an agent handed to its successor (Restart.Abort ends them
// when the successor could not be started).
type Handoff struct {
	k    *keeper
	file string
	cmds []*keptCmd
}

// canHandOff reports whether c could be handed over now.
func (c *keptCmd) canHandOff() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pidfd != nil && !c.ending && !c.exited
}

// freeze stops c's reader and waiter for a handoff and says what the successor needs
// (close-on-exec is still set on its terminal); false when c cannot be handed over: it is
// ending or ended (then it is ended here, if it was not already).
func (c *keptCmd) freeze() (handoffCmd, bool) {
	c.mu.Lock()
	if c.pidfd == nil || c.ending || c.exited {
		c.mu.Unlock()
		return handoffCmd{}, false
	}
	c.ending = true // no expiry or client ends it from here on
	left := c.k.keepFor
	if c.expiry != nil {
		c.expiry.Stop()
		c.expiry = nil
		left = time.Until(c.expiresAt)
	}
	if c.att != nil {
		c.detachLocked(c.att)
	}
	c.mu.Unlock()
	c.handing.Store(true)
	_ = c.pidfd.SetReadDeadline(time.Now())
	<-c.waitEnd
	select {
	case <-c.waited: // it exited and was reaped meanwhile
		c.handing.Store(false)
		c.finish("the agent restarts", endKill)
		return handoffCmd{}, false
	default:
	}
	_ = c.ptmx.SetReadDeadline(time.Now())
	<-c.readDone
	fd := -1
	if rc, err := c.ptmx.SyscallConn(); err == nil {
		_ = rc.Control(func(f uintptr) { fd = int(f) })
	}
	c.mu.Lock()
	start := c.ringStart()
	hc := handoffCmd{ID: c.id, Key: c.key, PID: c.pid, FD: fd, Total: c.total,
		Output: c.readLocked(start, int(c.total-start)), KeepMillis: max(left.Milliseconds(), 1000)}
	c.mu.Unlock()
	c.inMu.Lock()
	hc.Input = c.inTotal
	c.inMu.Unlock()
	return hc, true
}

// handOff freezes every kept command that can go on in the successor, writes the handoff
// file and clears close-on-exec on their terminals. The others are left for closeAll. Nil
// when nothing was handed over (or the file could not be written: then they end).
func (k *keeper) handOff(file string) *Handoff {
	k.mu.Lock()
	k.closed = true
	var all []*keptCmd
	for _, c := range k.cmds {
		all = append(all, c)
	}
	k.mu.Unlock()
	self, err := procStat(os.Getpid())
	if err != nil {
		k.log.Warn("handing the kept commands over: reading this process's start", "err", err)
		return nil
	}
	st := handoffState{Version: HandoffVersion, PID: os.Getpid(), Start: self.start}
	h := &Handoff{k: k, file: file}
	for _, c := range all {
		hc, ok := c.freeze()
		if !ok {
			continue
		}
		k.remove(c)
		h.cmds = append(h.cmds, c)
		st.Commands = append(st.Commands, hc)
	}
	if len(h.cmds) == 0 {
		return nil
	}
	data, err := json.Marshal(st)
	if err == nil {
		err = atomicfile.Write(file, data, 0o600)
	}
	for _, c := range h.cmds {
		if err != nil {
			break
		}
		err = setCloseOnExec(c.ptmx, false)
	}
	if err != nil {
		k.log.Warn("handing the kept commands over failed: they end", "file", file, "err", err)
		h.abort()
		return nil
	}
	k.log.Info("kept commands handed over to the next agent", "count", len(h.cmds), "file", file)
	return h
}

// abort ends the commands of h (the successor could not be started): SIGKILL to their
// sessions, waited for, their terminals closed, the handoff file removed.
func (h *Handoff) abort() {
	_ = os.Remove(h.file)
	for _, c := range h.cmds {
		_ = setCloseOnExec(c.ptmx, true)
		signalSession(c.pid, syscall.SIGKILL)
		reap(c.pid)
		h.k.children.done(c.pid)
		close(c.waited)
		c.ptmx.Close()
		c.pidfd.Close()
		close(c.gone)
		h.k.log.Info("kept command ended", "pid", c.pid, "keep", shortID(c.id), "why", "the agent could not restart")
	}
	h.cmds = nil
}

func reap(pid int) {
	var ws syscall.WaitStatus
	for {
		if _, err := syscall.Wait4(pid, &ws, 0, nil); err != syscall.EINTR {
			return
		}
	}
}

func setCloseOnExec(f *os.File, on bool) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	err = rc.Control(func(fd uintptr) {
		flag := 0
		if on {
			flag = unix.FD_CLOEXEC
		}
		_, ferr = unix.FcntlInt(fd, unix.F_SETFD, flag)
	})
	if err != nil {
		return err
	}
	return ferr
}

// adopt takes over the kept commands handed over in file by the agent this process
// replaced (the file is read once and removed) and ends what was handed over but cannot be
// taken. It returns how many it adopted.
func (k *keeper) adopt(file string) int {
	inherited := inheritedTerminals()
	data, rerr := readHandoff(file)
	if rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
		k.log.Warn("the previous agent's handoff is unreadable: its commands end", "file", file, "err", rerr)
	}
	var st handoffState
	if rerr == nil {
		err := json.Unmarshal(data, &st)
		self, serr := procStat(os.Getpid())
		switch {
		case err != nil:
			err = fmt.Errorf("%s: not a handoff (%v)", file, err)
		case st.Version != HandoffVersion:
			err = fmt.Errorf("%s: version %d, this agent reads %d", file, st.Version, HandoffVersion)
		case serr != nil:
			err = serr
		case st.PID != os.Getpid() || st.Start != self.start:
			err = fmt.Errorf("%s: written by process %d started at %d, not this one (%d, %d)", file, st.PID, st.Start, os.Getpid(), self.start)
		}
		if err != nil {
			k.log.Warn("the previous agent's handoff is not this process's: its commands end", "err", err)
			st.Commands = nil
		}
	}
	adopted := 0
	seen := map[string]bool{}
	var refused []int
	for _, hc := range st.Commands {
		if err := validHandoff(hc, inherited, seen); err != nil {
			k.log.Warn("a kept command handed over cannot be taken: it ends", "pid", hc.PID, "keep", shortID(hc.ID), "err", err)
			refused = append(refused, hc.PID)
			continue
		}
		delete(inherited, hc.FD)
		seen[hc.ID] = true
		k.adoptOne(hc, true)
		adopted++
	}
	// Terminals handed over but not adopted: their commands end (hung up), none leaks.
	for fd := range inherited {
		sid, err := unix.IoctlGetUint32(fd, unix.TIOCGSID)
		st, serr := procStat(int(sid))
		if err != nil || serr != nil || st.ppid != os.Getpid() || st.session != int(sid) {
			unix.Close(fd)
			continue
		}
		k.log.Info("a terminal handed over without its command's details: ending it", "pid", sid)
		c := k.adoptOne(handoffCmd{PID: int(sid), FD: fd, KeepMillis: 1}, false)
		k.wg.Add(1)
		go func() {
			defer k.wg.Done()
			c.end("handed over without its details", endHangup)
		}()
	}
	// A command refused whose terminal was not found: still this process's child leading
	// its own session (no command of this agent runs yet, so it is the previous agent's).
	for _, pid := range refused {
		st, err := procStat(pid)
		if err != nil || pid <= 1 || st.ppid != os.Getpid() || st.session != pid || k.children.has(pid) {
			continue
		}
		_ = k.children.start(func() (int, error) { return pid, nil })
		k.wg.Add(1)
		go func() {
			defer k.wg.Done()
			signalSession(pid, syscall.SIGKILL)
			reap(pid)
			k.children.done(pid)
		}()
	}
	if adopted > 0 {
		k.log.Info("kept commands taken over from the previous agent", "count", adopted)
	}
	return adopted
}

// validHandoff checks one command handed over against what this process inherited.
func validHandoff(hc handoffCmd, inherited map[int]bool, seen map[string]bool) error {
	switch {
	case hc.ID == "" || len(hc.ID) > maxKeepID || hc.Key == "":
		return errors.New("no keep ID or key")
	case seen[hc.ID]:
		return errors.New("its keep ID is handed over twice")
	case !inherited[hc.FD]:
		return fmt.Errorf("fd %d is not an inherited terminal", hc.FD)
	case len(hc.Output) > keepRing || uint64(len(hc.Output)) > hc.Total:
		return errors.New("its output does not fit")
	case hc.PID <= 1:
		return fmt.Errorf("pid %d", hc.PID)
	}
	st, err := procStat(hc.PID)
	if err != nil {
		return err
	}
	if st.ppid != os.Getpid() || st.session != hc.PID {
		return fmt.Errorf("process %d is not a command of this agent", hc.PID)
	}
	if st.state != "Z" {
		sid, err := unix.IoctlGetUint32(hc.FD, unix.TIOCGSID)
		if err != nil || int(sid) != hc.PID {
			return fmt.Errorf("fd %d is not the terminal of process %d", hc.FD, hc.PID)
		}
	}
	return nil
}

// adoptOne makes hc a kept command of k (checked by validHandoff), listed under its keep ID
// when register (else only its end is awaited by k).
func (k *keeper) adoptOne(hc handoffCmd, register bool) *keptCmd {
	unix.CloseOnExec(hc.FD)
	_ = unix.SetNonblock(hc.FD, true)
	ptmx := os.NewFile(uintptr(hc.FD), "/dev/ptmx")
	c := newKept(k, hc.ID, hc.Key, hc.PID, ptmx, openPidfd(hc.PID))
	c.total = hc.Total - uint64(len(hc.Output))
	c.appendLocked(hc.Output)
	c.inTotal = hc.Input
	_ = k.children.start(func() (int, error) { return hc.PID, nil })
	left := min(max(time.Duration(hc.KeepMillis)*time.Millisecond, time.Second), k.keepFor)
	k.mu.Lock()
	if register {
		c.mu.Lock()
		c.expireLocked(left)
		c.mu.Unlock()
		k.cmds[hc.ID] = c
	}
	k.wg.Add(2)
	k.mu.Unlock()
	c.run()
	if register {
		k.log.Info("kept command taken over", "pid", c.pid, "keep", shortID(c.id), "outputBytes", hc.Total, "keptFor", left)
	}
	return c
}

// readHandoff reads and removes the handoff file (a regular file, not a link, at most
// maxHandoffSize).
func readHandoff(file string) ([]byte, error) {
	if file == "" {
		return nil, os.ErrNotExist
	}
	f, err := os.OpenFile(file, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			_ = os.Remove(file)
		}
		return nil, err
	}
	defer f.Close()
	_ = os.Remove(file)
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", file)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxHandoffSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxHandoffSize {
		return nil, fmt.Errorf("%s: larger than %d bytes", file, maxHandoffSize)
	}
	return data, nil
}

// inheritedTerminals lists this process's terminal masters without close-on-exec: every
// file this agent opens has it set, so these were handed over through exec.
func inheritedTerminals() map[int]bool {
	out := map[int]bool{}
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return out
	}
	for _, e := range ents {
		fd, err := strconv.Atoi(e.Name())
		if err != nil || fd < 3 {
			continue
		}
		flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
		if err != nil || flags&unix.FD_CLOEXEC != 0 {
			continue
		}
		if _, err := unix.IoctlGetUint32(fd, unix.TIOCGPTN); err == nil {
			out[fd] = true
		}
	}
	return out
}

type procInfo struct {
	state         string
	ppid, session int
	start         uint64
}

// procStat reads /proc/PID/stat.
func procStat(pid int) (procInfo, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procInfo{}, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return procInfo{}, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	// After the name: state(3) ppid(4) pgrp(5) session(6) ... starttime(22).
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return procInfo{}, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	p := procInfo{state: f[0]}
	p.ppid, _ = strconv.Atoi(f[1])
	p.session, _ = strconv.Atoi(f[3])
	p.start, _ = strconv.ParseUint(f[19], 10, 64)
	return p, nil
}

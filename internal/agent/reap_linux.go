package agent

import (
	"context"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// children guards the start of command processes against the orphan reaper: a
// command's pid is registered under the same lock as its start, so the reaper never
// waits for a process that exec.Cmd.Wait owns.
type children struct {
	mu   sync.Mutex
	pids map[int]bool
}

func (c *children) start(f func() (pid int, err error)) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	pid, err := f()
	if err == nil {
		c.pids[pid] = true
	}
	return err
}

func (c *children) has(pid int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pids[pid]
}

func (c *children) done(pid int) {
	c.mu.Lock()
	delete(c.pids, pid)
	c.mu.Unlock()
}

// reap waits for every zombie child that is not a command's own process: as the
// container's PID 1 the agent inherits the orphans of every command. It runs on each
// SIGCHLD (and every 10 s) until ctx ends.
func (c *children) reap(ctx context.Context) {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGCHLD)
	defer signal.Stop(sig)
	t := time.NewTicker(10 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-sig:
		case <-t.C:
		}
		c.reapOnce()
	}
}

func (c *children) reapOnce() {
	c.mu.Lock()
	defer c.mu.Unlock()
	self := strconv.Itoa(os.Getpid())
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || c.pids[pid] {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 2 || f[0] != "Z" || f[1] != self {
			continue
		}
		var ws syscall.WaitStatus
		_, _ = syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
	}
}

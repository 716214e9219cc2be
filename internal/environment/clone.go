package environment

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// cloneStallTimeout is how long a git clone may go without writing anything (git clone
// --progress reports every few hundred milliseconds while it receives or resolves objects)
// before devtool ends it: a clone waiting for a password, a passphrase, a credential helper or a
// silent server never ends otherwise. A whole clone has no deadline: big repositories take time.
var cloneStallTimeout = 3 * time.Minute

// maxCloneOutput is how much of git's output an error quotes (its tail).
const maxCloneOutput = 16 << 10

// runClone runs git with args (a clone) and environ, and returns its output's tail with the error.
// The git process and everything it starts (ssh, credential helpers) run in their own session,
// without a terminal, so nothing can wait for the user's input: git's own prompts are disabled
// (GIT_TERMINAL_PROMPT=0, it fails at once instead) and an ssh or helper that would ask fails or
// stalls. The whole group is killed when ctx ends or git writes nothing for cloneStallTimeout.
func runClone(ctx context.Context, environ []string, args ...string) error {
	stall := cloneStallTimeout
	rctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	out := &progressBuffer{max: maxCloneOutput, last: time.Now()}
	cmd := exec.CommandContext(rctx, "git", args...)
	cmd.Env = append(append([]string(nil), environ...), "GIT_TERMINAL_PROMPT=0")
	cmd.Stdout = out
	cmd.Stderr = out
	cmd.WaitDelay = time.Second
	ownSession(cmd)
	if err := cmd.Start(); err != nil {
		return err
	}
	errStalled := errors.New("stalled")
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the watchdog
		defer wg.Done()
		t := time.NewTicker(min(stall/4, time.Second))
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if out.idle() >= stall {
					cancel(errStalled)
					return
				}
			}
		}
	}()
	err := cmd.Wait()
	close(done)
	wg.Wait()
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return ctx.Err()
	case errors.Is(context.Cause(rctx), errStalled):
		return fmt.Errorf("git clone made no progress for %v and was stopped (waiting for a password, an ssh passphrase or "+
			"host key confirmation, or a credential helper? devtool runs git without a terminal: use a credential helper "+
			"or ssh-agent)\n%s", stall, out.tail())
	default:
		return fmt.Errorf("%v\n%s", err, out.tail())
	}
}

// progressBuffer keeps the last max bytes written and when the last write came.
type progressBuffer struct {
	mu   sync.Mutex
	buf  []byte
	max  int
	last time.Time
}

func (p *progressBuffer) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.last = time.Now()
	p.buf = append(p.buf, b...)
	if len(p.buf) > 2*p.max {
		p.buf = append(p.buf[:0], p.buf[len(p.buf)-p.max:]...)
	}
	return len(b), nil
}

func (p *progressBuffer) idle() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return time.Since(p.last)
}

// tail is the output's end, progress lines (\r) collapsed to their last state.
func (p *progressBuffer) tail() string {
	p.mu.Lock()
	b := bytes.Clone(p.buf)
	p.mu.Unlock()
	if len(b) > p.max {
		b = b[len(b)-p.max:]
	}
	lines := strings.Split(string(b), "\n")
	for i, l := range lines {
		if j := strings.LastIndex(strings.TrimRight(l, "\r"), "\r"); j >= 0 {
			lines[i] = l[j+1:]
		}
	}
	return strings.TrimSpace(strings.Join(lines, "\n"))
}

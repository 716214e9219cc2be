package filesync

// Files still being written are sent once they settle. The first change of
// a path goes at once (an edit is not delayed); a path that changes again
// within settleQuiet of its last change is taken for one still being
// written, and waits until it stayed unchanged for settleQuiet (each change
// meanwhile restarts the wait), at most settleMax from the first change. A
// path that keeps changing right after its wait ended waits twice as long
// the next time (up to settleMax), so a file appended to without end goes at
// most every settleMax. Without this, a 64 MiB file written over 2 s was
// hashed and sent again at every change (four times its size on the
// stream).
//
// The client holds back local changes before scanning them (no hashing of a
// file being written) and the agent's reported changes before reconciling
// them; the agent holds back its own changes before scanning and reporting
// them (server.go). Each has its own settler.
//
// Events can arrive late: a loaded machine stalls the watcher, the engine or
// the stream for longer than the quiet time while the writer goes on. A wait
// that ends is therefore checked against the file's mtime where the file is
// at hand (changedAt): a file modified within the quiet time waits on.

import (
	"time"
)

const (
	settleQuiet = 300 * time.Millisecond
	settleMax   = 10 * time.Second
	// settleForget: paths seen changing are forgotten after at most this
	// (two periods of settleQuiet; the engine wakes then to drop them).
	settleForget = 2*settleQuiet + 10*time.Millisecond
)

// settler tracks one side's recently changed paths and those waiting to
// settle. The engine goroutine owns it.
type settler struct {
	// gen holds the paths changed in the current and the previous period
	// of settleQuiet (genAt: when the current one began): a change to one
	// of them is a change soon after another. Whole maps are dropped as
	// periods pass, so a burst of changes leaves nothing behind.
	gen   [2]map[string]struct{}
	genAt time.Time
	// wait holds paths that were found still changing: waiting (ended
	// zero) or recently settled (kept until settleMax after, for the
	// doubling).
	wait map[string]*settling
}

type settling struct {
	first time.Time     // the start of this wait (bounded by settleMax from it)
	due   time.Time     // when it ends if nothing changes before
	quiet time.Duration // this wait's quiet time
	ended time.Time     // when the last wait ended (zero while waiting)
}

func (s *settler) rotate(now time.Time) {
	switch d := now.Sub(s.genAt); {
	case d < settleQuiet:
		return
	case d < 2*settleQuiet:
		s.gen[1] = s.gen[0]
	default:
		s.gen[1] = nil
	}
	s.gen[0] = nil
	s.genAt = now
}

// seen records a change of p at now.
func (s *settler) seen(p string, now time.Time) {
	s.rotate(now)
	if s.gen[0] == nil {
		s.gen[0] = map[string]struct{}{}
	}
	s.gen[0][p] = struct{}{}
}

func (s *settler) recent(p string) bool {
	for _, g := range s.gen {
		if _, ok := g[p]; ok {
			return true
		}
	}
	return false
}

// hold reports whether a change of p seen at now must wait for p to
// settle: it returns when the wait ends if nothing changes before (zero: no
// wait, take the change now).
func (s *settler) hold(p string, now time.Time) time.Time {
	s.rotate(now)
	if w := s.wait[p]; w != nil {
		switch {
		case w.ended.IsZero(): // still waiting: the quiet time starts again
			w.due = minTime(now.Add(w.quiet), w.first.Add(settleMax))
			return w.due
		case now.Sub(w.ended) < w.quiet: // changing again right after its wait
			w.quiet = min(2*w.quiet, settleMax)
			w.first, w.ended = now, time.Time{}
			w.due = now.Add(w.quiet)
			return w.due
		case now.Sub(w.ended) >= settleMax:
			delete(s.wait, p)
		}
	}
	if !s.recent(p) {
		return time.Time{}
	}
	if w := s.wait[p]; w != nil { // settled a while ago: the same quiet time again
		w.first, w.ended, w.due = now, time.Time{}, now.Add(w.quiet)
		return w.due
	}
	if s.wait == nil {
		s.wait = map[string]*settling{}
	}
	w := &settling{first: now, due: now.Add(settleQuiet), quiet: settleQuiet}
	s.wait[p] = w
	return w.due
}

// due returns the paths whose wait ended by now, and when the settler needs
// to be asked again (zero: never, until something changes). changedAt, when
// set, returns when a path's file was last modified (zero: unknown): a wait
// whose file changed within its quiet time goes on (still bounded by
// settleMax), whatever the events said.
func (s *settler) due(now time.Time, changedAt func(string) time.Time) (paths []string, next time.Time) {
	s.rotate(now)
	for p, w := range s.wait {
		switch {
		case !w.ended.IsZero():
			if now.Sub(w.ended) >= settleMax {
				delete(s.wait, p)
				continue
			}
			next = earliest(next, w.ended.Add(settleMax))
		case !now.Before(w.due):
			if changedAt != nil {
				if m := changedAt(p); !m.IsZero() && now.Sub(m) < w.quiet {
					if d := minTime(m.Add(w.quiet), w.first.Add(settleMax)); now.Before(d) {
						w.due = d
						next = earliest(next, d)
						continue
					}
				}
			}
			w.ended = now
			paths = append(paths, p)
			next = earliest(next, now.Add(settleMax))
		default:
			next = earliest(next, w.due)
		}
	}
	if len(s.wait) == 0 {
		s.wait = nil
	}
	if s.gen[0] != nil || s.gen[1] != nil {
		next = earliest(next, s.genAt.Add(2*settleQuiet))
	}
	return paths, next
}

// waiting counts the paths waiting to settle (pending in the status).
func (s *settler) waiting() int {
	n := 0
	for _, w := range s.wait {
		if w.ended.IsZero() {
			n++
		}
	}
	return n
}

// waitingPaths appends the paths waiting to settle to out, up to n in all.
func (s *settler) waitingPaths(out []string, n int) []string {
	for p, w := range s.wait {
		if len(out) >= n {
			break
		}
		if w.ended.IsZero() {
			out = append(out, p)
		}
	}
	return out
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// earliest is the earlier of two times, a zero one counting as none.
func earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

// settleLocal returns the paths of a watch batch to scan now; the others
// wait to settle (settleDue scans them).
func (c *Client) settleLocal(f *cfolder, paths []string, now time.Time) []string {
	out := paths[:0]
	for _, p := range paths {
		if due := f.settle[0].hold(p, now); !due.IsZero() {
			f.log.Debug("local change waits to settle", "path", p, "until", due)
			c.wakeAt(due)
			continue
		}
		out = append(out, p)
	}
	return out
}

// remoteChanged queues a path the agent reported changed, unless it waits
// to settle.
func (c *Client) remoteChanged(f *cfolder, p string, now time.Time) {
	if due := f.settle[1].hold(p, now); !due.IsZero() {
		f.log.Debug("remote change waits to settle", "path", p, "until", due)
		c.wakeAt(due)
		return
	}
	if f.remote[p].Kind == KindFile {
		f.settle[1].seen(p, now)
		c.wakeAt(now.Add(settleForget))
	}
	f.markDirty(p)
}

// settleDue takes the changes whose wait ended.
func (c *Client) settleDue(now time.Time) {
	for _, f := range c.folders {
		var changedAt func(string) time.Time
		if f.t != nil {
			changedAt = f.t.changedAt
		}
		paths, next := f.settle[0].due(now, changedAt)
		if len(paths) > 0 && f.t != nil {
			c.rescanLocal(f, paths)
		}
		rpaths, rnext := f.settle[1].due(now, nil)
		for _, p := range rpaths {
			f.settle[1].seen(p, now)
			f.markDirty(p)
		}
		if next = earliest(next, rnext); !next.IsZero() {
			c.wakeAt(next)
		}
	}
}

// settling counts a folder's paths waiting to settle on either side.
func (f *cfolder) settling() int { return f.settle[0].waiting() + f.settle[1].waiting() }

package filesync

// Giving memory back once a burst is over. Go maps keep the room they grew
// to when emptied, and the runtime returns freed pages to the system only
// slowly: after 100,000 files appeared, an idle client held three times its
// live heap. Once the engine is idle after many operations, the emptied
// maps are made anew and the freed memory is returned at once.

import (
	"runtime/debug"
	"time"
)

// compactAfter is how many operations make an idle engine give memory back.
const compactAfter = 2000

// memRelease is how much memory an idle engine gives back after a burst
// (tests and benchmarks change it: the same run measures each level):
// releaseNone nothing, releaseMaps the emptied maps made anew and the freed
// memory returned to the system, releaseAll that and the stream's buffers
// sized for the burst (and a compression window of one block).
var memRelease = releaseAll

const (
	releaseNone = iota
	releaseMaps
	releaseAll
)

// trimMsg asks the sender to drop the buffers a burst grew.
type trimMsg struct{}

// idle reports whether nothing is under way or waiting: no operation, no
// dirty path, no held removal, nothing waiting to settle or for its retry
// soon.
func (c *Client) idle() bool {
	if len(c.ops) > 0 || c.inbox.len() > 0 || c.out.len() > 0 {
		return false
	}
	for _, f := range c.folders {
		if len(f.dirty) > 0 || len(f.inflight) > 0 || len(f.held) > 0 || len(f.newHeld) > 0 || f.settling() > 0 {
			return false
		}
	}
	return true
}

// compact makes the engine's emptied maps anew and returns freed memory to
// the system.
func (c *Client) compact() {
	c.opsSinceCompact = 0
	if memRelease == releaseNone {
		return
	}
	if memRelease >= releaseAll {
		c.out.push(trimMsg{})
		if c.fr != nil {
			c.fr.trimNext.Store(true)
		}
	}
	if len(c.ops) == 0 {
		c.ops = map[uint64]*pendingOp{}
	}
	c.getsMu.Lock()
	if len(c.gets) == 0 {
		c.gets = map[uint64]*pendingOp{}
	}
	c.getsMu.Unlock()
	now := time.Now()
	for _, f := range c.folders {
		if len(f.inflight) == 0 {
			f.inflight = map[string]uint64{}
		}
		if len(f.dirty) == 0 {
			f.dirty = map[string]struct{}{}
		}
		f.diff = remake(f.diff)
		f.failed = remake(f.failed)
		f.noRename = remake(f.noRename)
		if len(f.held) == 0 {
			f.held = map[string]struct{}{}
		}
		for i := range f.settle {
			f.settle[i].due(now, nil) // drops the paths seen changing before
		}
		if f.t != nil {
			f.t.mu.Lock()
			f.t.newDirs = nil
			f.t.mu.Unlock()
		}
	}
	debug.FreeOSMemory()
}

// remake copies m into a map of its size (a map does not shrink).
func remake[K comparable, V any](m map[K]V) map[K]V {
	if m == nil {
		return nil
	}
	out := make(map[K]V, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

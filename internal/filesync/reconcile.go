package filesync

// The client's reconciliation rounds: each dirty path goes through decide
// (decide.go), the verdicts become a plan of actions (renames paired, removals
// held, the plan checked by the safety rails in halt.go), and execute carries
// the plan out: local steps at once, remote ones as ops to the agent.

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// action is one step of a reconciliation plan.
type action struct {
	do     byte // one of the act* constants
	p, to  string
	l, r   Entry
	remove bool // ordered with the removals (children before parents)
}

const (
	actPush         byte = iota + 1 // local -> remote
	actPull                         // remote -> local
	actRemoteRm                     // remove on the remote
	actLocalRm                      // remove locally
	actRemoteMove                   // move the remote version aside (conflict copy)
	actLocalMove                    // move the local version aside (conflict copy)
	actRemoteRename                 // a file renamed here: the same move there (p to to)
	actLocalRename                  // a file renamed there: the same move here
)

// iterate reconciles every dirty path and carries the plan out; local steps
// are immediate, so it goes round until nothing is left (bounded).
func (c *Client) iterate() {
	for round := 0; round < 4; round++ {
		any := false
		for _, f := range c.folders {
			if !f.remoteReady || len(f.dirty) == 0 {
				continue
			}
			if f.halt != "" {
				f.dirty = map[string]struct{}{}
				continue
			}
			any = true
			paths := make([]string, 0, len(f.dirty))
			for p := range f.dirty {
				paths = append(paths, p)
			}
			f.dirty = map[string]struct{}{}
			var plan []action
			now := time.Now()
			f.folds = nil
			for _, p := range paths {
				plan = c.reconcile(f, p, now, plan)
			}
			plan = pairRenames(f, plan)
			plan = c.holdRemovals(f, plan, now)
			if c.checkHalt(f, plan, now) {
				continue
			}
			c.execute(f, plan)
		}
		if !any {
			break
		}
	}
	c.updateStatus(false)
}

// reconcile decides what to do with p from its base, local and remote states.
func (c *Client) reconcile(f *cfolder, p string, now time.Time, plan []action) []action {
	if _, busy := f.inflight[p]; busy {
		return plan
	}
	f.t.mu.Lock()
	l := f.t.idx[p]
	ign := f.t.ignored(p, l.Kind == KindDir || f.remote[p].Kind == KindDir)
	f.t.mu.Unlock()
	if ign {
		// ignored paths leave the sync: forgotten, never deleted
		delete(f.base, p)
		delete(f.remote, p)
		delete(f.diff, p)
		delete(f.failed, p)
		return plan
	}
	r := f.remote[p]
	b := f.base[p]
	if same(l, r) {
		if l.Kind == KindNone {
			if _, ok := f.base[p]; ok {
				f.log.Debug("base removed", "path", p)
				delete(f.base, p)
				f.changed = true
			}
		} else if b, ok := f.base[p]; !ok || !same(b, l) || b.MTime != l.MTime {
			f.log.Debug("base set", "path", p, "e", descE(l))
			f.base[p] = l
			f.changed = true
		}
		delete(f.diff, p)
		delete(f.failed, p)
		return plan
	}
	f.diff[p] = struct{}{}
	if fs, ok := f.failed[p]; ok {
		if same(fs[0], l) && same(fs[1], r) {
			return plan
		}
		delete(f.failed, p)
	}
	d := decide(p, b, l, r, func(local bool) bool { return c.changedBelow(f, p, local) })
	switch d.v {
	case vPush:
		return append(plan, action{do: actPush, p: p, l: l, r: r})
	case vPull:
		if l.Kind == KindNone && (f.t.caps.foldCase || f.t.caps.foldNorm) {
			if other, ok := f.foldName(p); ok && other != p {
				c.refuse(f, p, l, r, fmt.Sprintf("differs only in case or Unicode form from %s, which this folder's filesystem takes for the same name: not created here (rename one of them)", other))
				return plan
			}
			f.folds[f.t.caps.nameKey(p)] = p
		}
		return append(plan, action{do: actPull, p: p, l: l, r: r})
	case vRemoteRm:
		return append(plan, action{do: actRemoteRm, p: p, l: l, r: r, remove: true})
	case vLocalRm:
		return append(plan, action{do: actLocalRm, p: p, l: l, r: r, remove: true})
	case vRemoteAside:
		return append(plan, action{do: actRemoteMove, p: p, to: c.conflictCopy(f, p, "remote", now), l: l, r: r, remove: true})
	case vLocalAside:
		return append(plan, action{do: actLocalMove, p: p, to: c.conflictCopy(f, p, "local", now), l: l, r: r, remove: true})
	case vRefuse:
		c.refuse(f, p, l, r, d.why)
	}
	return plan
}

// refuse leaves p as it is on both sides until either changes, and reports
// why once.
func (c *Client) refuse(f *cfolder, p string, l, r Entry, why string) {
	f.failed[p] = [2]Entry{l, r}
	if f.refused[p] == why {
		return // reported already
	}
	if f.refused == nil || len(f.refused) >= 10000 {
		f.refused = map[string]string{}
	}
	f.refused[p] = why
	f.log.Warn("path not synchronized", "path", p, "err", why)
	f.addErr(p, why)
}

// foldName returns the local path equal to p but for case, if any (the
// map is built once per round, on case-insensitive folders only).
func (f *cfolder) foldName(p string) (string, bool) {
	if f.folds == nil {
		f.t.mu.Lock()
		f.folds = make(map[string]string, len(f.t.idx))
		for q := range f.t.idx {
			f.folds[f.t.caps.nameKey(q)] = q
		}
		f.t.mu.Unlock()
	}
	q, ok := f.folds[f.t.caps.nameKey(p)]
	return q, ok
}

// changedBelow reports whether the local (or remote) side holds a path below
// p that differs from the base.
func (c *Client) changedBelow(f *cfolder, p string, local bool) bool {
	pre := p + "/"
	if local {
		f.t.mu.Lock()
		defer f.t.mu.Unlock()
		for q, e := range f.t.idx {
			if strings.HasPrefix(q, pre) && !same(f.base[q], e) {
				return true
			}
		}
		return false
	}
	for q, e := range f.remote {
		if strings.HasPrefix(q, pre) && !same(f.base[q], e) {
			return true
		}
	}
	return false
}

func (c *Client) conflictCopy(f *cfolder, p, side string, now time.Time) string {
	f.t.mu.Lock()
	defer f.t.mu.Unlock()
	return f.t.freeName(p, side, now, f.remote)
}

func (c *Client) newOp(f *cfolder, a action, pull bool) uint64 {
	c.nextID++
	id := c.nextID
	op := &pendingOp{folder: f.i, path: a.p, to: a.to, pull: pull, rename: a.do == actRemoteRename, local: a.l, remote: a.r}
	c.ops[id] = op
	f.inflight[a.p] = id
	if a.to != "" {
		f.inflight[a.to] = id
	}
	if pull {
		c.getsMu.Lock()
		c.gets[id] = op
		c.getsMu.Unlock()
	}
	return id
}

// execute carries a plan out: removals and moves first, deepest first, then
// creations and updates, shallowest first.
func (c *Client) execute(f *cfolder, plan []action) {
	sort.Slice(plan, func(i, j int) bool {
		a, b := plan[i], plan[j]
		if a.remove != b.remove {
			return a.remove
		}
		if a.remove {
			return a.p > b.p
		}
		return a.p < b.p
	})
	for _, a := range plan {
		f.log.Debug("sync action", "do", a.do, "path", a.p, "to", a.to, "local", descE(a.l), "remote", descE(a.r), "base", descE(f.base[a.p]))
		switch a.do {
		case actPush:
			c.push(f, c.newOp(f, a, false), a.p, a.l, a.r)
		case actPull:
			c.pull(f, c.newOp(f, a, true), a.p, a.l, a.r)
		case actRemoteRm:
			id := c.newOp(f, a, false)
			c.out.push(&opMsg{ID: id, Folder: f.i, Code: opRemove, Path: a.p, Expect: a.r})
		case actRemoteMove, actRemoteRename:
			id := c.newOp(f, a, false)
			c.out.push(&opMsg{ID: id, Folder: f.i, Code: opMove, Path: a.p, To: a.to, Expect: a.r})
			if a.do == actRemoteMove {
				c.conflict(f, a.p, a.to, "remote")
			}
		case actLocalRename:
			f.changed = true
			if _, _, err := f.t.move(a.p, a.to, a.l); err != nil {
				f.log.Debug("rename not applied; fetching the file instead", "path", a.p, "to", a.to, "err", err)
				f.noRename[a.p] = struct{}{}
			}
			f.markDirty(a.p)
			f.markDirty(a.to)
		case actLocalRm:
			_, err := f.t.remove(a.p, a.l)
			c.localStep(f, a, err)
		case actLocalMove:
			_, _, err := f.t.move(a.p, a.to, a.l)
			c.localStep(f, a, err)
			if err == nil {
				c.conflict(f, a.p, a.to, "local")
				f.markDirty(a.to)
			}
		}
	}
}

func (c *Client) localStep(f *cfolder, a action, err error) {
	f.changed = true
	if err != nil {
		op := &pendingOp{folder: f.i, path: a.p, pull: true, local: a.l, remote: a.r} // pull: applied on this side
		c.failed(f, op, failCode(err), err.Error(), f.t.get(a.p), f.remote[a.p])
		if failCode(err) != failChanged {
			return
		}
	}
	f.markDirty(a.p)
}

func (c *Client) conflict(f *cfolder, p, to, side string) {
	f.log.Warn("conflict: both sides changed; the other version is kept beside", "path", p, "copy", to, "side", side)
	f.conflicts = append(f.conflicts, Conflict{Path: p, Copy: to, Time: time.Now()})
	if len(f.conflicts) > maxListed {
		f.conflicts = f.conflicts[len(f.conflicts)-maxListed:]
	}
}

// setBase records that both sides agreed on e at p.
func (c *Client) setBase(f *cfolder, p string, e Entry) {
	if same(f.base[p], e) && (e.Kind != KindNone) == hasKey(f.base, p) {
		return
	}
	f.log.Debug("base set from an op", "path", p, "e", descE(e))
	setEntry(f.base, p, e)
	f.changed = true
}

func hasKey(m map[string]Entry, p string) bool { _, ok := m[p]; return ok }

// pairRenames turns the removal of a file on one side and the creation of a file with the same
// content (hash, size and executable bit) on the same side into one move on the other side, so a
// renamed or moved file is not sent again. A folder's rename becomes one move per file (the
// folders themselves are made and removed as usual). Which of several identical files pairs
// with which does not matter: the content is the same. Empty files gain nothing and are left as
// they are. A move that fails (the path changed meanwhile) puts its source in noRename: the
// next round removes and sends as without pairing.
func pairRenames(f *cfolder, plan []action) []action {
	type content struct {
		hash uint64
		size int64
		exec bool
	}
	key := func(e Entry) content { return content{e.Hash, e.Size, e.Exec} }
	renamable := func(e Entry, p string) bool {
		_, no := f.noRename[p]
		return e.Kind == KindFile && e.Size > 0 && !no
	}
	var gone [2]map[content][]int // [0]: removed here (remote removals), [1]: removed there
	for i, a := range plan {
		side, e := -1, Entry{}
		switch a.do {
		case actRemoteRm:
			side, e = 0, a.r
		case actLocalRm:
			side, e = 1, a.l
		}
		if side < 0 || !renamable(e, a.p) {
			continue
		}
		if gone[side] == nil {
			gone[side] = map[content][]int{}
		}
		gone[side][key(e)] = append(gone[side][key(e)], i)
	}
	if gone[0] == nil && gone[1] == nil {
		return plan
	}
	drop := make([]bool, len(plan))
	var moves []action
	for i, a := range plan {
		side, e := -1, Entry{}
		switch {
		case a.do == actPush && a.r.Kind == KindNone:
			side, e = 0, a.l
		case a.do == actPull && a.l.Kind == KindNone:
			side, e = 1, a.r
		}
		if side < 0 || !renamable(e, a.p) {
			continue
		}
		js := gone[side][key(e)]
		if len(js) == 0 {
			continue
		}
		j := js[0]
		gone[side][key(e)] = js[1:]
		drop[i], drop[j] = true, true
		rm := plan[j]
		if side == 0 {
			moves = append(moves, action{do: actRemoteRename, p: rm.p, to: a.p, l: rm.l, r: rm.r})
		} else {
			moves = append(moves, action{do: actLocalRename, p: rm.p, to: a.p, l: rm.l, r: rm.r})
		}
		f.log.Debug("sync rename", "path", rm.p, "to", a.p, "remote", side == 0)
	}
	if len(moves) == 0 {
		return plan
	}
	out := make([]action, 0, len(plan)-len(moves))
	for i, a := range plan {
		if !drop[i] {
			out = append(out, a)
		}
	}
	return append(out, moves...)
}

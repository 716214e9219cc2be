package filesync

// The client's reconciliation rounds: each dirty path goes through decide
// (decide.go), the verdicts become a plan of actions (renames paired, removals
// held, the plan checked by the safety rails in halt.go), and execute carries
// the plan out: local steps at once, remote ones as ops to the agent.

import (
	"sort"
	"strings"
	"time"
)

// action is one step of a reconciliation plan.
type action struct {
	do    byte // one of the act* constants
	p, to string
	// ln and rn are p's names on the local and the remote side: p itself
	// but for a name paired with its Unicode normalization twin (spelling).
	ln, rn string
	l, r   Entry
	e      Entry // the state to carry (pushes and pulls: decision.e)
	remove bool  // ordered with the removals (children before parents)
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
			f.folds, f.placed = [2]map[string]string{}, [2]map[string]string{}
			if !f.lcaps.foldNorm && !f.rcaps.foldNorm {
				for _, p := range paths {
					plan = c.reconcile(f, p, now, plan)
				}
			} else {
				// a name paired with its twin is reconciled under the
				// pair's key, once
				seen := make(map[string]struct{}, len(paths))
				for _, p := range paths {
					for _, k := range keysOf(p, f.lcaps, f.rcaps) {
						if _, ok := seen[k]; !ok {
							seen[k] = struct{}{}
							plan = c.reconcile(f, k, now, plan)
						}
					}
				}
			}
			plan = c.heldPartners(f, plan, now)
			plan = pairRenames(f, plan)
			plan = c.holdCreations(f, plan, now)
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
	sp := f.spell(p)
	ln, rn := sp.ioName(0), sp.ioName(1)
	var l, r Entry
	f.t.mu.Lock()
	if sp.name[0] != "" {
		l = f.t.idx[sp.name[0]]
	}
	if sp.name[1] != "" {
		r = f.remote[sp.name[1]]
	}
	ign := f.t.ignored(p, l.Kind == KindDir || r.Kind == KindDir)
	f.t.mu.Unlock()
	if ign {
		// ignored paths leave the sync: forgotten, never deleted
		delete(f.base, p)
		delete(f.remote, p)
		delete(f.remote, rn)
		delete(f.diff, p)
		delete(f.failed, p)
		return plan
	}
	b, hasBase := f.base[p]
	if f.failedAt(p, l, r) {
		f.diff[p] = struct{}{}
		return plan
	}
	d := decide(pathState{p: p, b: b, l: l, r: r, lc: f.lcaps, rc: f.rcaps,
		changedBelow: func(local bool) bool { return c.changedBelow(f, sp.ioName(sideIndex(local)), local) },
		twin: func(local bool) string {
			if t := sp.twin[sideIndex(local)]; t != "" {
				return t
			}
			return f.twin(p, local)
		}})
	if d.v == vAgree {
		if l.Kind == KindNone {
			if hasBase {
				f.log.Debug("base removed", "path", p)
				delete(f.base, p)
				f.changed = true
			}
		} else if !hasBase || !same(b, d.e) || b.MTime != d.e.MTime {
			f.log.Debug("base set", "path", p, "e", descE(d.e))
			f.base[p] = d.e
			f.changed = true
		}
		delete(f.diff, p)
		f.healed(p)
		return plan
	}
	f.diff[p] = struct{}{}
	switch d.v {
	case vPush:
		f.planned(rn, false)
		return append(plan, action{do: actPush, p: p, ln: ln, rn: rn, l: l, r: r, e: d.e})
	case vPull:
		f.planned(ln, true)
		return append(plan, action{do: actPull, p: p, ln: ln, rn: rn, l: l, r: r, e: d.e})
	case vRemoteRm:
		return append(plan, action{do: actRemoteRm, p: p, ln: ln, rn: rn, l: l, r: r, remove: true})
	case vLocalRm:
		return append(plan, action{do: actLocalRm, p: p, ln: ln, rn: rn, l: l, r: r, remove: true})
	case vRemoteAside:
		return append(plan, action{do: actRemoteMove, p: p, ln: ln, rn: rn, to: c.conflictCopy(f, p, "remote", now), l: l, r: r, remove: true})
	case vLocalAside:
		return append(plan, action{do: actLocalMove, p: p, ln: ln, rn: rn, to: c.conflictCopy(f, p, "local", now), l: l, r: r, remove: true})
	case vRefuse:
		c.refuse(f, p, l, r, d.why, false)
	case vClash:
		c.refuse(f, p, l, r, d.why, true)
	}
	return plan
}

// refuse leaves p as it is on both sides until either changes, and reports
// why once (a name clash as a conflict, anything else as an error).
func (c *Client) refuse(f *cfolder, p string, l, r Entry, why string, clash bool) {
	f.failed[p] = [2]Entry{l, r}
	if f.refused[p] == why {
		return // reported already
	}
	if f.refused == nil || len(f.refused) >= 10000 {
		f.refused = map[string]string{}
	}
	f.refused[p] = why
	if clash {
		if f.clash == nil {
			f.clash = map[string]struct{}{}
		}
		f.clash[p] = struct{}{}
		f.log.Warn("name clash: not synchronized", "path", p, "reason", why)
		f.addConflict(Conflict{Path: p, Reason: why, Time: time.Now()})
		return
	}
	f.log.Warn("path not synchronized", "path", p, "err", why)
	f.addErr(p, why)
}

func sideIndex(local bool) int {
	if local {
		return 0
	}
	return 1
}

// spell is where the path kept under key k lives on each side: k itself on
// both, but where a side folds Unicode form and k or a twin of it is paired
// (twinPair).
func (f *cfolder) spell(k string) spelling {
	if !f.lcaps.foldNorm && !f.rcaps.foldNorm {
		return spelling{key: k, name: [2]string{k, k}}
	}
	f.t.mu.Lock()
	defer f.t.mu.Unlock()
	return f.spellLocked(k)
}

// spellLocked is spell for callers holding f.t.mu. A path a folding side
// holds none of is created there in the folder it holds above it, under that
// folder's spelling there (placedLocked): a folder paired with its twin
// (decomposed here, composed in the container) gets its new files inside it,
// not in a second folder of the other spelling beside it (which a folding
// filesystem would not even make: it takes that name for the first).
func (f *cfolder) spellLocked(k string) spelling {
	has := f.hasLocked
	s := spellKey(k, twinPair(k, f.lcaps, f.rcaps, has, f.inBase, f.placedLocked), f.lcaps, f.rcaps, has)
	for side, c := range [2]caps{f.lcaps, f.rcaps} {
		if c.foldNorm && s.name[side] == "" && s.twin[side] == "" {
			if q := f.placedLocked(side, k); q != k {
				s.create[side] = q
			}
		}
	}
	return s
}

// placedLocked returns where side puts p, which it holds none of: in the
// folder it holds above p when that folder is spelled otherwise there (a
// normalization twin of p's folder), else p. A file or link of the folder's
// name there that changed since the base is no such folder: it goes aside as
// a conflict copy and the folder comes under its key. Callers hold f.t.mu.
func (f *cfolder) placedLocked(side int, p string) string {
	i := strings.LastIndexByte(p, '/')
	if i <= 0 || normTwins(p[:i]) == nil {
		return p // no folder above, or one with a single spelling
	}
	// Once per name and round: each folder above asks the one above it,
	// twice (its pair, its spelling), which is 2^depth without it.
	if q, ok := f.placed[side][p]; ok {
		return q
	}
	q := f.place(side, p, i)
	if f.placed[side] == nil {
		f.placed[side] = map[string]string{}
	}
	f.placed[side][p] = q
	return q
}

// place is placedLocked without the memo; i is the index of p's last slash.
func (f *cfolder) place(side int, p string, i int) string {
	dk := p[:i] // the folder's key: its pair's, when paired
	if pr := twinPair(dk, f.lcaps, f.rcaps, f.hasLocked, f.inBase, f.placedLocked); pr != nil {
		dk = pr.key
	}
	up := f.spellLocked(dk)
	dir := up.ioName(side)
	if q := up.name[side]; q != "" {
		// A folder, or what the other side's folder replaces in place
		// (unchanged since the base); else it goes aside as a conflict
		// copy and the folder comes under its key.
		if e := f.entryLocked(side == 0, q); e.Kind != KindDir && !(e.Kind != KindNone && same(e, f.base[up.key])) {
			dir = up.key
		}
	}
	if dir == p[:i] {
		return p
	}
	q := dir + p[i:]
	for _, tw := range normTwins(p) {
		if tw == q {
			return q
		}
	}
	return p // a name whose forms mix is not paired: it stays as it is
}

// entryLocked is what the local (or remote) side holds at q; callers hold
// f.t.mu.
func (f *cfolder) entryLocked(local bool, q string) Entry {
	if local {
		return f.t.idx[q]
	}
	return f.remote[q]
}

// hasLocked reports whether the local (or remote) side holds q; callers
// hold f.t.mu.
func (f *cfolder) hasLocked(local bool, q string) bool {
	if local {
		_, ok := f.t.idx[q]
		return ok
	}
	_, ok := f.remote[q]
	return ok
}

func (f *cfolder) inBase(q string) bool { _, ok := f.base[q]; return ok }

// twin returns the path other than p that the local (or remote) side holds
// and that its filesystem takes for the same name as p ("" when none). The
// name maps are built once per round, for a side that folds names only, and
// take the creations planned in the round (planned).
func (f *cfolder) twin(p string, local bool) string {
	i, c := 1, f.rcaps
	if local {
		i, c = 0, f.lcaps
	}
	if f.folds[i] == nil {
		if local {
			f.t.mu.Lock()
			f.folds[i] = foldMap(f.t.idx, c)
			f.t.mu.Unlock()
		} else {
			f.folds[i] = foldMap(f.remote, c)
		}
	}
	if q, ok := f.folds[i][c.nameKey(p)]; ok && q != p {
		return q
	}
	return ""
}

// twinChanged decides again the clashes with p's name (p changed: the twin
// may be gone or renamed).
func (f *cfolder) twinChanged(p string) {
	if len(f.clash) > 1000 {
		return // decided again when they change themselves
	}
	for q := range f.clash {
		if q == p {
			continue
		}
		if (f.lcaps.folds() && f.lcaps.nameKey(q) == f.lcaps.nameKey(p)) || (f.rcaps.folds() && f.rcaps.nameKey(q) == f.rcaps.nameKey(p)) {
			delete(f.failed, q)
			f.dirty[q] = struct{}{}
		}
	}
}

func foldMap(m map[string]Entry, c caps) map[string]string {
	out := make(map[string]string, len(m))
	for q := range m {
		out[c.nameKey(q)] = q
	}
	return out
}

// planned records that p is created on the local (or remote) side in this
// round, so a twin of it decided later in the round is not created too.
func (f *cfolder) planned(p string, local bool) {
	i, c := 1, f.rcaps
	if local {
		i, c = 0, f.lcaps
	}
	if f.folds[i] != nil {
		k := c.nameKey(p)
		if _, ok := f.folds[i][k]; !ok {
			f.folds[i][k] = p
		}
	}
}

// changedBelow reports whether the local (or remote) side holds a path below
// p that differs from the base.
func (c *Client) changedBelow(f *cfolder, p string, local bool) bool {
	pre := p + "/"
	if local {
		f.t.mu.Lock()
		defer f.t.mu.Unlock()
		for q, e := range f.t.idx {
			if strings.HasPrefix(q, pre) && !eqOn(e, f.base[q], f.lcaps.noExec) {
				return true
			}
		}
		return false
	}
	for q, e := range f.remote {
		if strings.HasPrefix(q, pre) && !eqOn(e, f.base[q], f.rcaps.noExec) {
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
	c.opsSinceCompact++
	id := c.nextID
	op := &pendingOp{folder: f.i, path: a.p, to: a.to, pull: pull, rename: a.do == actRemoteRename, local: a.l, remote: a.r, exec: a.e.Exec}
	if a.ln != a.p {
		op.lname = a.ln
	}
	if a.rn != a.p {
		op.rname = a.rn
	}
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
		if a.ln == "" {
			a.ln = a.p
		}
		if a.rn == "" {
			a.rn = a.p
		}
		f.log.Debug("sync action", "do", a.do, "path", a.p, "to", a.to, "local", descE(a.l), "remote", descE(a.r), "base", descE(f.base[a.p]))
		switch a.do {
		case actPush:
			c.push(f, c.newOp(f, a, false), a.p, a.ln, a.rn, a.l, a.r, a.e.Exec)
		case actPull:
			c.pull(f, c.newOp(f, a, true), a.p, a.ln, a.rn, a.l, a.r)
		case actRemoteRm:
			id := c.newOp(f, a, false)
			c.out.push(&opMsg{ID: id, Folder: f.i, Code: opRemove, Path: a.rn, Expect: a.r})
		case actRemoteMove, actRemoteRename:
			id := c.newOp(f, a, false)
			c.out.push(&opMsg{ID: id, Folder: f.i, Code: opMove, Path: a.rn, To: a.to, Expect: a.r})
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
			_, err := f.t.remove(a.ln, a.l)
			c.localStep(f, a, err)
		case actLocalMove:
			_, _, err := f.t.move(a.ln, a.to, a.l)
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
		c.failed(f, op, failCode(err), err.Error(), f.t.get(a.ln), f.remote[a.rn])
		if failCode(err) != failChanged {
			return
		}
	}
	f.markDirty(a.p)
}

func (c *Client) conflict(f *cfolder, p, to, side string) {
	f.log.Warn("conflict: both sides changed; the other version is kept beside", "path", p, "copy", to, "side", side)
	f.addConflict(Conflict{Path: p, Copy: to, Time: time.Now()})
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

// creates tells whether a carries a path created on one side to the other,
// where it is not yet: the side it was created on (0 here: a push, 1 there:
// a pull; -1 for any other action) and what was created.
func (a action) creates() (side int, e Entry) {
	switch {
	case a.do == actPush && a.r.Kind == KindNone:
		return 0, a.l
	case a.do == actPull && a.l.Kind == KindNone:
		return 1, a.r
	}
	return -1, Entry{}
}

// heldPartners brings removals held by holdRemovals back into a plan that creates a file of the
// same content on the same side, so that pairRenames makes the two one move: a file moved into
// a folder made just before can reach the engine as its removal in one watcher batch and its
// creation in the next (found when the new folder is watched and scanned), and was then sent
// again whole. A removal brought back and not paired is held again.
func (c *Client) heldPartners(f *cfolder, plan []action, now time.Time) []action {
	if len(f.held) == 0 {
		return plan
	}
	type content struct {
		hash uint64
		size int64
	}
	var created [2]map[content]bool // [0]: created here (pushes), [1]: created there (pulls)
	for _, a := range plan {
		side, e := a.creates()
		if side < 0 || e.Kind != KindFile || e.Size == 0 {
			continue
		}
		if created[side] == nil {
			created[side] = map[content]bool{}
		}
		created[side][content{e.Hash, e.Size}] = true
	}
	if created[0] == nil && created[1] == nil {
		return plan
	}
	for q := range f.held {
		f.t.mu.Lock()
		l := f.t.idx[q]
		f.t.mu.Unlock()
		r := f.remote[q]
		if !(l.Kind == KindNone && r.Kind == KindFile && created[0][content{r.Hash, r.Size}]) &&
			!(r.Kind == KindNone && l.Kind == KindFile && created[1][content{l.Hash, l.Size}]) {
			continue // still a removal of content nothing here creates
		}
		for _, a := range c.reconcile(f, q, now, nil) {
			side, e := -1, Entry{}
			switch a.do {
			case actRemoteRm:
				side, e = 0, a.r
			case actLocalRm:
				side, e = 1, a.l
			}
			if side >= 0 && created[side][content{e.Hash, e.Size}] {
				delete(f.held, q)
				plan = append(plan, a)
			}
		}
	}
	return plan
}

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
	// Exec bits count where both sides keep them (a move keeps the file's own).
	withExec := !f.lcaps.noExec && !f.rcaps.noExec
	key := func(e Entry) content { return content{e.Hash, e.Size, e.Exec && withExec} }
	renamable := func(e Entry, a action) bool {
		_, no := f.noRename[a.p]
		// a name paired with its normalization twin is not renamed
		same := (a.ln == "" || a.ln == a.p) && (a.rn == "" || a.rn == a.p)
		return e.Kind == KindFile && e.Size > 0 && !no && same
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
		if side < 0 || !renamable(e, a) {
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
		if side < 0 || !renamable(e, a) {
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
			moves = append(moves, action{do: actRemoteRename, p: rm.p, ln: rm.p, rn: rm.p, to: a.p, l: rm.l, r: rm.r})
		} else {
			moves = append(moves, action{do: actLocalRename, p: rm.p, ln: rm.p, rn: rm.p, to: a.p, l: rm.l, r: rm.r})
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

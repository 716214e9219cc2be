package filesync

// The client's engine events: what the agent reports (its index and
// changes, results of operations, notices), what this side's watcher and
// rescans find, and local operations ending. Each marks paths dirty for the
// next round (reconcile.go) or records a failure (retried, retry.go).

import (
	"errors"
	"fmt"
	"time"
)

// agree reports whether a local and a remote entry hold the same, exec
// bits compared only where both sides keep them.
func (f *cfolder) agree(l, r Entry) bool {
	return eqOn(l, r, f.lcaps.noExec || f.rcaps.noExec)
}

// markDirty queues p for reconciliation; a folder above it that failed (a
// removal of a non-empty folder) is tried again too, and so are paths below.
func (f *cfolder) markDirty(p string) {
	f.dirty[p] = struct{}{}
	if len(f.clash) > 0 {
		f.twinChanged(p)
	}
	// Paths below p that failed (their folder was a file there) are tried
	// again too.
	if n := len(f.failed); n > 0 && n < 10000 {
		for q := range f.failed {
			if len(q) > len(p) && q[len(p)] == '/' && q[:len(p)] == p {
				delete(f.failed, q)
				f.dirty[q] = struct{}{}
			}
		}
	}
	for i := len(p) - 1; i > 0; i-- {
		if p[i] == '/' {
			if _, ok := f.failed[p[:i]]; ok {
				delete(f.failed, p[:i])
				f.dirty[p[:i]] = struct{}{}
			}
		}
	}
}

func (c *Client) handle(ev any) {
	switch m := ev.(type) {
	case *entriesMsg:
		if m.Folder >= len(c.folders) {
			return
		}
		f := c.folders[m.Folder]
		now := time.Now()
		if m.Full && f.fullNext == nil {
			f.fullNext = map[string]Entry{}
		}
		for _, it := range m.Items {
			if err := checkPath(it.Path); err != nil {
				f.log.Warn("refused path from the agent", "path", it.Path, "err", err)
				f.addErr(it.Path, "refused from the agent: "+err.Error())
				continue
			}
			if m.Full {
				if it.E.Kind != KindNone {
					f.fullNext[it.Path] = it.E
				}
				continue
			}
			f.log.Debug("remote entry", "path", it.Path, "e", descE(it.E))
			if it.E.Kind == KindNone {
				delete(f.remote, it.Path)
			} else {
				f.remote[it.Path] = it.E
			}
			c.remoteChanged(f, it.Path, now)
		}
		if m.Full && m.Done {
			f.fullsDone++
			if f.fullsDone < f.rulesSent {
				// the answer to rules that were replaced since: the
				// answer to the newest follows
				f.fullNext = nil
				return
			}
			old := f.remote
			f.remote, f.fullNext = f.fullNext, nil
			for p := range old {
				f.markDirty(p)
			}
			for p := range f.remote {
				f.markDirty(p)
			}
			for p := range f.base {
				f.markDirty(p)
			}
			for p := range f.t.snapshot() {
				f.markDirty(p)
			}
			if !f.remoteReady {
				f.log.Info("remote index received", "entries", len(f.remote), "after", time.Since(c.start))
			}
			f.remoteReady = true
		}
	case *resultMsg:
		op := c.ops[m.ID]
		if op == nil {
			return
		}
		delete(c.ops, m.ID)
		f := c.folders[op.folder]
		c.getsMu.Lock()
		delete(c.gets, m.ID)
		c.getsMu.Unlock()
		c.finish(f, m.ID, op)
		c.deltaDone(m.ID, op.path, m.OK)
		setEntry(f.remote, op.rpath(), m.State)
		if op.to != "" {
			setEntry(f.remote, op.to, m.ToState)
		}
		f.log.Debug("sync result", "id", m.ID, "path", op.path, "ok", m.OK, "state", descE(m.State), "err", m.Err)
		if !m.OK && op.rename {
			// Both paths were marked again (finish): they are reconciled as a removal and a
			// creation, which fail or succeed on their own.
			f.log.Debug("rename not applied; sending the file instead", "path", op.path, "to", op.to, "err", m.Err)
			f.noRename[op.path] = struct{}{}
		} else if !m.OK {
			c.failed(f, op, m.Code, m.Err, f.t.get(op.lpath()), m.State)
		} else if op.to == "" && f.agree(op.local, m.State) {
			// The agent now holds what this side held when the op was
			// decided (pushed, removed): both agreed on it, whatever this
			// side became since. Without this, an edit made while its
			// previous version was being pushed looked like a conflict.
			c.setBase(f, op.path, agreed(f.base[op.path], op.local, m.State, f.lcaps, f.rcaps))
		}
	case *localDone:
		op := c.ops[m.id]
		if op == nil {
			return
		}
		delete(c.ops, m.id)
		f := c.folders[op.folder]
		c.getsMu.Lock()
		delete(c.gets, m.id)
		c.getsMu.Unlock()
		c.finish(f, m.id, op)
		c.deltaDone(m.id, op.path, m.err == nil)
		f.log.Debug("sync local done", "id", m.id, "path", op.path, "pull", op.pull, "state", descE(m.state), "err", m.err)
		if err := asVanished(op.lpath(), m.err); errors.Is(err, errVanished) {
			// A folder above the path went away here meanwhile: the index
			// learns it now and the path is reconciled again (finish marked
			// it); only when nothing changed does it wait as a failure.
			if c.rescanLocal(f, ancestors(op.lpath())) > 0 {
				break
			}
			c.failed(f, op, failChanged, err.Error(), f.t.get(op.lpath()), f.remote[op.rpath()])
			if errors.Is(err, errTwin) {
				// Nothing at the path changes for it: the twin came by
				// another path. Decided again in 0.5 s (then backing off),
				// with the twin in the index by then.
				c.scheduleRetry(f, op.path, time.Now())
			}
		} else if m.err != nil {
			code := failCode(m.err)
			if !op.pull {
				code = failChanged // the local path changed before it could be sent
			}
			c.failed(f, op, code, m.err.Error(), f.t.get(op.lpath()), f.remote[op.rpath()])
		} else if op.pull && f.agree(m.state, op.remote) {
			// This side now holds the agent's version it was decided from.
			c.setBase(f, op.path, agreed(f.base[op.path], m.state, op.remote, f.lcaps, f.rcaps))
		}
	case *noticeMsg:
		if m.Folder < len(c.folders) {
			f := c.folders[m.Folder]
			f.log.Warn("notice from the agent", "text", m.Text)
			f.addErr("", m.Text)
		}
	case *watchBatch:
		f := c.folders[m.folder]
		var changed []item
		rules := m.paths == nil
		if !rules {
			paths := c.settleLocal(f, m.paths, time.Now())
			if len(paths) == 0 {
				break
			}
			changed, rules = f.t.scanPaths(paths)
			c.scanErr(f, errors.Join(f.t.takeScanErrs()...))
		}
		if rules {
			f.t.mu.Lock()
			before := f.t.rules
			f.t.mu.Unlock()
			var err error
			changed, err = f.t.scanAll(false, nil)
			c.scanErr(f, err)
			f.t.mu.Lock()
			after := f.t.rules
			f.t.mu.Unlock()
			if !sameRules(before, after) {
				f.log.Info("ignore rules changed")
				c.sendRules(f) // the agent rescans with them and resends its index
			}
		}
		c.localChanged(f, changed)
	}
}

// rescanLocal rescans paths of f and queues what changed; it returns how
// many paths changed.
func (c *Client) rescanLocal(f *cfolder, paths []string) int {
	changed, _ := f.t.scanPaths(paths)
	c.scanErr(f, errors.Join(f.t.takeScanErrs()...))
	return c.localChanged(f, changed)
}

// localChanged queues what a local scan found changed (and watches new
// folders); it returns how many paths changed.
func (c *Client) localChanged(f *cfolder, changed []item) int {
	now := time.Now()
	if len(changed) > 0 {
		c.wakeAt(now.Add(settleForget)) // the settler forgets them by then
	}
	for _, it := range changed {
		if it.E.Kind == KindFile {
			f.settle[0].seen(it.Path, now)
		}
		f.log.Debug("local entry", "path", it.Path, "e", descE(it.E))
		f.markDirty(it.Path)
		if it.E.Kind == KindDir && f.w != nil {
			f.w.add(it.Path)
		}
	}
	if len(changed) > 0 {
		f.changed = true
	}
	return len(changed)
}

func setEntry(m map[string]Entry, p string, e Entry) {
	if e.Kind == KindNone {
		delete(m, p)
	} else {
		m[p] = e
	}
}

func (c *Client) finish(f *cfolder, id uint64, op *pendingOp) {
	for _, p := range []string{op.path, op.to} {
		if p != "" && f.inflight[p] == id {
			delete(f.inflight, p)
			f.markDirty(p)
		}
	}
}

// failed remembers an op that did not apply. A path that changed meanwhile
// is simply reconciled again; otherwise it waits until either side changes,
// and the error is reported (a non-empty folder waits silently for its
// content to settle).
func (c *Client) failed(f *cfolder, op *pendingOp, code byte, msg string, l, r Entry) {
	if code == failChanged && (!same(l, op.local) || !same(r, op.remote)) {
		return
	}
	f.failed[op.path] = [2]Entry{l, r}
	if code == failNotEmpty {
		c.unblock(f, op)
		return
	}
	if code == failChanged {
		return
	}
	if code == failOther {
		// permission denied, a read-only or full filesystem...: tried
		// again later, so fixing the cause heals it
		c.scheduleRetry(f, op.path, time.Now())
	}
	f.log.Warn("path not synchronized", "path", op.path, "err", msg)
	f.addErr(op.path, msg)
}

func sameRules(a, b []ruleFile) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// descE describes an entry for debug logs (never content).
func descE(e Entry) string {
	switch e.Kind {
	case KindNone:
		return "-"
	case KindFile:
		return fmt.Sprintf("f:%d:%x", e.Size, e.Hash)
	}
	return e.Kind.String()
}

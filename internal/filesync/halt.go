package filesync

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"
)

// Safety rails: conditions under which a folder's synchronization stops
// (halts) before deleting anything, because what one side shows is more
// likely an accident than the user's wish: its root is emptied (a share or
// disk not mounted, a folder restored empty, `rm -rf` of the folder), the
// root was replaced by another folder (another device or inode than the one
// the base was agreed with), the root is gone, or one round would delete
// most of a side's files. A halted folder decides nothing more in its
// session; the next session (a reconnect, the next `up`) checks again, so a
// remounted share simply goes on. To go on otherwise: restore from the other
// side (ClientOptions.Reset: nothing is deleted, each side gets what it
// lacks), or accept the deletions (ClientOptions.AcceptDeletions).
const (
	// A window of massDeleteWindow in which removals on one side reach
	// massDeleteMin files and more than massDeleteFraction of the files that
	// side held halts the folder.
	massDeleteMin      = 20
	massDeleteFraction = 0.5
	massDeleteWindow   = 10 * time.Second
)

// holdQuiet is how long removals must stop coming before those held are
// carried out (see holdRemovals).
const holdQuiet = 500 * time.Millisecond

// holdRemovals takes the removals out of a plan made once the first
// synchronization is done, and holds them until none came for holdQuiet:
// a `rm -rf` arrives as many watcher batches, and only all of them together
// show that a folder is being emptied (which halts it) rather than a few
// files deleted. Other steps go on at once; a removal waits at most as long
// as removals keep coming on either side.
func (c *Client) holdRemovals(f *cfolder, plan []action, now time.Time) []action {
	if !f.done || f.release {
		f.release = false
		return plan
	}
	out := plan[:0]
	held := false
	for _, a := range plan {
		if _, now := f.unheld[a.p]; now {
			delete(f.unheld, a.p)
			out = append(out, a)
			continue
		}
		if a.do == actLocalRm || a.do == actRemoteRm {
			f.held[a.p] = struct{}{}
			held = true
			continue
		}
		out = append(out, a)
	}
	if held {
		f.heldAt = now
		c.wakeAt(now.Add(holdQuiet))
	}
	return out
}

// unblock handles a folder that could not be replaced because it is not
// empty (op failed with failNotEmpty): held removals below it are what
// blocks it, so they go now (still checked by checkHalt); a folder already
// emptied meanwhile (its removals went before the failure came back) is
// tried again at once instead of waiting for a change.
func (c *Client) unblock(f *cfolder, op *pendingOp) {
	var below map[string]Entry
	if op.pull {
		below = f.t.snapshot()
	} else {
		below = f.remote
	}
	empty := true
	for q := range below {
		if q == op.path || !isUnder(q, op.path) {
			continue
		}
		empty = false
		if _, ok := f.held[q]; ok {
			delete(f.held, q)
			if f.unheld == nil {
				f.unheld = map[string]struct{}{}
			}
			f.unheld[q] = struct{}{}
			f.markDirty(q)
		}
	}
	if empty && !f.retried[op.path] {
		// Once: a folder that holds only ignored content stays not empty,
		// and waits for a change as before.
		if f.retried == nil {
			f.retried = map[string]bool{}
		}
		f.retried[op.path] = true
		delete(f.failed, op.path)
		f.markDirty(op.path)
	}
}

// releaseHeld reconciles the held removals again, carried out this time,
// once none came for holdQuiet.
func (c *Client) releaseHeld(now time.Time) {
	for _, f := range c.folders {
		if len(f.held) == 0 {
			continue
		}
		if at := f.heldAt.Add(holdQuiet); now.Before(at) {
			c.wakeAt(at)
			continue
		}
		for p := range f.held {
			f.markDirty(p)
		}
		f.held = map[string]struct{}{}
		f.release = true
	}
}

// halt stops f's synchronization with msg (the first reason is kept).
func (c *Client) halt(f *cfolder, msg string) {
	if f.halt != "" {
		return
	}
	f.halt = msg
	f.dirty = map[string]struct{}{}
	f.log.Error("sync halted: nothing is deleted until this is resolved", "reason", msg)
}

// checkHalt looks at a plan about to be carried out for f and halts f
// instead when it deletes what should not be deleted without asking. It
// returns whether f is halted.
func (c *Client) checkHalt(f *cfolder, plan []action, now time.Time) bool {
	if f.halt != "" {
		return true
	}
	if c.opts.AcceptDeletions {
		return false
	}
	var rm [2]int // files removed here (local), there (remote)
	anyRm := [2]bool{}
	for _, a := range plan {
		switch a.do {
		case actLocalRm:
			anyRm[0] = true
			if a.l.Kind != KindDir {
				rm[0]++
			}
		case actRemoteRm:
			anyRm[1] = true
			if a.r.Kind != KindDir {
				rm[1]++
			}
		}
	}
	if !anyRm[0] && !anyRm[1] {
		return false
	}
	f.t.mu.Lock()
	localAll, localFiles := len(f.t.idx), countFiles(f.t.idx)
	f.t.mu.Unlock()
	remoteAll, remoteFiles := len(f.remote), countFiles(f.remote)
	baseFiles := countFiles(f.base)
	switch {
	case anyRm[1] && localAll == 0 && len(f.base) > 0:
		c.halt(f, fmt.Sprintf("the local folder %s is empty, but the last synchronization left %d files in it: "+
			"taken for an accident (a disk or share not mounted, a folder restored empty), not for %d deletions in %s. %s",
			f.f.Local, baseFiles, baseFiles, f.f.Remote, howToGoOn("local", f)))
		return true
	case anyRm[0] && remoteAll == 0 && len(f.base) > 0:
		c.halt(f, fmt.Sprintf("the folder %s in the dev container is empty, but the last synchronization left %d files in it: "+
			"taken for an accident, not for %d deletions in %s. %s",
			f.f.Remote, baseFiles, baseFiles, f.f.Local, howToGoOn("remote", f)))
		return true
	}
	if now.Sub(f.rmSince) > massDeleteWindow {
		f.rmSince, f.rmCount = now, [2]int{}
	}
	held := [2]int{localFiles, remoteFiles}
	where := [2]string{f.f.Local, f.f.Remote}
	for side := 0; side < 2; side++ {
		total := f.rmCount[side] + rm[side]
		before := held[side] + f.rmCount[side]
		if total >= massDeleteMin && float64(total) > massDeleteFraction*float64(before) {
			other := "in the dev container"
			if side == 1 {
				other = "locally"
			}
			c.halt(f, fmt.Sprintf("%d of the %d files in %s would be deleted within %v (deleted %s): "+
				"taken for an accident, not applied. %s", total, before, where[side], massDeleteWindow, other,
				howToGoOn([2]string{"remote", "local"}[side], f)))
			return true
		}
	}
	f.rmCount[0] += rm[0]
	f.rmCount[1] += rm[1]
	return false
}

// howToGoOn tells how to resolve a halt; source is the side whose state
// would have been carried over ("local" or "remote").
func howToGoOn(source string, f *cfolder) string {
	other := map[string]string{"local": "the dev container", "remote": "this machine"}[source]
	return fmt.Sprintf("To restore the files from %s, run `devtool up --reset` (nothing is deleted; each side gets what it lacks). "+
		"To carry the deletions over, delete the same files on %s yourself, or start the sync with deletions accepted.", other, other)
}

func countFiles(m map[string]Entry) int {
	n := 0
	for _, e := range m {
		if e.Kind != KindDir {
			n++
		}
	}
	return n
}

// sameRoot tells whether two root identities (see rootIdentity: fields
// "dev=", "ino=", "born=") name the same folder. Only fields both carry are
// compared: an identity saved by an older release, or taken where the birth
// time is unknown, is compared by device and inode alone.
func sameRoot(a, b string) bool {
	fa, fb := rootFields(a), rootFields(b)
	n := 0
	for k, v := range fa {
		if w, ok := fb[k]; ok {
			if v != w {
				return false
			}
			n++
		}
	}
	return n > 0 || a == b
}

func rootFields(id string) map[string]string {
	m := map[string]string{}
	for _, f := range strings.Fields(id) {
		if k, v, ok := strings.Cut(f, "="); ok {
			m[k] = v
		}
	}
	return m
}

func loadRootID(file string) string {
	b, err := os.ReadFile(file)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// checkLocalRoot halts f when its local root is gone or another folder than
// the one its base was agreed with. It returns whether f is halted.
func (c *Client) checkLocalRoot(f *cfolder, openErr error) bool {
	if openErr != nil {
		if errors.Is(openErr, fs.ErrNotExist) && len(f.base) > 0 {
			c.halt(f, fmt.Sprintf("the local folder %s is gone (the last synchronization left %d files in it): nothing is deleted in %s. "+
				"Make the folder again (or mount it) and start again; %s", f.f.Local, countFiles(f.base), f.f.Remote, howToGoOn("local", f)))
			return true
		}
		return false
	}
	id := rootIdentity(f.f.Local)
	f.rootID = id
	if f.file == "" || id == "" || c.opts.AcceptDeletions || len(f.base) == 0 {
		return false
	}
	if saved := loadRootID(f.file + ".root"); saved != "" && !sameRoot(saved, id) {
		c.halt(f, fmt.Sprintf("the local folder %s is another folder than the one last synchronized (%s, was %s: deleted and made again, or another disk mounted there): "+
			"its missing files are not taken for deletions in %s. %s", f.f.Local, id, saved, f.f.Remote, howToGoOn("local", f)))
		return true
	}
	return false
}

// newFolderHold is how long a file created in a folder created in the same
// round waits for the removal it may pair with (see holdCreations).
const newFolderHold = 100 * time.Millisecond

// holdCreations holds, once the first synchronization is done, the
// creations of files inside a folder that the same plan creates, for
// newFolderHold. A file moved into a folder made just before is found when
// the watcher reads the new folder, which can be before it processes the
// removal from the old place: the creation then reached the engine first,
// and the file was sent again whole. Held, it is still here when the
// removal comes (held by holdRemovals), and heldPartners makes the two one
// move when it is released. A file held once goes in the next round, paired
// or not; a creation paired already (a move in this plan) is not held.
func (c *Client) holdCreations(f *cfolder, plan []action, now time.Time) []action {
	released := f.newReleased // released since the last round: they go now
	f.newReleased = nil
	if !f.done || len(plan) < 2 {
		return plan
	}
	var newDirs [2]map[string]bool // folders created here ([0], pushed) and there ([1], pulled)
	for _, a := range plan {
		if side, e := a.creates(); side >= 0 && e.Kind == KindDir {
			if newDirs[side] == nil {
				newDirs[side] = map[string]bool{}
			}
			newDirs[side][a.p] = true
		}
	}
	if newDirs[0] == nil && newDirs[1] == nil {
		return plan
	}
	out := plan[:0]
	held := false
	for _, a := range plan {
		side, e := a.creates()
		if side < 0 || e.Kind != KindFile || e.Size == 0 || !newDirs[side][dirOf(a.p)] {
			out = append(out, a)
			continue
		}
		if _, ok := released[a.p]; ok {
			out = append(out, a) // held once already
			continue
		}
		if f.newHeld == nil {
			f.newHeld = map[string]time.Time{}
		}
		if _, ok := f.newHeld[a.p]; !ok {
			f.newHeld[a.p] = now.Add(newFolderHold)
		}
		held = true
	}
	if held {
		c.wakeAt(now.Add(newFolderHold))
	}
	return out
}

// releaseCreations reconciles again, not held this time, the creations
// held by holdCreations whose time came.
func (c *Client) releaseCreations(now time.Time) {
	for _, f := range c.folders {
		var next time.Time
		for p, at := range f.newHeld {
			if now.Before(at) {
				next = earliest(next, at)
				continue
			}
			delete(f.newHeld, p)
			if f.newReleased == nil {
				f.newReleased = map[string]struct{}{}
			}
			f.newReleased[p] = struct{}{}
			f.markDirty(p)
		}
		if !next.IsZero() {
			c.wakeAt(next)
		}
	}
}

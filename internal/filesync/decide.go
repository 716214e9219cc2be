package filesync

// The decision core: what to do with one path from its base (the state both
// sides last agreed on), local and remote entries. Pure: no locks, no I/O, no
// clock; what it needs of the trees around the path comes as a function.
// The client (reconcile) turns verdicts into actions; scanning, applying,
// the event loop and the safety rails (halt.go) are around it.

// verdict is what decide chose for a path.
type verdict uint8

const (
	vAgree       verdict = iota // both sides hold the same: the base becomes it
	vPush                       // carry the local state to the remote (a file, folder or link)
	vPull                       // carry the remote state here
	vRemoteRm                   // removed here: remove it there
	vLocalRm                    // removed there: remove it here
	vRemoteAside                // conflict: the remote version is moved aside (a conflict copy), the local one takes the name
	vLocalAside                 // conflict: the local version is moved aside, the remote one takes the name
	vRefuse                     // leave both sides as they are (why says so); decided again when either changes
)

func (v verdict) String() string {
	return [...]string{"agree", "push", "pull", "remote-rm", "local-rm", "remote-aside", "local-aside", "refuse"}[v]
}

// decision is decide's answer.
type decision struct {
	v   verdict
	why string // for vRefuse
}

// decide chooses what to do with p. changedBelow(local) reports whether the
// local (or remote) side holds a path below p that differs from the base; it
// is asked only when a folder would be replaced by a file or link.
//
// Rules: equal sides agree; a side that differs from the base while the
// other does not is carried over; when both changed, an edit wins over a
// removal, a folder wins over a file or link (moved aside), and of two
// versions the local one keeps the name while the remote one is moved
// aside. A folder holding changes is never replaced by a file or link (the
// file or link is moved aside instead). A symlink leaving the folder is
// never carried over.
func decide(p string, b, l, r Entry, changedBelow func(local bool) bool) decision {
	if same(l, r) {
		return decision{v: vAgree}
	}
	lc, rc := !same(b, l), !same(b, r)
	switch {
	case lc && !rc:
		return carry(p, l, r, true, changedBelow)
	case rc && !lc:
		return carry(p, l, r, false, changedBelow)
	}
	// Both changed.
	switch {
	case l.Kind == KindNone: // removed here, changed there: the change wins
		return carry(p, l, r, false, changedBelow)
	case r.Kind == KindNone:
		return carry(p, l, r, true, changedBelow)
	case l.Kind == KindDir: // a folder here, a file or link there: keep the folder
		return decision{v: vRemoteAside}
	case r.Kind == KindDir:
		return decision{v: vLocalAside}
	}
	return decision{v: vRemoteAside}
}

// carry carries one side's state of p to the other.
func carry(p string, l, r Entry, toRemote bool, changedBelow func(local bool) bool) decision {
	src, dst := l, r
	if !toRemote {
		src, dst = r, l
	}
	if src.Kind == KindNone {
		if toRemote {
			return decision{v: vRemoteRm}
		}
		return decision{v: vLocalRm}
	}
	if src.Kind == KindSymlink && linkEscapes(p, src.Target) {
		// Never made on the other side: a link out of the folder there
		// would let that side reach what is outside it.
		return decision{v: vRefuse, why: "symlink to " + src.Target + " leaves the synchronized folder: not created on the other side"}
	}
	if dst.Kind == KindDir && src.Kind != KindDir && changedBelow(!toRemote) {
		// The folder being replaced holds changes of its own: keep it, and
		// keep the file or link that would replace it beside it.
		if toRemote {
			return decision{v: vLocalAside}
		}
		return decision{v: vRemoteAside}
	}
	if toRemote {
		return decision{v: vPush}
	}
	return decision{v: vPull}
}

package filesync

// The decision core: what to do with one path from its base (the state both
// sides last agreed on), local and remote entries, and what each side's
// filesystem can hold. Pure: no locks, no I/O, no clock (mtimes never
// count); what it needs of the trees around the path comes as functions.
// The client (reconcile.go) turns verdicts into actions; scanning, applying,
// the event loop and the safety rails (halt.go) are around it.

// verdict is what decide chose for a path.
type verdict uint8

const (
	vAgree       verdict = iota // both sides hold the same: the base becomes decision.e
	vPush                       // carry the local state (decision.e) to the remote (a file, folder or link)
	vPull                       // carry the remote state (decision.e) here
	vRemoteRm                   // removed here: remove it there
	vLocalRm                    // removed there: remove it here
	vRemoteAside                // conflict: the remote version is moved aside (a conflict copy), the local one takes the name
	vLocalAside                 // conflict: the local version is moved aside, the remote one takes the name
	vRefuse                     // leave both sides as they are (why says so); decided again when either changes
	vClash                      // like vRefuse, for a name the receiving side takes for another one (reported as a conflict)
)

func (v verdict) String() string {
	return [...]string{"agree", "push", "pull", "remote-rm", "local-rm", "remote-aside", "local-aside", "refuse", "clash"}[v]
}

// decision is decide's answer.
type decision struct {
	v verdict
	// e is, for vAgree, the new base; for vPush and vPull, the state to
	// carry (its exec bit chosen for the receiving side, see carriedExec).
	e   Entry
	why string // for vRefuse and vClash
}

// pathState is everything decide looks at for one path.
type pathState struct {
	p       string
	b, l, r Entry
	lc, rc  caps // what the local and remote filesystems keep
	// changedBelow(local) reports whether the local (or remote) side holds
	// a path below p that differs from the base; asked only when a folder
	// would be replaced by a file or link.
	changedBelow func(local bool) bool
	// twin(local) returns a path other than p that the local (or remote)
	// side holds and that its filesystem takes for the same name as p
	// ("" when none); asked only when p would be created on a side that
	// folds case or Unicode form.
	twin func(local bool) string
}

// eqOn reports whether a (an entry of a side with caps c) holds the same as
// b: as same, except that an exec bit is not compared where c cannot keep
// one (every file on such a side reads the same).
func eqOn(a, b Entry, noExec bool) bool {
	if noExec && a.Kind == KindFile && b.Kind == KindFile {
		return a.Hash == b.Hash && a.Size == b.Size
	}
	return same(a, b)
}

// decide chooses what to do with s.p.
//
// Rules: equal sides agree; a side that differs from the base while the
// other does not is carried over; when both changed, an edit wins over a
// removal, a folder wins over a file or link (moved aside), and of two
// versions the local one keeps the name while the remote one is moved
// aside. A folder holding changes is never replaced by a file or link (the
// file or link is moved aside instead). A symlink leaving the folder is
// never carried over, nor a symlink to a side without symlinks, nor a name
// to a side that holds its case or normalization twin. An exec bit read on
// a side that cannot keep one is never compared nor carried: a file from
// such a side takes the exec bit its other side (or the base) had.
func decide(s pathState) decision {
	ignoreExec := s.lc.noExec || s.rc.noExec
	if eqOn(s.l, s.r, ignoreExec) {
		return decision{v: vAgree, e: agreed(s.b, s.l, s.r, s.lc, s.rc)}
	}
	lc, rc := !eqOn(s.l, s.b, s.lc.noExec), !eqOn(s.r, s.b, s.rc.noExec)
	switch {
	case lc && !rc:
		return carry(s, true)
	case rc && !lc:
		return carry(s, false)
	}
	// Both changed.
	switch {
	case s.l.Kind == KindNone: // removed here, changed there: the change wins
		return carry(s, false)
	case s.r.Kind == KindNone:
		return carry(s, true)
	case s.l.Kind == KindDir: // a folder here, a file or link there: keep the folder
		return decision{v: vRemoteAside}
	case s.r.Kind == KindDir:
		return decision{v: vLocalAside}
	}
	return decision{v: vRemoteAside}
}

// carry carries one side's state of s.p to the other.
func carry(s pathState, toRemote bool) decision {
	src, dst, dc, side := s.l, s.r, s.rc, "the dev container"
	if !toRemote {
		src, dst, dc, side = s.r, s.l, s.lc, "this machine"
	}
	if src.Kind == KindNone {
		if toRemote {
			return decision{v: vRemoteRm}
		}
		return decision{v: vLocalRm}
	}
	if src.Kind == KindSymlink && linkEscapes(s.p, src.Target) {
		// Never made on the other side: a link out of the folder there
		// would let that side reach what is outside it.
		return decision{v: vRefuse, why: "symlink to " + src.Target + " leaves the synchronized folder: not created on the other side"}
	}
	if src.Kind == KindSymlink && dc.noLinks {
		return decision{v: vRefuse, why: "symlink to " + src.Target + " not created on " + side + ": its filesystem cannot hold symlinks"}
	}
	if dst.Kind == KindDir && src.Kind != KindDir && s.changedBelow(!toRemote) {
		// The folder being replaced holds changes of its own: keep it, and
		// keep the file or link that would replace it beside it.
		if toRemote {
			return decision{v: vLocalAside}
		}
		return decision{v: vRemoteAside}
	}
	if dst.Kind == KindNone && dc.folds() {
		if q := s.twin(!toRemote); q != "" {
			return decision{v: vClash, why: "not created on " + side + ": its filesystem takes it for " + q +
				" (the names differ only in case or Unicode form); rename one of them"}
		}
	}
	e := src
	if e.Kind == KindFile {
		e.Exec = carriedExec(s, toRemote)
	}
	if toRemote {
		return decision{v: vPush, e: e}
	}
	return decision{v: vPull, e: e}
}

// carriedExec is the exec bit a file carried from one side takes on the
// other: its own where its side keeps exec bits; else the receiving side's
// (where that side keeps them and has a file there), else the base's: a
// side without exec bits never sets nor clears one.
func carriedExec(s pathState, toRemote bool) bool {
	src, dst, sc, dc := s.l, s.r, s.lc, s.rc
	if !toRemote {
		src, dst, sc, dc = s.r, s.l, s.rc, s.lc
	}
	switch {
	case !sc.noExec:
		return src.Exec
	case dst.Kind == KindFile && !dc.noExec:
		return dst.Exec
	case s.b.Kind == KindFile:
		return s.b.Exec
	}
	return false
}

// agreed is the base recorded when both sides hold the same (l and r,
// equal but for exec bits a side cannot keep): the local entry with the
// exec bit of a side that keeps them, the base's where neither does.
func agreed(b, l, r Entry, lc, rc caps) Entry {
	e := l
	if e.Kind != KindFile {
		return e
	}
	switch {
	case !lc.noExec:
	case !rc.noExec:
		e.Exec = r.Exec
	case b.Kind == KindFile:
		e.Exec = b.Exec
	default:
		e.Exec = false
	}
	return e
}

package filesync

// The decision core: what to do with one path from its base (the state both
// sides last agreed on), local and remote entries, and what each side's
// filesystem can hold. Pure: no locks, no I/O, no clock (mtimes never
// count); what it needs of the trees around the path comes as functions.
// The client (reconcile.go) turns verdicts into actions; scanning, applying,
// the event loop and the safety rails (halt.go) are around it.

import "golang.org/x/text/unicode/norm"

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
	if src.Kind == KindSymlink && linkEscapes(s.p, src.Target()) {
		// Never made on the other side: a link out of the folder there
		// would let that side reach what is outside it.
		return decision{v: vRefuse, why: "symlink to " + src.Target() + " leaves the synchronized folder: not created on the other side"}
	}
	if src.Kind == KindSymlink && dc.noLinks {
		return decision{v: vRefuse, why: "symlink to " + src.Target() + " not created on " + side + ": its filesystem cannot hold symlinks"}
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

// Names equal under Unicode normalization. A side whose filesystem folds
// Unicode form (caps.foldNorm: macOS) holds one file for the composed (NFC)
// and the decomposed (NFD) spelling of a name, while a side that takes names
// as bytes (Linux) may hold either, or both as two files. Such a pair of
// names on the two sides is one path for the engine: it is kept under one
// key (its base, its operations) and each side keeps the spelling it holds,
// so nothing is renamed back and forth.

// spelling is where the path the engine keeps under key lives on each side:
// name[0] on the local side, name[1] on the remote one ("" when the side
// holds nothing for it). twin[i], when set, is a name side i holds that its
// filesystem takes for key but that is paired with another key: key is not
// created there (a clash, reported once).
type spelling struct {
	key  string
	name [2]string
	twin [2]string
	// create[i], when set, is where side i creates the path (it holds none):
	// in the folder it holds above it under another spelling than the
	// key's, on a side that folds Unicode form (cfolder.spell).
	create [2]string
}

// ioName is the name side i's operations on the path use: the name it holds,
// else where it creates it.
func (s spelling) ioName(i int) string {
	if s.name[i] != "" {
		return s.name[i]
	}
	if s.create[i] != "" {
		return s.create[i]
	}
	return s.key
}

// normTwins returns the composed and the decomposed spelling of p (sorted)
// when they differ and p is one of them; nil for a name that has one form
// (ASCII) or that mixes forms (not paired: such names are only kept from
// being created beside their twin).
func normTwins(p string) []string {
	c, d := norm.NFC.String(p), norm.NFD.String(p)
	if c == d || (p != c && p != d) {
		return nil
	}
	if d < c {
		return []string{d, c}
	}
	return []string{c, d}
}

// twinPair pairs the names of p's normalization class that the two sides
// hold into one path, when a side folds Unicode form; nil when nothing is to
// pair (no side folds, p has one form, or no folding side holds a name of
// the class). has reports whether a side holds a name, inBase whether the
// base holds a key. Pure: the pair depends on the class's names only, so
// every name of the class finds the same pair.
//
// A folding side holds (at most) one name of the class, φ. Where one side
// folds, φ pairs under the key the base keeps (the pair agreed on before:
// stable; φ's own, else one the other side holds, else the one it removed),
// else with the same spelling there, else with the other side's first name; the key is that name, so the side
// that does not fold keeps its names and base keys as they are. Where both
// fold, each holds one name: they pair under the base's key, else the local
// name. The other side's other names of the class stay paths of their own
// (key = their name), clashing with φ on the folding side.
//
// placed (nil: none) returns where side i puts p when it holds none of p's
// class: p, or p in the folder side i holds above it under another
// spelling (cfolder.placedLocked). A name new on both sides is kept under
// the name the side that does not fold makes, so that side's later index
// finds it as the pair's key.
func twinPair(p string, lc, rc caps, has func(local bool, q string) bool, inBase func(q string) bool, placed func(side int, p string) string) *spelling {
	if !lc.foldNorm && !rc.foldNorm {
		return nil
	}
	tw := normTwins(p)
	if tw == nil {
		return nil
	}
	var held [2][]string
	var base []string
	for _, q := range tw {
		for i := range held {
			if has(i == 0, q) {
				held[i] = append(held[i], q)
			}
		}
		if inBase(q) {
			base = append(base, q)
		}
	}
	one := func(s []string) string { // the name a folding side holds
		for _, q := range s {
			if q == p {
				return q
			}
		}
		if len(s) > 0 {
			return s[0]
		}
		return ""
	}
	in := func(s []string, q string) bool {
		for _, x := range s {
			if x == q {
				return true
			}
		}
		return false
	}
	if lc.foldNorm && rc.foldNorm {
		fl, fr := one(held[0]), one(held[1])
		if fl == "" && fr == "" {
			return nil
		}
		s := &spelling{name: [2]string{fl, fr}}
		switch {
		case len(base) > 0:
			s.key = base[0]
		case fl != "":
			s.key = fl
		default:
			s.key = fr
		}
		return s
	}
	fs, ns := 0, 1 // the folding side, the other
	if rc.foldNorm {
		fs, ns = 1, 0
	}
	phi, other := one(held[fs]), held[ns]
	if phi == "" {
		return nil
	}
	var key string
	switch {
	case in(base, phi):
		key = phi
	case len(base) > 0:
		key = base[0]
		for _, q := range base {
			if in(other, q) {
				key = q
				break
			}
		}
	case in(other, phi):
		key = phi
	case len(other) > 0:
		key = other[0]
	default:
		key = phi
		if placed != nil {
			key = placed(ns, phi)
		}
	}
	s := &spelling{key: key}
	s.name[fs] = phi
	if in(other, key) {
		s.name[ns] = key
	}
	return s
}

// keysOf returns the keys a change of the name p (on either side) may
// touch: p, and where a side folds Unicode form, every spelling of p's
// class (the pair it belongs to, or belonged to before the change, is
// kept under one of them).
func keysOf(p string, lc, rc caps) []string {
	if !lc.foldNorm && !rc.foldNorm {
		return []string{p}
	}
	tw := normTwins(p)
	if tw == nil {
		return []string{p}
	}
	return tw
}

// spellKey is where the path kept under key k lives on each side; pair is
// twinPair(k, lc, rc, ...).
func spellKey(k string, pair *spelling, lc, rc caps, has func(local bool, q string) bool) spelling {
	if pair != nil && pair.key == k {
		return *pair
	}
	s := spelling{key: k}
	for i, c := range [2]caps{lc, rc} {
		if pair != nil && c.foldNorm && pair.name[i] != "" {
			// this side holds a twin of k, paired with another key
			s.twin[i] = pair.name[i]
			continue
		}
		if has(i == 0, k) {
			s.name[i] = k
		}
	}
	return s
}

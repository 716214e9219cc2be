package filesync

import (
	"fmt"
	"math/rand"
	"os"
	"strconv"
	"testing"
	"time"
)

var (
	none  = Entry{}
	dir   = Entry{Kind: KindDir}
	fileA = Entry{Kind: KindFile, Size: 1, Hash: 0xa}
	fileB = Entry{Kind: KindFile, Size: 1, Hash: 0xb}
	fileC = Entry{Kind: KindFile, Size: 1, Hash: 0xc}
	execA = Entry{Kind: KindFile, Size: 1, Hash: 0xa, Exec: true}
	execB = Entry{Kind: KindFile, Size: 1, Hash: 0xb, Exec: true}
	link  = symlinkEntry("x", 0)
	linkO = symlinkEntry("/etc/passwd", 0)
)

var (
	linux  = caps{}
	noExec = caps{noExec: true}
	exfat  = caps{noExec: true, foldCase: true, noLinks: true}
	macOS  = caps{foldCase: true, foldNorm: true}
)

func at(e Entry, mtime int64) Entry { e.MTime = mtime; return e }

func TestDecideTable(t *testing.T) {
	for _, c := range []struct {
		name    string
		b, l, r Entry
		lc, rc  caps
		below   bool   // a changed path below a folder about to be replaced
		twin    string // a twin of the path on the receiving side
		want    verdict
		exec    bool // the exec bit of decision.e (files)
	}{
		{name: "equal", b: fileA, l: fileA, r: fileA, want: vAgree},
		{name: "equal new on both", b: none, l: fileA, r: fileA, want: vAgree},
		{name: "edited here", b: fileA, l: fileB, r: fileA, want: vPush},
		{name: "edited there", b: fileA, l: fileA, r: fileB, want: vPull},
		{name: "exec bit set here", b: fileA, l: execA, r: fileA, want: vPush, exec: true},
		{name: "new here", b: none, l: fileA, r: none, want: vPush},
		{name: "new there", b: none, l: none, r: fileA, want: vPull},
		{name: "removed here", b: fileA, l: none, r: fileA, want: vRemoteRm},
		{name: "removed there", b: fileA, l: fileA, r: none, want: vLocalRm},
		{name: "removed here, edited there", b: fileA, l: none, r: fileB, want: vPull},
		{name: "edited here, removed there", b: fileA, l: fileB, r: none, want: vPush},
		{name: "both edited", b: fileA, l: fileB, r: fileC, want: vRemoteAside},
		{name: "both new, differ", b: none, l: fileB, r: fileC, want: vRemoteAside},
		{name: "folder here, file there", b: none, l: dir, r: fileA, want: vRemoteAside},
		{name: "file here, folder there", b: none, l: fileA, r: dir, want: vLocalAside},
		{name: "folder became file here", b: dir, l: fileA, r: dir, want: vPush},
		{name: "folder became file here, changes below there", b: dir, l: fileA, r: dir, below: true, want: vLocalAside},
		{name: "folder became link there, changes below here", b: dir, l: dir, r: link, below: true, want: vRemoteAside},
		{name: "file became link there", b: fileA, l: fileA, r: link, want: vPull},
		{name: "link out of the folder there", b: none, l: none, r: linkO, want: vRefuse},
		{name: "link out of the folder here", b: fileA, l: linkO, r: fileA, want: vRefuse},
		{name: "link out removed there", b: linkO, l: linkO, r: none, want: vLocalRm},

		// Clocks: mtimes never count (each side has its own).
		{name: "mtimes differ", b: at(fileA, 1), l: at(fileA, 2), r: at(fileA, 3e18), want: vAgree},
		{name: "remote clock ahead, edited here", b: at(fileA, 1), l: at(fileB, 2), r: at(fileA, 9e18), want: vPush},

		// Exec bits on a side that cannot keep them (every file reads the same).
		{name: "no exec here: reads without, base has it", b: execA, l: fileA, r: execA, lc: noExec, want: vAgree, exec: true},
		{name: "no exec here: reads with, base has not", b: fileA, l: execA, r: fileA, lc: noExec, want: vAgree, exec: false},
		{name: "no exec here: edited keeps the other side's bit", b: execA, l: fileB, r: execA, lc: noExec, want: vPush, exec: true},
		{name: "no exec here: edited, reads with, keeps none", b: fileA, l: execB, r: fileA, lc: noExec, want: vPush, exec: false},
		{name: "no exec here: chmod there agrees", b: fileA, l: fileA, r: execA, lc: noExec, want: vAgree, exec: true},
		{name: "no exec here: new file goes without", b: none, l: execA, r: none, lc: noExec, want: vPush, exec: false},
		{name: "no exec there: edited keeps this side's bit", b: execA, l: execA, r: fileB, rc: noExec, want: vPull, exec: true},
		{name: "no exec there: reads without", b: execA, l: execA, r: fileA, rc: noExec, want: vAgree, exec: true},
		{name: "no exec there: chmod here is carried", b: fileA, l: execA, r: fileA, rc: noExec, want: vAgree, exec: true},
		{name: "no exec on either: base kept", b: execA, l: fileA, r: fileA, lc: noExec, rc: noExec, want: vAgree, exec: true},
		{name: "no exec on either: edit carries the base's", b: execA, l: fileB, r: fileA, lc: noExec, rc: noExec, want: vPush, exec: true},

		// Symlinks onto a side that cannot hold them.
		{name: "link to a side without links", b: none, l: link, r: none, rc: exfat, want: vRefuse},
		{name: "link from a side without links' other side", b: fileA, l: fileA, r: link, lc: exfat, want: vRefuse},
		{name: "link removed on a side with links", b: link, l: none, r: link, lc: linux, want: vRemoteRm},

		// Names a folding side takes for another it holds.
		{name: "case twin here", b: none, l: none, r: fileA, lc: exfat, twin: "P", want: vClash},
		{name: "normalization twin here", b: none, l: none, r: fileA, lc: macOS, twin: "p\u0301", want: vClash},
		{name: "twin there, not folding", b: none, l: fileA, r: none, rc: noExec, twin: "P", want: vPush},
		{name: "case twin there, folding", b: none, l: fileA, r: none, lc: linux, rc: caps{foldCase: true}, twin: "P", want: vClash},
		{name: "twin on a side that does not fold", b: none, l: none, r: fileA, lc: linux, twin: "P", want: vPull},
		{name: "twin does not stop a replacement", b: fileA, l: fileA, r: fileB, lc: exfat, twin: "P", want: vPull},
	} {
		got := decide(pathState{p: "p", b: c.b, l: c.l, r: c.r, lc: c.lc, rc: c.rc,
			changedBelow: func(bool) bool { return c.below },
			twin: func(local bool) string {
				if (local && c.lc.folds()) || (!local && c.rc.folds()) {
					return c.twin
				}
				return ""
			}})
		if got.v != c.want {
			t.Errorf("%s: decide(b=%s l=%s r=%s) = %s, want %s", c.name, descE(c.b), descE(c.l), descE(c.r), got.v, c.want)
			continue
		}
		if (got.v == vRefuse || got.v == vClash) != (got.why != "") {
			t.Errorf("%s: refusal without a reason or a reason without refusal: %+v", c.name, got)
		}
		if (got.v == vAgree || got.v == vPush || got.v == vPull) && got.e.Kind == KindFile && got.e.Exec != c.exec {
			t.Errorf("%s: exec bit %v, want %v", c.name, got.e.Exec, c.exec)
		}
	}
}

// The property test's world: one path p on both sides, its base, the
// conflict copies made, and the neighbouring names each side holds; each
// side's filesystem has caps, and one without exec bits reads every file
// with the same exec bit (fsExec).
type world struct {
	b, l, r Entry
	lc, rc  caps
	fsExec  [2]bool
	p       string
	// near[0] local, near[1] remote: other names in p's folder
	near   [2][]string
	copies []Entry
	side   []int // the side each copy was made on
	names  []string
	broken string // an invariant broken while applying
}

// view is what side i's scan reads of e written there.
func (w *world) view(i int, e Entry) Entry {
	c := w.lc
	if i == 1 {
		c = w.rc
	}
	if c.noExec && e.Kind == KindFile {
		e.Exec = w.fsExec[i]
	}
	return e
}

func (w *world) twin(local bool) string {
	i, c := 1, w.rc
	if local {
		i, c = 0, w.lc
	}
	if !c.folds() {
		return ""
	}
	for _, q := range w.near[i] {
		if q != w.p && c.nameKey(q) == c.nameKey(w.p) {
			return q
		}
	}
	return ""
}

func (w *world) state(below [2]bool) pathState {
	return pathState{p: w.p, b: w.b, l: w.l, r: w.r, lc: w.lc, rc: w.rc,
		changedBelow: func(local bool) bool {
			if local {
				return below[0]
			}
			return below[1]
		},
		twin: w.twin}
}

// put writes e on side i (the engine's applier), checking that nothing is
// created beside its twin nor a link where none can be.
func (w *world) put(i int, e Entry) {
	c, cur := w.lc, &w.l
	if i == 1 {
		c, cur = w.rc, &w.r
	}
	if cur.Kind == KindNone && e.Kind != KindNone && w.twin(i == 0) != "" {
		w.broken = fmt.Sprintf("created beside its twin %q on side %d", w.twin(i == 0), i)
	}
	if e.Kind == KindSymlink && c.noLinks {
		w.broken = fmt.Sprintf("symlink created on side %d, whose filesystem has none", i)
	}
	*cur = w.view(i, e)
}

// apply carries d out the way the engine does (its steps succeed): the base
// after a transfer is what the result handler records (agreed), and a
// conflict copy keeps the moved version under a name of the original's.
func (w *world) apply(d decision, now time.Time) {
	switch d.v {
	case vAgree:
		w.b = d.e
	case vPush:
		w.put(1, d.e)
		w.b = agreed(w.b, w.l, w.r, w.lc, w.rc)
	case vPull:
		w.put(0, d.e)
		w.b = agreed(w.b, w.l, w.r, w.lc, w.rc)
	case vRemoteRm:
		w.r, w.b = none, none
	case vLocalRm:
		w.l, w.b = none, none
	case vRemoteAside:
		w.copies, w.side, w.r = append(w.copies, w.r), append(w.side, 1), none
		w.names = append(w.names, conflictName(w.p, "remote", now, 1))
	case vLocalAside:
		w.copies, w.side, w.l = append(w.copies, w.l), append(w.side, 0), none
		w.names = append(w.names, conflictName(w.p, "local", now, 1))
	}
}

// content compares what a version holds, exec bits aside (checked on
// their own).
func content(a, b Entry) bool { return eqOn(a, b, true) }

func (w *world) holds(e Entry) bool {
	if content(w.l, e) || content(w.r, e) {
		return true
	}
	for _, c := range w.copies {
		if content(c, e) {
			return true
		}
	}
	return false
}

// propNear are the names beside p ("café", composed) that a side may hold:
// its case twin, its normalization twin, both, and an unrelated name.
var propNear = []string{"CAF\u00c9", "cafe\u0301", "CAFE\u0301", "cafe"}

func randomCaps(rng *rand.Rand) caps { return capsFromBits(uint64(rng.Intn(16))) }

// TestDecideProperties runs decide over random cases (FILESYNC_DECIDE_CASES,
// default 10,000; FILESYNC_DECIDE_SEED, default 1): a random (base, local,
// remote), random caps for each side (every one of the 256 pairs of the four
// capabilities comes up), random exec bits read on sides without them,
// random neighbouring names, random changes below, random mtimes. It
// applies each decision as the engine would until nothing is left to do.
// Invariants:
//   - convergence: at most four steps, then a second run decides nothing
//     (agree with the same base, or the same refusal);
//   - nothing lost: every version either side held survives on a side or
//     as a conflict copy, unless it was the base and the other side
//     changed it (removed or edited: the newest version is there);
//   - no conflict copy of a conflict copy (a copy's name carries one tag,
//     even when p is itself a copy);
//   - no exec flip: a side that keeps exec bits ends with the bit it had,
//     the base's, or the other side's if that side keeps them (false only
//     when none of these held a file, or when its own version was moved
//     aside, keeping its bit in the copy);
//   - no twin names: nothing created beside a name its side takes for the
//     same; no symlink on a side without symlinks;
//   - mtimes never change a decision.
//
// Beside each case, a case over the composed and decomposed spellings of a
// name (twinCase: either, both or neither on each side and in the base, a
// side folding Unicode form often) is played the way the engine's rounds
// do (checkTwinCase): convergence and a second run deciding nothing,
// nothing lost, no copy of a copy, nothing created beside its twin and a
// folding side holding one spelling.
func TestDecideProperties(t *testing.T) {
	cases, seed := 10000, int64(1)
	if v, err := strconv.Atoi(os.Getenv("FILESYNC_DECIDE_CASES")); err == nil {
		cases = v
	}
	if v, err := strconv.ParseInt(os.Getenv("FILESYNC_DECIDE_SEED"), 10, 64); err == nil {
		seed = v
	}
	pool := []Entry{none, dir, fileA, fileB, fileC, execA, execB, link, linkO}
	rng := rand.New(rand.NewSource(seed))
	now := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	pairs := map[[2]uint64]bool{}
	// normalization twins: a case of their own beside each case above,
	// from a generator of its own (the cases above stay the same)
	twinRng := rand.New(rand.NewSource(seed + 1))
	twinPairs, twinClashes := 0, 0
	start := time.Now()
	for i := 0; i < cases; i++ {
		tw := twinCase(twinRng, pool)
		tname := fmt.Sprintf("twin case %d: lc=%+v rc=%+v fsExec=%v base %s local %s remote %s", i, tw.lc, tw.rc, tw.fsExec,
			descSide(tw.base), descSide(tw.side[0]), descSide(tw.side[1]))
		if p := tw.pair(nfc); p != nil && p.name[0] != "" && p.name[1] != "" && p.name[0] != p.name[1] {
			twinPairs++ // the two sides hold the file under different spellings
		}
		checkTwinCase(t, tname, tw, now)
		if tw.clashes > 0 {
			twinClashes++
		}
		w := &world{lc: randomCaps(rng), rc: randomCaps(rng), fsExec: [2]bool{rng.Intn(2) == 0, rng.Intn(2) == 0}, p: "caf\u00e9"}
		pairs[[2]uint64{capsBits(w.lc), capsBits(w.rc)}] = true
		if rng.Intn(4) == 0 {
			w.p = "caf\u00e9.conflict-remote-20250101-000000" // a path that is itself a copy
		}
		pick := func(c caps) Entry {
			for {
				e := pool[rng.Intn(len(pool))]
				if !(c.noLinks && e.Kind == KindSymlink) {
					return e
				}
			}
		}
		for side := 0; side < 2; side++ {
			for _, n := range propNear {
				if rng.Intn(4) == 0 {
					w.near[side] = append(w.near[side], n)
				}
			}
		}
		w.b = pick(caps{noLinks: w.lc.noLinks || w.rc.noLinks})
		w.l, w.r = w.view(0, pick(w.lc)), w.view(1, pick(w.rc))
		// A side that folds names and holds p's twin cannot hold p.
		if w.twin(true) != "" {
			w.l = none
		}
		if w.twin(false) != "" {
			w.r = none
		}
		b0, l0, r0 := w.b, w.l, w.r
		below := [2]bool{rng.Intn(2) == 0, rng.Intn(2) == 0}
		name := fmt.Sprintf("case %d: p=%q b=%s l=%s r=%s lc=%+v rc=%+v fsExec=%v near=%q below=%v",
			i, w.p, descE(b0)+execMark(b0), descE(l0)+execMark(l0), descE(r0)+execMark(r0), w.lc, w.rc, w.fsExec, w.near, below)

		// mtimes never change a decision
		d0 := decide(w.state(below))
		skew := *w
		skew.b, skew.l, skew.r = at(w.b, rng.Int63()), at(w.l, rng.Int63()), at(w.r, -rng.Int63())
		if d := decide(skew.state(below)); d.v != d0.v || d.why != d0.why || !same(d.e, d0.e) {
			t.Fatalf("%s: mtimes changed the decision: %+v vs %+v", name, d, d0)
		}

		var steps []verdict
		for step := 0; ; step++ {
			d := decide(w.state(below))
			steps = append(steps, d.v)
			if d.v == vRefuse || d.v == vClash || (d.v == vAgree && same(d.e, w.b) && (d.e.Kind != KindFile || d.e.Exec == w.b.Exec)) {
				break
			}
			if step == 4 {
				t.Fatalf("%s: does not converge: %v", name, steps)
			}
			w.apply(d, now)
			if w.broken != "" {
				t.Fatalf("%s: %s (steps %v)", name, w.broken, steps)
			}
		}
		last := steps[len(steps)-1]
		// A second run decides nothing more.
		if d := decide(w.state(below)); d.v != last || (d.v == vAgree && (!same(d.e, w.b) || d.e.Exec != w.b.Exec)) {
			t.Fatalf("%s: a second run decides %s (steps %v)", name, d.v, steps)
		}
		// Nothing lost.
		for _, x := range []struct{ e, other Entry }{{l0, r0}, {r0, l0}} {
			if x.e.Kind == KindNone || w.holds(x.e) {
				continue
			}
			if content(x.e, b0) && !content(x.other, b0) {
				continue // the base, changed on the other side: the newest version is there
			}
			t.Fatalf("%s: version %s lost (steps %v, end l=%s r=%s copies=%v)", name, descE(x.e), steps, descE(w.l), descE(w.r), w.copies)
		}
		// No copy of a copy.
		for _, n := range w.names {
			if c := countTags(n); c != 1 {
				t.Fatalf("%s: conflict copy name %q has %d tags", name, n, c)
			}
		}
		// No exec flip on a side that keeps exec bits.
		for side, c := range []caps{w.lc, w.rc} {
			end, start, other, oc := w.l, l0, r0, w.rc
			if side == 1 {
				end, start, other, oc = w.r, r0, l0, w.lc
			}
			if c.noExec || end.Kind != KindFile {
				continue
			}
			var allowed []bool
			if start.Kind == KindFile {
				allowed = append(allowed, start.Exec)
			}
			if b0.Kind == KindFile {
				allowed = append(allowed, b0.Exec)
			}
			if other.Kind == KindFile && !oc.noExec {
				allowed = append(allowed, other.Exec)
			}
			movedAside := false
			for _, cs := range w.side {
				movedAside = movedAside || cs == side
			}
			if len(allowed) == 0 || movedAside {
				// nothing held an exec bit, or the side's own version was
				// moved aside (its copy keeps its bit): p holds a new file
				allowed = append(allowed, false)
			}
			ok := false
			for _, a := range allowed {
				ok = ok || a == end.Exec
			}
			if !ok {
				t.Fatalf("%s: side %d's exec bit became %v, from none of %v (steps %v)", name, side, end.Exec, allowed, steps)
			}
		}
	}
	if cases >= 10000 && len(pairs) != 256 {
		t.Errorf("%d of the 256 caps pairs came up", len(pairs))
	}
	if cases >= 10000 && (twinPairs < cases/20 || twinClashes < cases/50) {
		t.Errorf("twin cases: %d with two spellings paired, %d with a clash: too few", twinPairs, twinClashes)
	}
	t.Logf("%d cases, %d caps pairs, %d twin cases (%d paired across spellings, %d clashing), %v",
		cases, len(pairs), cases, twinPairs, twinClashes, time.Since(start))
}

func execMark(e Entry) string {
	if e.Kind == KindFile && e.Exec {
		return "+x"
	}
	return ""
}

func countTags(n string) int { return len(conflictTag.FindAllString(n, -1)) }

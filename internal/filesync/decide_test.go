package filesync

import (
	"fmt"
	"math/rand"
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
	link  = Entry{Kind: KindSymlink, Target: "x"}
	linkO = Entry{Kind: KindSymlink, Target: "/etc/passwd"}
)

func TestDecideTable(t *testing.T) {
	for _, c := range []struct {
		name    string
		b, l, r Entry
		below   bool // a changed path below a folder about to be replaced
		want    verdict
	}{
		{"equal", fileA, fileA, fileA, false, vAgree},
		{"equal new on both", none, fileA, fileA, false, vAgree},
		{"edited here", fileA, fileB, fileA, false, vPush},
		{"edited there", fileA, fileA, fileB, false, vPull},
		{"exec bit set here", fileA, execA, fileA, false, vPush},
		{"new here", none, fileA, none, false, vPush},
		{"new there", none, none, fileA, false, vPull},
		{"removed here", fileA, none, fileA, false, vRemoteRm},
		{"removed there", fileA, fileA, none, false, vLocalRm},
		{"removed here, edited there", fileA, none, fileB, false, vPull},
		{"edited here, removed there", fileA, fileB, none, false, vPush},
		{"both edited", fileA, fileB, fileC, false, vRemoteAside},
		{"both new, differ", none, fileB, fileC, false, vRemoteAside},
		{"folder here, file there", none, dir, fileA, false, vRemoteAside},
		{"file here, folder there", none, fileA, dir, false, vLocalAside},
		{"folder became file here", dir, fileA, dir, false, vPush},
		{"folder became file here, changes below there", dir, fileA, dir, true, vLocalAside},
		{"folder became link there, changes below here", dir, dir, link, true, vRemoteAside},
		{"file became link there", fileA, fileA, link, false, vPull},
		{"link out of the folder there", none, none, linkO, false, vRefuse},
		{"link out of the folder here", fileA, linkO, fileA, false, vRefuse},
		{"link out removed there", linkO, linkO, none, false, vLocalRm},
	} {
		got := decide("p", c.b, c.l, c.r, func(bool) bool { return c.below })
		if got.v != c.want {
			t.Errorf("%s: decide(b=%s l=%s r=%s) = %s, want %s", c.name, descE(c.b), descE(c.l), descE(c.r), got.v, c.want)
		}
		if (got.v == vRefuse) != (got.why != "") {
			t.Errorf("%s: refusal without a reason or a reason without refusal: %+v", c.name, got)
		}
	}
}

// world is one path's state on both sides, its base and the conflict copies
// made, for the property test.
type world struct {
	b, l, r Entry
	copies  []Entry
	names   []string
}

// apply carries d out the way the engine does (its steps succeed): a
// conflict copy keeps the moved version under a name of the original's.
func (w *world) apply(d decision, now time.Time) {
	switch d.v {
	case vAgree:
		w.b = w.l
	case vPush:
		w.r, w.b = w.l, w.l
	case vPull:
		w.l, w.b = w.r, w.r
	case vRemoteRm:
		w.r, w.b = none, none
	case vLocalRm:
		w.l, w.b = none, none
	case vRemoteAside:
		w.copies, w.r = append(w.copies, w.r), none
		w.names = append(w.names, conflictName(w.lastName(), "remote", now, 1))
	case vLocalAside:
		w.copies, w.l = append(w.copies, w.l), none
		w.names = append(w.names, conflictName(w.lastName(), "local", now, 1))
	}
}

func (w *world) lastName() string {
	if len(w.names) == 0 {
		return "src/a.conflict-remote-20250101-000000.go" // a path that is itself a copy
	}
	return w.names[len(w.names)-1]
}

func (w *world) holds(e Entry) bool {
	if same(w.l, e) || same(w.r, e) {
		return true
	}
	for _, c := range w.copies {
		if same(c, e) {
			return true
		}
	}
	return false
}

// 10,000 random (base, local, remote, changes below) cases against the
// core. Invariants: no version that existed on either side is lost unless
// the user removed it on the other side while this one still held the base
// (a removal of the newest version); conflict copies never nest; the core
// converges (at most a conflict copy and a carry) and then decides nothing
// more.
func TestDecideProperties(t *testing.T) {
	entries := []Entry{none, dir, fileA, fileB, fileC, execA, link, linkO}
	rng := rand.New(rand.NewSource(1))
	now := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	for i := 0; i < 10000; i++ {
		b, l, r := entries[rng.Intn(len(entries))], entries[rng.Intn(len(entries))], entries[rng.Intn(len(entries))]
		below := [2]bool{rng.Intn(2) == 0, rng.Intn(2) == 0}
		changedBelow := func(local bool) bool {
			if local {
				return below[0]
			}
			return below[1]
		}
		w := &world{b: b, l: l, r: r}
		name := fmt.Sprintf("case %d: b=%s l=%s r=%s below=%v", i, descE(b), descE(l), descE(r), below)
		var steps []verdict
		for step := 0; ; step++ {
			d := decide("p", w.b, w.l, w.r, changedBelow)
			steps = append(steps, d.v)
			if d.v == vAgree && same(w.b, w.l) || d.v == vRefuse {
				break
			}
			if step == 3 {
				t.Fatalf("%s: does not converge: %v", name, steps)
			}
			w.apply(d, now)
		}
		if steps[len(steps)-1] == vRefuse {
			// Nothing changes: both sides keep what they hold, and it is
			// decided the same way again.
			if d := decide("p", w.b, w.l, w.r, changedBelow); d.v != vRefuse {
				t.Fatalf("%s: a refusal is not stable: %v then %s", name, steps, d.v)
			}
		}
		for _, x := range []struct {
			e     Entry
			other Entry
		}{{l, r}, {r, l}} {
			if x.e.Kind == KindNone || w.holds(x.e) {
				continue
			}
			// Lost: allowed only when it was the base and the user removed or
			// replaced it on the other side (which then held the newest version).
			if same(x.e, b) && !same(x.other, b) {
				continue
			}
			t.Fatalf("%s: version %s lost (steps %v, end l=%s r=%s copies=%v)", name, descE(x.e), steps, descE(w.l), descE(w.r), w.copies)
		}
		for _, n := range w.names {
			if c := countTags(n); c != 1 {
				t.Fatalf("%s: conflict copy name %q has %d tags", name, n, c)
			}
		}
	}
}

func countTags(n string) int { return len(conflictTag.FindAllString(n, -1)) }

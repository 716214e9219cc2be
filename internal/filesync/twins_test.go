package filesync

import (
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Names equal under Unicode normalization (twinPair, spellKey): "café"
// composed (NFC) and decomposed (NFD, as macOS's HFS+ writes it).
const (
	nfc = "caf\u00e9"
	nfd = "cafe\u0301"
)

// tworld is the decision core's world over names: each side's entries by
// the name it holds, the base by key, the conflict copies made. The
// engine's round (reconcile.go) is played over it: every name of either
// side or key of the base, mapped to its keys (keysOf), each key decided
// once from its spelling (spellKey) and applied at once.
type tworld struct {
	lc, rc   caps
	fsExec   [2]bool
	side     [2]map[string]Entry
	base     map[string]Entry
	copies   []Entry
	names    []string // the conflict copies' names
	clashes  int      // clash verdicts in the last pass
	refusals int
	broken   string
}

func (w *tworld) caps(i int) caps {
	if i == 0 {
		return w.lc
	}
	return w.rc
}

func (w *tworld) has(local bool, q string) bool { _, ok := w.side[sideIndex(local)][q]; return ok }
func (w *tworld) inBase(q string) bool          { _, ok := w.base[q]; return ok }

func (w *tworld) pair(p string) *spelling { return twinPair(p, w.lc, w.rc, w.has, w.inBase, nil) }

// all is every name either side holds and every base key, sorted.
func (w *tworld) all() []string {
	set := map[string]bool{}
	for _, m := range []map[string]Entry{w.side[0], w.side[1], w.base} {
		for q := range m {
			set[q] = true
		}
	}
	out := make([]string, 0, len(set))
	for q := range set {
		out = append(out, q)
	}
	sort.Strings(out)
	return out
}

func (w *tworld) view(i int, e Entry) Entry {
	if w.caps(i).noExec && e.Kind == KindFile {
		e.Exec = w.fsExec[i]
	}
	return e
}

// foldTwin is the engine's twin lookup by name key (f.twin): a name side i
// holds, other than k, that its filesystem takes for k.
func (w *tworld) foldTwin(i int, k string) string {
	c := w.caps(i)
	if !c.folds() {
		return ""
	}
	for q := range w.side[i] {
		if q != k && c.nameKey(q) == c.nameKey(k) {
			return q
		}
	}
	return ""
}

func (w *tworld) state(sp spelling) pathState {
	return pathState{p: sp.key, b: w.base[sp.key], l: w.side[0][sp.name[0]], r: w.side[1][sp.name[1]], lc: w.lc, rc: w.rc,
		changedBelow: func(bool) bool { return false },
		twin: func(local bool) string {
			i := sideIndex(local)
			if t := sp.twin[i]; t != "" {
				return t
			}
			return w.foldTwin(i, sp.key)
		}}
}

// put writes e on side i under name q, checking that nothing is created
// beside a name the side takes for the same.
func (w *tworld) put(i int, q string, e Entry) {
	if _, ok := w.side[i][q]; !ok {
		if t := w.foldTwin(i, q); t != "" {
			w.broken = fmt.Sprintf("%q created beside its twin %q on side %d", q, t, i)
		}
	}
	w.side[i][q] = w.view(i, e)
}

func (w *tworld) setBase(k string, e Entry) {
	if e.Kind == KindNone {
		delete(w.base, k)
	} else {
		w.base[k] = e
	}
}

// pass plays one round; it returns the verdicts that changed something.
func (w *tworld) pass(now time.Time) []string {
	var did []string
	w.clashes, w.refusals = 0, 0
	seen := map[string]bool{}
	for _, q := range w.all() {
		for _, k := range keysOf(q, w.lc, w.rc) {
			if seen[k] {
				continue
			}
			seen[k] = true
			sp := spellKey(k, w.pair(k), w.lc, w.rc, w.has)
			s := w.state(sp)
			d := decide(s)
			switch d.v {
			case vRefuse:
				w.refusals++
				continue
			case vClash:
				w.clashes++
				continue
			case vAgree:
				if same(d.e, s.b) && (d.e.Kind != KindFile || d.e.Exec == s.b.Exec) {
					continue
				}
			}
			did = append(did, fmt.Sprintf("%s %+q", d.v, sp))
			w.apply(sp, s, d, now)
			if w.broken != "" {
				return did
			}
		}
	}
	return did
}

func (w *tworld) apply(sp spelling, s pathState, d decision, now time.Time) {
	ln, rn := sp.ioName(0), sp.ioName(1)
	switch d.v {
	case vAgree:
		w.setBase(sp.key, d.e)
	case vPush:
		w.put(1, rn, d.e)
		w.setBase(sp.key, agreed(s.b, w.side[0][ln], w.side[1][rn], w.lc, w.rc))
	case vPull:
		w.put(0, ln, d.e)
		w.setBase(sp.key, agreed(s.b, w.side[0][ln], w.side[1][rn], w.lc, w.rc))
	case vRemoteRm:
		delete(w.side[1], rn)
		delete(w.base, sp.key)
	case vLocalRm:
		delete(w.side[0], ln)
		delete(w.base, sp.key)
	case vRemoteAside:
		w.copies = append(w.copies, s.r)
		w.names = append(w.names, conflictName(sp.key, "remote", now, 1))
		delete(w.side[1], rn)
	case vLocalAside:
		w.copies = append(w.copies, s.l)
		w.names = append(w.names, conflictName(sp.key, "local", now, 1))
		delete(w.side[0], ln)
	}
}

// settle plays rounds until one changes nothing (at most 6).
func (w *tworld) settle(t *testing.T, name string, now time.Time) []string {
	var log []string
	for i := 0; ; i++ {
		did := w.pass(now)
		if w.broken != "" {
			t.Fatalf("%s: %s (rounds %q)", name, w.broken, append(log, did...))
		}
		if len(did) == 0 {
			return log
		}
		log = append(log, did...)
		if i == 6 {
			t.Fatalf("%s: does not converge: %q", name, log)
		}
	}
}

func (w *tworld) holds(e Entry) bool {
	for _, m := range w.side {
		for _, x := range m {
			if content(x, e) {
				return true
			}
		}
	}
	for _, c := range w.copies {
		if content(c, e) {
			return true
		}
	}
	return false
}

func newTworld(lc, rc caps, l, r, b map[string]Entry) *tworld {
	w := &tworld{lc: lc, rc: rc, base: map[string]Entry{}}
	w.side[0], w.side[1] = map[string]Entry{}, map[string]Entry{}
	for q, e := range l {
		w.side[0][q] = e
	}
	for q, e := range r {
		w.side[1][q] = e
	}
	for q, e := range b {
		w.base[q] = e
	}
	return w
}

func descSide(m map[string]Entry) string {
	var out []string
	for q, e := range m {
		form := "nfc"
		if q == nfd {
			form = "nfd"
		}
		out = append(out, form+"="+descE(e))
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}

// The core over (base, local, remote) with the composed and the decomposed
// spelling of one name, a side folding Unicode form or not: a file both
// sides hold under the two spellings is one file (nothing created, nothing
// renamed), edits and removals flow between the spellings, and two files
// that are twins on a side that tells them apart are one clash on the
// folding side, stable.
func TestDecideNormalizationTwins(t *testing.T) {
	type m = map[string]Entry
	mac := caps{foldNorm: true, foldCase: true}
	for _, c := range []struct {
		name         string
		lc, rc       caps
		b, l, r      m
		wantL, wantR m
		clash        int
	}{
		{name: "one file under two spellings", lc: mac, l: m{nfd: fileA}, r: m{nfc: fileA}, wantL: m{nfd: fileA}, wantR: m{nfc: fileA}},
		{name: "one file, agreed before", lc: mac, b: m{nfc: fileA}, l: m{nfd: fileA}, r: m{nfc: fileA}, wantL: m{nfd: fileA}, wantR: m{nfc: fileA}},
		{name: "edited on the folding side", lc: mac, b: m{nfc: fileA}, l: m{nfd: fileB}, r: m{nfc: fileA}, wantL: m{nfd: fileB}, wantR: m{nfc: fileB}},
		{name: "edited on the other side", lc: mac, b: m{nfc: fileA}, l: m{nfd: fileA}, r: m{nfc: fileB}, wantL: m{nfd: fileB}, wantR: m{nfc: fileB}},
		{name: "removed on the folding side", lc: mac, b: m{nfc: fileA}, l: m{}, r: m{nfc: fileA}, wantL: m{}, wantR: m{}},
		{name: "removed on the other side", lc: mac, b: m{nfc: fileA}, l: m{nfd: fileA}, r: m{}, wantL: m{}, wantR: m{}},
		// the remote version moved aside, the local one takes the name with its spelling
		{name: "differ, first meeting: one conflict copy", lc: mac, l: m{nfd: fileA}, r: m{nfc: fileB}, wantL: m{nfd: fileA}, wantR: m{nfd: fileA}},
		{name: "new there, made here under its spelling", lc: mac, r: m{nfc: fileA}, wantL: m{nfc: fileA}, wantR: m{nfc: fileA}},
		{name: "new here, made there under its spelling", lc: mac, l: m{nfd: fileA}, wantL: m{nfd: fileA}, wantR: m{nfd: fileA}},
		{name: "two files there that are one name here", lc: mac, b: m{nfc: fileA}, l: m{nfd: fileA}, r: m{nfc: fileA, nfd: fileC},
			wantL: m{nfd: fileA}, wantR: m{nfc: fileA, nfd: fileC}, clash: 1},
		{name: "two files there, first meeting", lc: mac, l: m{nfd: fileA}, r: m{nfc: fileA, nfd: fileA},
			wantL: m{nfd: fileA}, wantR: m{nfc: fileA, nfd: fileA}, clash: 1},
		{name: "the paired one removed there: removed here", lc: mac, b: m{nfc: fileA}, l: m{nfd: fileA}, r: m{nfd: fileC},
			wantL: m{nfd: fileC}, wantR: m{nfd: fileC}},
		{name: "the remote side folds", rc: mac, b: m{nfc: fileA}, l: m{nfc: fileB}, r: m{nfd: fileA}, wantL: m{nfc: fileB}, wantR: m{nfd: fileB}},
		{name: "both fold", lc: mac, rc: mac, l: m{nfd: fileA}, r: m{nfc: fileA}, wantL: m{nfd: fileA}, wantR: m{nfc: fileA}},
		{name: "both fold, edited", lc: mac, rc: mac, b: m{nfd: fileA}, l: m{nfd: fileA}, r: m{nfc: fileB}, wantL: m{nfd: fileB}, wantR: m{nfc: fileB}},
		{name: "neither folds: two files", l: m{nfd: fileA}, r: m{nfc: fileB}, wantL: m{nfd: fileA, nfc: fileB}, wantR: m{nfd: fileA, nfc: fileB}},
	} {
		w := newTworld(c.lc, c.rc, c.l, c.r, c.b)
		w.settle(t, c.name, time.Date(2026, 11, 28, 4, 0, 0, 0, time.UTC))
		if got, want := descSide(w.side[0]), descSide(c.wantL); got != want {
			t.Errorf("%s: local %s, want %s", c.name, got, want)
		}
		if got, want := descSide(w.side[1]), descSide(c.wantR); got != want {
			t.Errorf("%s: remote %s, want %s", c.name, got, want)
		}
		if w.clashes != c.clash {
			t.Errorf("%s: %d clashes, want %d", c.name, w.clashes, c.clash)
		}
		for _, e := range []m{c.l, c.r} {
			for q, x := range e {
				if !w.holds(x) && !(content(x, c.b[q]) || content(x, c.b[nfc]) || content(x, c.b[nfd])) {
					t.Errorf("%s: %s lost", c.name, descE(x))
				}
			}
		}
	}
}

// twinCase is TestDecideProperties' generator for normalization twins: each
// side holds the composed, the decomposed, both or neither spelling of a
// name (one at most where it folds Unicode form), the base keeps either,
// both or neither, under random caps.
func twinCase(rng *rand.Rand, pool []Entry) *tworld {
	w := newTworld(randomCaps(rng), randomCaps(rng), nil, nil, nil)
	w.fsExec = [2]bool{rng.Intn(2) == 0, rng.Intn(2) == 0}
	if rng.Intn(3) == 0 { // a side that folds Unicode form comes up often
		if rng.Intn(2) == 0 {
			w.lc.foldNorm = true
		} else {
			w.rc.foldNorm = true
		}
	}
	pick := func(noLinks bool) Entry {
		for {
			e := pool[rng.Intn(len(pool))]
			if e.Kind != KindNone && !(noLinks && e.Kind == KindSymlink) {
				return e
			}
		}
	}
	for i := range w.side {
		c := w.caps(i)
		for _, q := range []string{nfc, nfd} {
			if rng.Intn(2) == 0 {
				w.side[i][q] = w.view(i, pick(c.noLinks))
			}
		}
		if c.foldNorm && len(w.side[i]) == 2 { // its filesystem holds one
			delete(w.side[i], []string{nfc, nfd}[rng.Intn(2)])
		}
	}
	for _, q := range []string{nfc, nfd} {
		if rng.Intn(3) == 0 {
			w.base[q] = pick(w.lc.noLinks || w.rc.noLinks)
		}
	}
	return w
}

// checkTwinCase settles a twin case and checks the invariants of
// TestDecideProperties over names: convergence and a second run deciding
// nothing, nothing lost (unless it was the base of its key and the other
// side's name of the key changed it), no copy of a copy, nothing created
// beside a twin (put), and a folding side holding one name of the class.
func checkTwinCase(t *testing.T, name string, w *tworld, now time.Time) {
	type held struct {
		i int
		e Entry
		k string // its key at the start
	}
	var start []held
	base0 := map[string]Entry{}
	for q, e := range w.base {
		base0[q] = e
	}
	var side0 [2]map[string]Entry
	spells := map[string]spelling{}
	for i := range w.side {
		side0[i] = map[string]Entry{}
		for q, e := range w.side[i] {
			side0[i][q] = e
			k := q
			if p := w.pair(q); p != nil && p.name[i] == q {
				k = p.key
			}
			spells[k] = spellKey(k, w.pair(k), w.lc, w.rc, w.has)
			start = append(start, held{i, e, k})
		}
	}
	log := w.settle(t, name, now)
	if did := w.pass(now); len(did) != 0 {
		t.Fatalf("%s: a second run decides %q (after %q)", name, did, log)
	}
	for _, h := range start {
		if h.e.Kind == KindNone || w.holds(h.e) {
			continue
		}
		sp := spells[h.k]
		b, other := base0[h.k], side0[1-h.i][sp.name[1-h.i]]
		if content(h.e, b) && !content(other, b) {
			continue // the base, changed on the other side
		}
		t.Fatalf("%s: version %s of side %d lost (rounds %q, end local %s remote %s copies %v)",
			name, descE(h.e), h.i, log, descSide(w.side[0]), descSide(w.side[1]), w.copies)
	}
	for _, n := range w.names {
		if c := countTags(n); c != 1 {
			t.Fatalf("%s: conflict copy name %q has %d tags", name, n, c)
		}
	}
	for i := range w.side {
		if w.caps(i).foldNorm && len(w.side[i]) > 1 {
			t.Fatalf("%s: side %d folds Unicode form and holds %s", name, i, descSide(w.side[i]))
		}
	}
}

// Through the engine: the local folder is taken for a macOS one (it folds
// Unicode form; this kernel mounts no such filesystem, so the local root's
// caps are played with ClientOptions.localCaps on a Linux folder, where the
// engine must use each side's own spelling, never the filesystem's
// folding). A project whose names are decomposed here and composed in the
// container is one tree: nothing is created or renamed on either side,
// edits flow both ways between the spellings, a second file made in the
// container under the other spelling is one clash, reported once, and a
// removal of one spelling removes the file.
func TestEngineNormalizationTwins(t *testing.T) {
	p := newPair(t, ClientOptions{})
	write(t, p.local, nfd+"/a.txt", "one")
	write(t, p.local, nfd+".md", "same")
	write(t, p.local, "x", "x")
	write(t, p.remote, nfc+"/a.txt", "one")
	write(t, p.remote, nfc+".md", "same")
	mac := func(c caps) caps { c.foldNorm, c.foldCase = true, true; return c }
	p.start(ClientOptions{localCaps: mac})
	defer p.stop()
	select {
	case <-p.c.Synced():
	case <-time.After(10 * time.Second):
		t.Fatalf("not synced: %+v", p.c.Status())
	}
	clashes := 0 // a clash stays pending (as a case clash does)
	wait := func(what string, ok func(l, r map[string]string) bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			l, r := contents(t, p.local), contents(t, p.remote)
			if ok(l, r) && p.c.Status().Folders[0].Pending == clashes {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: local %q, remote %q, status %+v", what, l, r, p.c.Status())
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	eq := func(a, b map[string]string) bool { return fmt.Sprint(a) == fmt.Sprint(b) }
	wait("first sync", func(l, r map[string]string) bool {
		return eq(l, map[string]string{nfd: "d", nfd + "/a.txt": "one", nfd + ".md": "same", "x": "x"}) &&
			eq(r, map[string]string{nfc: "d", nfc + "/a.txt": "one", nfc + ".md": "same", "x": "x"})
	})
	if st := p.c.Status().Folders[0]; len(st.Conflicts) != 0 || len(st.Errors) != 0 {
		t.Fatalf("first sync of one tree under two spellings: %+v", st)
	}

	write(t, p.local, nfd+".md", "edited here")
	wait("edit here", func(l, r map[string]string) bool {
		_, twin := r[nfd+".md"]
		return r[nfc+".md"] == "edited here" && !twin
	})
	write(t, p.remote, nfc+"/a.txt", "edited there")
	wait("edit there", func(l, r map[string]string) bool {
		_, twin := l[nfc]
		return l[nfd+"/a.txt"] == "edited there" && !twin
	})

	// A second file in the container whose name is a twin here: one clash.
	write(t, p.remote, nfd+".md", "twin")
	c := waitConflict(t, p, "Unicode form")
	clashes = 1
	if c.Path != nfd+".md" || c.Copy != "" {
		t.Errorf("clash listed as %+v", c)
	}
	write(t, p.remote, "y", "y") // later rounds, then the clash is still listed once
	wait("after the clash", func(l, r map[string]string) bool { return l["y"] == "y" })
	n := 0
	for _, c := range p.c.Status().Folders[0].Conflicts {
		if strings.Contains(c.Reason, "Unicode form") {
			n++
		}
	}
	if l := contents(t, p.local); n != 1 || l[nfd+".md"] != "edited here" {
		t.Errorf("clash reported %d times (want 1), local %s: %q", n, nfd+".md", l[nfd+".md"])
	}

	// The twin goes; then a removal of the local spelling removes the file.
	must(t, os.Remove(filepath.Join(p.remote, nfd+".md")))
	must(t, os.Remove(filepath.Join(p.local, nfd+".md")))
	clashes = 0
	wait("removal", func(l, r map[string]string) bool {
		_, a := l[nfd+".md"]
		_, b := r[nfc+".md"]
		_, c := r[nfd+".md"]
		return !a && !b && !c
	})
	if l, r := contents(t, p.local), contents(t, p.remote); len(l) != len(r) {
		t.Errorf("after the removal: local %q, remote %q", l, r)
	}
}

// contents is snapshotDir with a file's content alone ("d" for a folder).
func contents(t *testing.T, root string) map[string]string {
	m := snapshotDir(t, root)
	for q, v := range m {
		if strings.HasPrefix(v, "f:") {
			m[q] = v[strings.Index(v[2:], ":")+3:]
		}
	}
	return m
}

// TestPropertyRandomTwins runs random sequences of creates, edits, deletes,
// renames and type changes on both sides of a running sync over names that
// are normalization twins (composed and decomposed "café", beside plain
// ones), the local folder played as one that folds Unicode form
// (localCaps): a user action that would make a second spelling there is
// skipped, as that filesystem would take it for the first. Once the engine
// is quiet after each round: every version written and not replaced on
// purpose is on a side or in a conflict copy, and the local folder never
// holds two spellings of a name (the engine never makes one).
func TestPropertyRandomTwins(t *testing.T) {
	seeds := int64(3)
	if testing.Short() {
		seeds = 1
	}
	if v, err := strconv.ParseInt(os.Getenv("FILESYNC_TWIN_SEEDS"), 10, 64); err == nil { // a longer run
		seeds = v
	}
	saved := propNames
	propNames = []string{nfc, nfd, "x", "w.txt"}
	defer func() { propNames = saved }()
	for seed := int64(1); seed <= seeds; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			p := newPair(t, ClientOptions{})
			m := &model{t: t, rng: rand.New(rand.NewSource(seed)), written: map[string]bool{}}
			m.taken = func(root, q string) bool {
				if root != p.local {
					return false
				}
				for _, tw := range normTwins(filepath.ToSlash(q)) {
					if _, err := os.Lstat(filepath.Join(root, filepath.FromSlash(tw))); err == nil {
						return true
					}
				}
				return false
			}
			p.start(ClientOptions{localCaps: func(c caps) caps { c.foldNorm = true; return c }})
			defer p.stop()
			var log []string
			made := map[string]bool{} // the names made in the container by its user
			for round := 0; round < 12; round++ {
				for i := 0; i < 1+m.rng.Intn(6); i++ {
					side, root := "local", p.local
					if m.rng.Intn(2) == 0 {
						side, root = "remote", p.remote
					}
					did := m.step(root)
					log = append(log, fmt.Sprintf("r%d %s %s", round, side, did))
					if f := strings.Fields(did); side == "remote" && len(f) > 1 && f[0] != "skip" {
						for _, q := range f[1:] {
							made[filepath.ToSlash(q)] = true
						}
					}
				}
				quiet(t, p, log)
				m.check(p.local, p.remote, log)
				seen := map[string]string{}
				for q := range contents(t, p.local) {
					k := caps{foldNorm: true}.nameKey(q)
					if o, ok := seen[k]; ok {
						t.Fatalf("the local folder holds %q and %q\nsteps:\n%s", o, q, strings.Join(log, "\n"))
					}
					seen[k] = q
				}
				// Two spellings of a name in the container are both the
				// user's doing there: the engine never sends one beside
				// the other (each side keeps its spelling).
				for q := range contents(t, p.remote) {
					for _, tw := range normTwins(q) {
						if _, both := contents(t, p.remote)[tw]; both && tw != q && !made[q] && !made[tw] {
							t.Fatalf("the container holds %q and %q, neither made there\nsteps:\n%s", q, tw, strings.Join(log, "\n"))
						}
					}
				}
			}
		})
	}
}

// quiet waits until the sync is synchronized and neither tree changed for
// 500 ms (twins clashing on one side keep the trees different).
func quiet(t *testing.T, p *pair, log []string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	last, since := "", time.Now()
	for time.Now().Before(deadline) {
		now := fmt.Sprint(snapshotDir(t, p.local), snapshotDir(t, p.remote))
		if now != last {
			last, since = now, time.Now()
		}
		if time.Since(since) > 500*time.Millisecond && p.c.Status().Synced {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("not quiet after 20 s\nsteps:\n%s\nstatus %+v", strings.Join(log, "\n"), p.c.Status())
}

// A folder paired with its twin (decomposed here, composed in the container,
// the local folder played as one that folds Unicode form) gets new content
// inside itself on both sides, whichever side makes it a folder and
// whatever the other side did to it meanwhile: neither side ever holds the
// two spellings. Before, the file inside a folder the container made of a
// paired file was created here under the container's spelling, beside the
// folder (and a file made here inside such a folder went to a second folder
// in the container); TestPropertyRandomTwins found it once in CI.
func TestTwinFolderMadeOnEitherSide(t *testing.T) {
	toDir := func(abs string) {
		os.MkdirAll(abs, 0o755)
		os.WriteFile(filepath.Join(abs, "inner"), []byte("in"), 0o644)
	}
	toLink := func(abs string) { os.Symlink("target-x", abs) }
	toFile := func(abs string) { os.WriteFile(abs, []byte("f2"), 0o644) }
	type change struct {
		local bool
		to    func(abs string)
	}
	cases := []struct {
		name  string
		steps [][]change // each step's changes at once, then the sync goes quiet
	}{
		{"container: file to folder", [][]change{{{false, toDir}}}},
		{"here: file to folder", [][]change{{{true, toDir}}}},
		{"here: link; container: folder", [][]change{{{true, toLink}}, {{false, toDir}}}},
		{"here: link; container: file, then folder", [][]change{{{true, toLink}}, {{false, toFile}}, {{false, toDir}}}},
		{"at once: link here, folder there", [][]change{{{true, toLink}, {false, toDir}}}},
		{"at once: folder here, link there", [][]change{{{true, toDir}, {false, toLink}}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := newPair(t, ClientOptions{})
			write(t, p.local, "a/"+nfd, "v")
			write(t, p.remote, "a/"+nfc, "v")
			p.start(ClientOptions{localCaps: func(c caps) caps { c.foldNorm = true; return c }})
			defer p.stop()
			select {
			case <-p.c.Synced():
			case <-time.After(10 * time.Second):
				t.Fatalf("not synced: %+v", p.c.Status())
			}
			for i, step := range tc.steps {
				for _, c := range step {
					root, name := p.remote, "a/"+nfc
					if c.local {
						root, name = p.local, "a/"+nfd
					}
					must(t, os.RemoveAll(filepath.Join(root, name)))
					c.to(filepath.Join(root, name))
				}
				quiet(t, p, nil)
				l, r := contents(t, p.local), contents(t, p.remote)
				for side, m := range map[string]map[string]string{"here": l, "in the container": r} {
					_, a := m["a/"+nfc]
					_, b := m["a/"+nfd]
					if a && b {
						t.Fatalf("step %d: both spellings %s: local %q, remote %q", i+1, side, l, r)
					}
				}
				if eq := len(l) == len(r); !eq {
					t.Errorf("step %d: the sides differ: local %q, remote %q", i+1, l, r)
				}
			}
		})
	}
}

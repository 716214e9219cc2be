package filesync

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestSettler(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	var s settler
	if due := s.hold("a", ms(0)); !due.IsZero() {
		t.Fatal("a first change waits")
	}
	s.seen("a", ms(0))
	// changed again 100 ms later: waits 300 ms from then
	if due := s.hold("a", ms(100)); !due.Equal(ms(400)) {
		t.Fatalf("second change: due %v", due)
	}
	// each change restarts the quiet time
	if due := s.hold("a", ms(350)); !due.Equal(ms(650)) {
		t.Fatalf("change while waiting: due %v", due)
	}
	if p, next := s.due(ms(600), nil); len(p) != 0 || !next.Equal(ms(650)) {
		t.Fatalf("due early: %v %v", p, next)
	}
	if p, _ := s.due(ms(650), nil); len(p) != 1 || p[0] != "a" {
		t.Fatalf("not due: %v", p)
	}
	s.seen("a", ms(650))
	// changing again right after its wait: twice the quiet time
	if due := s.hold("a", ms(700)); !due.Equal(ms(1300)) {
		t.Fatalf("after a wait: due %v", due)
	}
	// a wait never lasts more than settleMax
	for i := 1300; i < 20000; i += 100 {
		if due := s.hold("a", ms(i)); due.After(ms(700).Add(settleMax)) {
			t.Fatalf("wait beyond settleMax: %v", due)
		}
	}
	if p, _ := s.due(ms(700).Add(settleMax), nil); len(p) != 1 {
		t.Fatalf("not taken at settleMax: %v", p)
	}
	// an unrelated path, changed once, goes at once
	if due := s.hold("b", ms(20000)); !due.IsZero() {
		t.Fatal("b waits")
	}
	// a wait that ends while the file's mtime says it changed within the
	// quiet time (its events were late) goes on from that mtime
	s.seen("c", ms(21000))
	if due := s.hold("c", ms(21100)); !due.Equal(ms(21400)) {
		t.Fatalf("c: due %v", due)
	}
	mtime := ms(21350)
	changedAt := func(p string) time.Time {
		if p != "c" {
			t.Fatalf("changedAt(%q)", p)
		}
		return mtime
	}
	if p, next := s.due(ms(21400), changedAt); len(p) != 0 || !next.Equal(ms(21650)) {
		t.Fatalf("c taken while its file changes: %v %v", p, next)
	}
	if p, _ := s.due(ms(21650), changedAt); len(p) != 1 || p[0] != "c" {
		t.Fatalf("c not taken once its file settled: %v", p)
	}
	// a file whose mtime keeps moving (or lies in the future) still goes
	// at settleMax
	s.seen("c", ms(30000))
	s.hold("c", ms(30100))
	mtime = ms(99999)
	if p, _ := s.due(ms(30100).Add(settleMax), changedAt); len(p) != 1 {
		t.Fatalf("c not taken at settleMax: %v", p)
	}
	// everything is forgotten after a quiet while
	if _, next := s.due(ms(60000), nil); !next.IsZero() || s.wait != nil || s.gen[0] != nil || s.gen[1] != nil {
		t.Fatalf("kept: next %v wait %v gen %v", next, s.wait, s.gen)
	}
}

// growFile writes size random bytes to p over about d, in chunks, and
// returns them with the number of pauses between two writes that lasted
// settleQuiet or more (a loaded machine can stall the writer that long: the
// file then rightly looks settled, and may be sent once more).
func growFile(t *testing.T, p string, size int, d time.Duration) ([]byte, int) {
	t.Helper()
	data := make([]byte, size)
	_, _ = rand.Read(data)
	f, err := os.Create(p)
	must(t, err)
	defer f.Close()
	const chunk = 512 << 10
	n := size / chunk
	start := time.Now()
	last, pauses := start, 0
	for i := 0; i < n; i++ {
		_, err := f.Write(data[i*chunk : (i+1)*chunk])
		must(t, err)
		now := time.Now()
		if now.Sub(last) >= settleQuiet {
			pauses++
		}
		last = now
		if wait := time.Until(start.Add(d * time.Duration(i+1) / time.Duration(n))); wait > 0 {
			time.Sleep(wait)
		}
	}
	return data, pauses
}

// A 64 MiB file written over about 2 s is sent about once (bytes counted
// on the stream), up and down, and arrives whole. A pause of the writer
// longer than the quiet time (the machine stalled it) allows one more send.
// The status names pending paths: those that differ and those waiting to
// settle (not those whose wait ended), at most maxWaiting, sorted.
func TestWaitingSample(t *testing.T) {
	now := time.Now()
	f := &cfolder{diff: map[string]struct{}{"b": {}, "d": {}}}
	if w := f.waitingSample(); w != nil {
		t.Fatalf("before the remote index: %v", w)
	}
	f.remoteReady = true
	for _, p := range []string{"c", "e"} { // changed twice: waiting
		f.settle[1].seen(p, now)
		f.settle[1].hold(p, now)
	}
	f.settle[0].seen("a", now)
	f.settle[0].hold("a", now)
	f.settle[0].seen("z", now.Add(-time.Second))
	f.settle[0].hold("z", now.Add(-time.Second))
	f.settle[0].due(now, nil) // z's wait ended
	if got := strings.Join(f.waitingSample(), " "); got != "a b c d e" {
		t.Fatalf("waiting %q", got)
	}
	for i := range 3 * maxWaiting {
		f.diff[fmt.Sprint("many/", i)] = struct{}{}
	}
	if n := len(f.waitingSample()); n != maxWaiting {
		t.Fatalf("%d waiting named, want %d", n, maxWaiting)
	}
}

func TestGrowingFileSentOnceSettled(t *testing.T) {
	const size = 64 << 20
	p := newPair(t, ClientOptions{})
	write(t, p.local, "keep", "x")
	p.start(ClientOptions{})
	defer p.stop()
	p.waitEqual(10 * time.Second)
	for _, dir := range []struct {
		name     string
		from, to string
		counter  func() int64
	}{
		{"up", p.local, p.remote, p.sent.Load},
		{"down", p.remote, p.local, p.received.Load},
	} {
		before := dir.counter()
		data, pauses := growFile(t, filepath.Join(dir.from, "big-"+dir.name), size, 2*time.Second)
		deadline := time.Now().Add(60 * time.Second)
		for {
			if b, err := os.ReadFile(filepath.Join(dir.to, "big-"+dir.name)); err == nil && bytes.Equal(b, data) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: the file never arrived whole: %+v", dir.name, p.c.Status())
			}
			time.Sleep(50 * time.Millisecond)
		}
		p.waitEqual(20 * time.Second)
		moved := dir.counter() - before
		t.Logf("%s: %.1f MiB on the stream for a %d MiB file (writer paused %d times for %v or more)", dir.name, float64(moved)/(1<<20), size>>20, pauses, settleQuiet)
		if limit := int64(size) * int64(pauses+1) * 3 / 2; moved > limit {
			t.Errorf("%s: %d bytes on the stream for a %d-byte file written over 2 s with %d pauses (sent again while written)", dir.name, moved, size, pauses)
		}
	}
}

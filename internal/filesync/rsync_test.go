package filesync

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/cespare/xxhash/v2"
)

// deltaRoundTrip signs basis, makes the delta of next against it, applies
// it to basis and returns the result and the delta's size.
func deltaRoundTrip(t testing.TB, basis, next []byte, bits uint8) ([]byte, int) {
	t.Helper()
	ctx := context.Background()
	sig, err := makeSignatureBits(ctx, bytes.NewReader(basis), bits)
	if err != nil {
		t.Fatal(err)
	}
	var frames [][]byte
	w := &deltaWriter{emit: func(d []byte) error {
		if len(d) > chunkSize+64 {
			t.Fatalf("a delta frame of %d bytes (bound %d)", len(d), chunkSize+64)
		}
		frames = append(frames, append([]byte(nil), d...))
		return nil
	}}
	if err := makeDelta(ctx, bytes.NewReader(next), sig, w); err != nil {
		t.Fatal(err)
	}
	last, err := w.finish()
	if err != nil {
		t.Fatal(err)
	}
	frames = append(frames, append([]byte(nil), last...))
	a := &deltaApplier{basis: bytes.NewReader(basis), size: int64(len(basis))}
	var out bytes.Buffer
	size := 0
	for _, f := range frames {
		size += len(f)
		if err := a.apply(ctx, f, func(b []byte) error { out.Write(b); return nil }); err != nil {
			t.Fatalf("apply: %v", err)
		}
	}
	return out.Bytes(), size
}

func randBytes(seed uint64, n int) []byte {
	b := make([]byte, n)
	r := rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8), 1})
	_, _ = r.Read(b)
	return b
}

func TestDeltaRoundTrip(t *testing.T) {
	base := randBytes(1, 3<<20)
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	flip := append([]byte(nil), base...)
	flip[len(flip)/2] ^= 0xff
	cases := []struct {
		name    string
		next    []byte
		maxSize int // bound on the delta's bytes
	}{
		{"same", base, 1 << 10},
		{"one byte changed", flip, 200 << 10},
		{"inserted at the start", cat([]byte("hello"), base), 200 << 10},
		{"deleted in the middle", cat(base[:1<<20], base[1<<20+777:]), 200 << 10},
		{"appended", cat(base, randBytes(2, 5000)), 200 << 10},
		{"truncated", base[:2<<20], 1 << 10},
		{"all new", randBytes(3, 1<<20), 1<<20 + 1<<10},
		{"empty", nil, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, size := deltaRoundTrip(t, base, c.next, sigBits(int64(len(base))))
			if !bytes.Equal(got, c.next) {
				t.Fatalf("rebuilt %d bytes differ from the %d sent", len(got), len(c.next))
			}
			if size > c.maxSize {
				t.Errorf("delta of %d bytes (at most %d expected)", size, c.maxSize)
			}
		})
	}
}

func TestSigBits(t *testing.T) {
	for _, c := range []struct {
		size int64
		want uint8
	}{
		{1000, 0}, {64 << 10, minSigBits}, {100 << 20, 13}, {1 << 30, 15}, {16 << 30, 18}, {64 << 30, 20}, {100 << 30, 0},
	} {
		if got := sigBits(c.size); got != c.want {
			t.Errorf("sigBits(%d) = %d, want %d", c.size, got, c.want)
		}
	}
	if !deltaPol.Irreducible() {
		t.Fatal("the chunking polynomial is not irreducible")
	}
}

// A delta never reads outside its basis, and malformed records are errors.
func TestDeltaApplyRefusesBadRecords(t *testing.T) {
	a := &deltaApplier{basis: bytes.NewReader(make([]byte, 100)), size: 100}
	for _, rec := range [][]byte{
		{recCopy, 90, 20},    // past the end
		{recCopy, 0, 0},      // empty copy
		{recCopy, 0xff},      // truncated varint
		{recLiteral, 5, 'a'}, // literal longer than the frame
		{'x'},                // unknown record
		{recCopy, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 1}, // huge offset
	} {
		if err := a.apply(context.Background(), rec, func([]byte) error { return nil }); err == nil {
			t.Errorf("record %q accepted", rec)
		}
	}
}

// Hashing for a signature stops when the context ends (a multi-GiB file at
// Ctrl-C).
func TestSignatureHonoursContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	r := &endless{cancel: cancel, after: 8 << 20}
	done := make(chan error, 1)
	go func() {
		_, err := makeSignatureBits(ctx, r, minSigBits)
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("got %v, want context.Canceled", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("signature of an endless file did not stop with its context")
	}
	if r.n > r.after+1<<20 {
		t.Errorf("%d bytes read after the context ended at %d", r.n-r.after, r.after)
	}
}

// endless returns bytes for ever, cancelling after some.
type endless struct {
	n, after int64
	cancel   func()
}

func (e *endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(e.n + int64(i)*7)
	}
	e.n += int64(len(p))
	if e.n >= e.after {
		e.cancel()
	}
	return len(p), nil
}

func FuzzDelta(f *testing.F) {
	f.Add([]byte("the quick brown fox jumps over the lazy dog"), []byte("the quick brown cat jumps over the lazy dog"), uint8(0))
	f.Add(randBytes(4, 5000), randBytes(5, 3000), uint8(1))
	f.Add([]byte{}, []byte("x"), uint8(2))
	f.Fuzz(func(t *testing.T, basis, next []byte, b uint8) {
		if len(basis) > 1<<20 || len(next) > 1<<20 {
			return
		}
		bits := wireMinSigBits + b%4
		got, _ := deltaRoundTrip(t, basis, next, bits)
		if !bytes.Equal(got, next) {
			t.Fatalf("rebuilt %d bytes differ from the %d sent", len(got), len(next))
		}
		// The same bytes as records: never a panic, never a read past the basis.
		a := &deltaApplier{basis: bytes.NewReader(basis), size: int64(len(basis))}
		total := 0
		_ = a.apply(context.Background(), next, func(p []byte) error {
			total += len(p)
			if total > 1<<30 {
				return errors.New("unbounded")
			}
			return nil
		})
		// and as a signature frame
		d := &decoder{b: next}
		decodeSig(d)
	})
}

// editByte changes one byte of the file at path in place.
func editByte(t testing.TB, path string, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	must(t, err)
	defer f.Close()
	b := []byte{0}
	_, err = f.ReadAt(b, off)
	must(t, err)
	b[0] ^= 0x5a
	_, err = f.WriteAt(b, off)
	must(t, err)
}

func fileHash(t testing.TB, path string) uint64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	h := xxhash.New()
	_, _ = io.Copy(h, f)
	return h.Sum64()
}

// dpair runs a Client and Serve over net.Pipe for any testing.TB, with the
// bytes on the client's streams counted and the server's options chosen.
type dpair struct {
	tb              testing.TB
	local, remote   string
	clientDir, sdir string
	c               *Client
	sopts           ServerOptions
	cancel          context.CancelFunc
	done            chan error
	wg              sync.WaitGroup
	sent, received  countingTotals
	opens           int
}

type countingTotals struct {
	mu sync.Mutex
	n  int64
}

func (c *countingTotals) add(n int) { c.mu.Lock(); c.n += int64(n); c.mu.Unlock() }
func (c *countingTotals) load() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

type dconn struct {
	net.Conn
	p *dpair
}

func (c dconn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.p.received.add(n)
	return n, err
}

func (c dconn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.p.sent.add(n)
	return n, err
}

func newDPair(tb testing.TB) *dpair {
	base := tb.TempDir()
	p := &dpair{tb: tb, local: filepath.Join(base, "local"), remote: filepath.Join(base, "remote"),
		clientDir: filepath.Join(base, "cstate"), sdir: filepath.Join(base, "sstate")}
	must(tb, os.MkdirAll(p.local, 0o755))
	must(tb, os.MkdirAll(p.remote, 0o755))
	return p
}

func (p *dpair) start(opts ClientOptions) {
	opts.Folders = []Folder{{Local: p.local, Remote: p.remote}}
	opts.StateDir = p.clientDir
	c, err := NewClient(opts)
	must(p.tb, err)
	p.c = c
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	p.done = make(chan error, 1)
	sopts := p.sopts
	sopts.StateDir = p.sdir
	open := func() (io.ReadWriteCloser, error) {
		p.opens++
		a, b := net.Pipe()
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			_ = Serve(ctx, b, sopts)
		}()
		return dconn{a, p}, nil
	}
	go func() { p.done <- c.Run(ctx, open) }()
}

func (p *dpair) stop() {
	p.cancel()
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		p.tb.Fatal("sync did not stop")
	}
	p.wg.Wait()
}

// waitSame waits until rel is the same on both sides and nothing is pending.
func (p *dpair) waitSame(rel string, timeout time.Duration) {
	p.tb.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		a, b := fileHash(p.tb, filepath.Join(p.local, rel)), fileHash(p.tb, filepath.Join(p.remote, rel))
		if a != 0 && a == b {
			if st := p.c.Status(); st.Synced && st.Folders[0].Pending == 0 {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	p.tb.Fatalf("%s not the same on both sides within %s: %+v", rel, timeout, p.c.Status())
}

// oneByteIn100MiB syncs a 100 MiB file, changes one byte locally, then one
// remotely, and returns the bytes on the stream (both directions: the
// signature comes from the receiver) for the first edit and for the second.
func oneByteIn100MiB(tb testing.TB, opts ClientOptions) (push, pull int64) {
	const size = 100 << 20
	p := newDPair(tb)
	must(tb, os.WriteFile(filepath.Join(p.local, "big.bin"), randBytes(7, size), 0o644))
	p.start(opts)
	defer p.stop()
	p.waitSame("big.bin", 3*time.Minute)

	total := func() int64 { return p.sent.load() + p.received.load() }
	n0 := total()
	editByte(tb, filepath.Join(p.local, "big.bin"), size/2)
	p.waitSame("big.bin", 3*time.Minute)
	push = total() - n0

	n1 := total()
	editByte(tb, filepath.Join(p.remote, "big.bin"), size/3)
	p.waitSame("big.bin", 3*time.Minute)
	pull = total() - n1
	return push, pull
}

// One byte changed in a 100 MiB file travels as a delta, either way: under
// 1 MiB on the stream for an edit on each side, signature included (the
// file sent whole is 100 MiB).
func TestDeltaOneByteIn100MiB(t *testing.T) {
	if testing.Short() {
		t.Skip("100 MiB")
	}
	push, pull := oneByteIn100MiB(t, ClientOptions{})
	t.Logf("1 byte changed in 100 MiB: %d bytes on the stream for a local edit, %d for a remote one", push, pull)
	if push >= 1<<20 || pull >= 1<<20 {
		t.Fatalf("1 byte changed in 100 MiB: %d bytes on the stream for a local edit, %d for a remote one (want < 1 MiB each)", push, pull)
	}
}

// BenchmarkDelta100MiB: bytes on the stream for 1 byte changed in 100 MiB,
// as a delta and whole (the same edits, same run), and the ratio.
func BenchmarkDelta100MiB(b *testing.B) {
	for i := 0; i < b.N; i++ {
		var res [2][2]int64
		var took [2]time.Duration
		for k, noDelta := range []bool{false, true} {
			t0 := time.Now()
			res[k][0], res[k][1] = oneByteIn100MiB(b, ClientOptions{noDelta: noDelta})
			took[k] = time.Since(t0)
		}
		ratio := float64(res[0][0]+res[0][1]) / float64(res[1][0]+res[1][1])
		b.ReportMetric(float64(res[0][0]), "delta-push-B")
		b.ReportMetric(float64(res[0][1]), "delta-pull-B")
		b.ReportMetric(float64(res[1][0]), "whole-push-B")
		b.ReportMetric(float64(res[1][1]), "whole-pull-B")
		b.ReportMetric(ratio, "delta/whole")
		b.Logf("1 byte changed in 100 MiB, bytes on the stream: delta %d (local edit) / %d (remote edit), whole %d / %d (delta/whole %.5f); runs took %s (delta) and %s (whole)",
			res[0][0], res[0][1], res[1][0], res[1][1], ratio, took[0].Round(time.Millisecond), took[1].Round(time.Millisecond))
	}
}

package filesync

// Delta transfer (protocol 3): a large file edited on one side travels as the
// difference from the other side's copy, as rsync does, except that blocks
// are cut where the content says (content-defined chunking) instead of at
// fixed offsets, so an insertion moves no boundary but its own.
//
// The side that receives the new version (it holds the basis, its current
// copy) cuts the basis into chunks with a rolling Rabin fingerprint
// (github.com/restic/chunker, restic's chunker: a well-kept, dependency-free
// module) and sends their xxhash64 and sizes: the signature. The side that
// sends cuts its file the same way; a chunk whose hash and size are in the
// signature travels as "copy OFFSET LENGTH from the basis", any other as its
// bytes. The receiver rebuilds the file from its basis into the usual
// temporary file, and the whole-content hash decides, as for every transfer:
// a basis that changed meanwhile gives another hash and the file is not put
// in place (reconciled again, sent whole the next time).
//
// Chunk sizes follow the square root of the basis size (the classic rsync
// trade-off between signature and literal bytes), 8 KiB to 1 MiB on average,
// a quarter of that at least and four times at most: one byte changed in
// 100 MiB costs about 130 KB (the signature) plus a chunk or two. Memory is
// bounded: at most maxSigChunks chunks per signature (a larger file goes
// whole), signatures held at once are capped on both sides, and file content
// is read in bounded buffers. Every read of a file for a signature or a
// delta goes through ctxReader, so a multi-GiB file stops being hashed when
// the session ends.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/bits"

	"github.com/cespare/xxhash/v2"
	"github.com/restic/chunker"
)

const (
	// deltaMin is the smallest new version sent as a delta: below it the
	// whole file costs about what the signature's round trip does.
	deltaMin = 1 << 20
	// deltaMinBasis is the smallest basis worth a signature.
	deltaMinBasis = 64 << 10
	// minSigBits and maxSigBits bound the average chunk size (2^bits).
	minSigBits = 13
	maxSigBits = 20
	// fuzzSigBits is the smallest average accepted on the wire (tests use
	// small chunks); the chunker needs a minimum above its 64-byte window.
	wireMinSigBits = 8
	// maxSigChunks bounds a signature (and the index built from it).
	maxSigChunks = 1 << 17
	// sigPerMsg is the number of chunks per signature frame (~11 bytes each).
	sigPerMsg = 50000
	// maxSigsHeld bounds the chunks of the signatures a side holds at once
	// (waiting for their transfer); past it a transfer goes whole.
	maxSigsHeld = 4 * maxSigChunks
)

// deltaPol is the irreducible polynomial both sides cut with (fixed: the two
// sides must cut alike).
const deltaPol = chunker.Pol(0x3DA3358B4DC173)

// sigChunk is one chunk of a basis: its xxhash64 and size.
type sigChunk struct {
	Hash uint64
	Size uint32
}

// signature describes a basis file for a delta: the chunking parameter and
// its chunks in file order. A nil *signature means "send the whole file".
type signature struct {
	Bits   uint8
	Chunks []sigChunk
}

// sigBits is the chunking parameter for a basis of size bytes: about the
// square root of the size, within [minSigBits, maxSigBits]; 0 when the file
// is too small or too large for a delta.
func sigBits(size int64) uint8 {
	if size < deltaMinBasis {
		return 0
	}
	b := bits.Len64(uint64(size)) / 2 // about log2(sqrt(size))
	b = max(b, minSigBits)
	for b <= maxSigBits && size>>b > maxSigChunks/2 {
		b++
	}
	if b > maxSigBits {
		return 0
	}
	return uint8(b)
}

// chunkBounds are the minimum and maximum chunk sizes for an average of 2^b.
func chunkBounds(b uint8) (lo, hi uint) {
	avg := uint(1) << b
	return avg / 4, avg * 4
}

// ctxReader fails with ctx's error once ctx ends: hashing a file of gigabytes
// stops at once.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// chunks cuts r with parameter b and calls fn with each chunk (valid until
// the next call).
func chunks(ctx context.Context, r io.Reader, b uint8, fn func([]byte) error) error {
	lo, hi := chunkBounds(b)
	ch := chunker.NewWithBoundaries(ctxReader{ctx, r}, deltaPol, lo, hi)
	ch.SetAverageBits(int(b))
	buf := make([]byte, 0, hi)
	for {
		c, err := ch.Next(buf)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := fn(c.Data); err != nil {
			return err
		}
		buf = c.Data[:0]
	}
}

// makeSignature cuts the basis r (size bytes) and returns its signature, or
// nil when the file does not suit a delta (too small, too large, or it grew
// past maxSigChunks chunks while being read).
func makeSignature(ctx context.Context, r io.Reader, size int64) (*signature, error) {
	b := sigBits(size)
	if b == 0 {
		return nil, nil
	}
	return makeSignatureBits(ctx, r, b)
}

var errTooManyChunks = errors.New("too many chunks for a signature")

func makeSignatureBits(ctx context.Context, r io.Reader, b uint8) (*signature, error) {
	sig := &signature{Bits: b}
	err := chunks(ctx, r, b, func(c []byte) error {
		if len(sig.Chunks) >= maxSigChunks {
			return errTooManyChunks
		}
		sig.Chunks = append(sig.Chunks, sigChunk{Hash: xxhash.Sum64(c), Size: uint32(len(c))})
		return nil
	})
	if errors.Is(err, errTooManyChunks) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return sig, nil
}

// Delta records, in the Data of the chunk frames of an opDelta:
//
//	'c' uvarint(offset) uvarint(length)   copy from the basis
//	'l' uvarint(length) bytes             literal bytes
const (
	recCopy    = 'c'
	recLiteral = 'l'
)

// deltaWriter turns chunks of the new file into records, batched into
// frames of about chunkSize.
type deltaWriter struct {
	buf              []byte
	copyOff, copyLen int64 // the copy being extended (copyLen 0: none)
	emit             func(data []byte) error
	// Copied and Literal count what the delta reuses and what it carries.
	Copied, Literal int64
}

func (w *deltaWriter) flushCopy() error {
	if w.copyLen == 0 {
		return nil
	}
	w.buf = append(w.buf, recCopy)
	w.buf = binary.AppendUvarint(w.buf, uint64(w.copyOff))
	w.buf = binary.AppendUvarint(w.buf, uint64(w.copyLen))
	w.copyLen = 0
	return w.maybeEmit()
}

func (w *deltaWriter) maybeEmit() error {
	if len(w.buf) < chunkSize {
		return nil
	}
	err := w.emit(w.buf)
	w.buf = w.buf[:0]
	return err
}

func (w *deltaWriter) copyFrom(off, n int64) error {
	w.Copied += n
	if w.copyLen > 0 && w.copyOff+w.copyLen == off {
		w.copyLen += n
		return nil
	}
	if err := w.flushCopy(); err != nil {
		return err
	}
	w.copyOff, w.copyLen = off, n
	return nil
}

func (w *deltaWriter) literal(p []byte) error {
	if err := w.flushCopy(); err != nil {
		return err
	}
	w.Literal += int64(len(p))
	for len(p) > 0 {
		room := chunkSize - len(w.buf)
		if room < 64 {
			if err := w.emit(w.buf); err != nil {
				return err
			}
			w.buf = w.buf[:0]
			continue
		}
		n := min(len(p), room)
		w.buf = append(w.buf, recLiteral)
		w.buf = binary.AppendUvarint(w.buf, uint64(n))
		w.buf = append(w.buf, p[:n]...)
		p = p[n:]
		if err := w.maybeEmit(); err != nil {
			return err
		}
	}
	return nil
}

// finish writes what is pending; the last frame's data is returned (the
// caller sends it marked last).
func (w *deltaWriter) finish() ([]byte, error) {
	if err := w.flushCopy(); err != nil {
		return nil, err
	}
	return w.buf, nil
}

type chunkLoc struct {
	off  int64
	size uint32
}

// makeDelta cuts r as sig says and writes records through w.
func makeDelta(ctx context.Context, r io.Reader, sig *signature, w *deltaWriter) error {
	idx := make(map[uint64]chunkLoc, len(sig.Chunks))
	var off int64
	for _, c := range sig.Chunks {
		if _, ok := idx[c.Hash]; !ok {
			idx[c.Hash] = chunkLoc{off: off, size: c.Size}
		}
		off += int64(c.Size)
	}
	return chunks(ctx, r, sig.Bits, func(c []byte) error {
		if loc, ok := idx[xxhash.Sum64(c)]; ok && int(loc.size) == len(c) {
			return w.copyFrom(loc.off, int64(len(c)))
		}
		return w.literal(c)
	})
}

// deltaApplier rebuilds a file from a basis and records.
type deltaApplier struct {
	basis io.ReaderAt
	size  int64 // the basis's size
	buf   []byte
}

// apply decodes the records in data, writing the result through out. A
// record that reaches past the basis, or any malformed byte, is an error.
func (a *deltaApplier) apply(ctx context.Context, data []byte, out func([]byte) error) error {
	for len(data) > 0 {
		tag := data[0]
		data = data[1:]
		switch tag {
		case recCopy:
			off, k := binary.Uvarint(data)
			if k <= 0 {
				return errors.New("corrupt delta: copy offset")
			}
			data = data[k:]
			n, k := binary.Uvarint(data)
			if k <= 0 {
				return errors.New("corrupt delta: copy length")
			}
			data = data[k:]
			if n == 0 || off > uint64(a.size) || n > uint64(a.size)-off {
				return fmt.Errorf("corrupt delta: copy of %d bytes at %d from a basis of %d", n, off, a.size)
			}
			if a.buf == nil {
				a.buf = make([]byte, chunkSize)
			}
			for pos, end := int64(off), int64(off+n); pos < end; {
				if err := ctx.Err(); err != nil {
					return err
				}
				m := int(min(int64(len(a.buf)), end-pos))
				k, err := a.basis.ReadAt(a.buf[:m], pos)
				if k < m {
					if err == nil || errors.Is(err, io.EOF) {
						err = fmt.Errorf("%w: its copy here is shorter than when its signature was taken", errChanged)
					}
					return err
				}
				if err := out(a.buf[:m]); err != nil {
					return err
				}
				pos += int64(m)
			}
		case recLiteral:
			n, k := binary.Uvarint(data)
			if k <= 0 || n > uint64(len(data)-k) {
				return errors.New("corrupt delta: literal length")
			}
			data = data[k:]
			if err := out(data[:n]); err != nil {
				return err
			}
			data = data[n:]
		default:
			return fmt.Errorf("corrupt delta: record type %d", tag)
		}
	}
	return nil
}

// sigMsg carries part of a signature (protocol 3): the receiver of a
// file's new version sends it before a pull's get, and the agent sends it
// in answer to a sigReqMsg before a push. Bits 0 is "no signature: send the
// whole file" (the basis changed, is unreadable, or does not suit a delta).
type sigMsg struct {
	ID     uint64
	Bits   uint8
	Chunks []sigChunk
	Last   bool
}

// sigReqMsg asks the agent for the signature of its copy of Path, which
// must still be Expect.
type sigReqMsg struct {
	ID     uint64
	Folder int
	Path   string
	Expect Entry
}

func encodeSig(e *encoder, m *sigMsg) {
	e.uvarint(m.ID)
	e.byte1(m.Bits)
	e.bool(m.Last)
	e.uvarint(uint64(len(m.Chunks)))
	for _, c := range m.Chunks {
		e.u64(c.Hash)
		e.uvarint(uint64(c.Size))
	}
}

func decodeSig(d *decoder) *sigMsg {
	m := &sigMsg{ID: d.uvarint(), Bits: d.byte1(), Last: d.bool()}
	if d.err == nil && m.Bits != 0 && (m.Bits < wireMinSigBits || m.Bits > maxSigBits) {
		d.fail(fmt.Errorf("signature chunk parameter %d (0 or %d to %d)", m.Bits, wireMinSigBits, maxSigBits))
	}
	n := d.count(9)
	if n > 0 {
		m.Chunks = make([]sigChunk, 0, n)
	}
	_, hi := chunkBounds(maxSigBits)
	for i := 0; i < n && d.err == nil; i++ {
		c := sigChunk{Hash: d.u64()}
		s := d.uvarint()
		if d.err == nil && (s == 0 || s > uint64(hi)) {
			d.fail(fmt.Errorf("signature chunk of %d bytes", s))
		}
		c.Size = uint32(s)
		m.Chunks = append(m.Chunks, c)
	}
	return m
}

// sigJob makes the signature of this side's copy of Path (which must still
// be Expect) and sends it; then, when set, the message then (a pull's get).
type sigJob struct {
	ID     uint64
	Folder int
	Path   string
	Expect Entry
	then   any
}

// sigCollector gathers the signature frames of each transfer, within
// maxSigsHeld chunks in all: a signature past the budget is dropped and its
// transfer goes whole. One goroutine (a stream reader) uses it.
type sigCollector struct {
	parts map[uint64]*signature
	held  int
}

// add takes one frame; it returns the whole signature (nil: send whole) and
// true once the last frame of m.ID arrived.
func (sc *sigCollector) add(m *sigMsg) (*signature, bool) {
	if sc.parts == nil {
		sc.parts = map[uint64]*signature{}
	}
	s, ok := sc.parts[m.ID]
	if !ok {
		s = &signature{Bits: m.Bits}
		sc.parts[m.ID] = s
	}
	if s.Bits != 0 && (m.Bits != s.Bits || len(s.Chunks)+len(m.Chunks) > maxSigChunks || sc.held+len(m.Chunks) > maxSigsHeld) {
		sc.held -= len(s.Chunks)
		s.Bits, s.Chunks = 0, nil // dropped: the transfer goes whole
	}
	if s.Bits != 0 {
		s.Chunks = append(s.Chunks, m.Chunks...)
		sc.held += len(m.Chunks)
	}
	if !m.Last {
		return nil, false
	}
	delete(sc.parts, m.ID)
	if s.Bits == 0 || len(s.Chunks) == 0 {
		return nil, true
	}
	return s, true
}

// release forgets a complete signature's chunks (its transfer started).
func (sc *sigCollector) release(s *signature) {
	if s != nil {
		sc.held -= len(s.Chunks)
	}
}

// sendSignature makes and sends the signature of this side's copy of j.Path
// (a sigJob): chunked into frames, ending with Last; "no signature" when the
// file is not what j.Expect says or does not suit a delta.
func (s *sender) sendSignature(ctx context.Context, j *sigJob) error {
	var sig *signature
	if j.Folder >= 0 && j.Folder < len(s.trees) {
		t := s.trees[j.Folder]
		t.mu.Lock()
		cur, err := t.expect(j.Path, j.Expect)
		t.mu.Unlock()
		if err == nil && cur.Kind == KindFile {
			if f, err := t.open(j.Path); err == nil {
				sig, err = makeSignature(ctx, f, cur.Size)
				f.Close()
				if ctx.Err() != nil {
					return ctx.Err()
				}
				if err != nil {
					sig = nil
				}
			}
		}
	}
	m := &sigMsg{ID: j.ID}
	if sig != nil {
		m.Bits = sig.Bits
		for len(sig.Chunks) > sigPerMsg {
			m.Chunks = sig.Chunks[:sigPerMsg]
			if err := s.send(m); err != nil {
				return err
			}
			sig.Chunks = sig.Chunks[sigPerMsg:]
		}
		m.Chunks = sig.Chunks
	}
	m.Last = true
	if err := s.send(m); err != nil {
		return err
	}
	if j.then != nil {
		return s.send(j.then)
	}
	return nil
}

// sendDelta sends file f (state cur) as a delta against j.Sig: the op, then
// record frames, the last marked; Abort when the file turned out to differ
// from cur (it grew, or its hash changed while being read).
func (s *sender) sendDelta(ctx context.Context, j *sendJob, op *opMsg, cur Entry, f io.Reader) error {
	op.Code = opDelta
	if err := s.send(op); err != nil {
		return err
	}
	h := newHasher()
	cr := &countingReader{r: f, h: h, limit: cur.Size}
	var werr error // the stream's, not the file's
	w := &deltaWriter{emit: func(data []byte) error {
		werr = s.send(&chunkMsg{ID: j.ID, Data: data})
		return werr
	}}
	err := makeDelta(ctx, cr, j.Sig, w)
	var data []byte
	if err == nil {
		data, err = w.finish()
	}
	switch {
	case werr != nil:
		return werr
	case ctx.Err() != nil:
		return ctx.Err()
	case err == nil && cr.n == cur.Size && h.Sum64() == cur.Hash:
		s.DeltaCopied += w.Copied
		s.DeltaLiteral += w.Literal
		return s.send(&chunkMsg{ID: j.ID, Data: data, Last: true})
	}
	// grew, changed or unreadable: the receiver drops it, the watcher
	// brings the new version.
	return s.send(&chunkMsg{ID: j.ID, Last: true, Abort: true})
}

// countingReader hashes and counts what is read, failing past limit bytes
// (the file grew while it was sent).
type countingReader struct {
	r     io.Reader
	h     interface{ Write([]byte) (int, error) }
	n     int64
	limit int64
}

var errGrew = errors.New("the file grew while it was sent")

func (c *countingReader) Read(p []byte) (int, error) {
	k, err := c.r.Read(p)
	c.n += int64(k)
	_, _ = c.h.Write(p[:k])
	if c.n > c.limit {
		return k, errGrew
	}
	return k, err
}

// beginDelta starts receiving file p (state e) as a delta against this
// side's copy, which must still be expect (a file).
func (t *tree) beginDelta(p string, e Entry, expect Entry) (*putFile, error) {
	if expect.Kind != KindFile {
		return nil, fmt.Errorf("%s: a delta needs a file here to start from, the decision saw %s", p, expect.Kind)
	}
	pf, err := t.beginPut(p, e, expect)
	if err != nil {
		return nil, err
	}
	b, err := t.r.Open(p)
	if err == nil {
		var fi interface{ Size() int64 }
		if fi, err = b.Stat(); err == nil {
			pf.basis, pf.delta = b, &deltaApplier{basis: b, size: fi.Size()}
			return pf, nil
		}
		b.Close()
	}
	pf.abort()
	return nil, asVanished(p, err)
}

// take writes one chunk frame's data: file bytes, or delta records.
func (pf *putFile) take(ctx context.Context, data []byte) error {
	if pf.delta != nil {
		return pf.delta.apply(ctx, data, pf.write)
	}
	return pf.write(data)
}

func (pf *putFile) closeBasis() {
	if pf.basis != nil {
		pf.basis.Close()
		pf.basis = nil
	}
}

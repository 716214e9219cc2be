package filesync

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/zstd"
)

// The stream: a 6-byte hello each way ("DTSY" + big-endian protocol version),
// then blocks. A block is a 4-byte header (bit 31: zstd-compressed; low 31
// bits: payload length), for a compressed block a 4-byte decompressed length,
// then the payload: whole frames, each a uvarint length, a type byte and the
// body. Every length is checked against maxBlock before anything is read or
// allocated.
//
// Versions: the CLI's hello offers the newest protocol it speaks; from version
// 3 on, the agent answers min(offer, its newest) and both go on in that
// version (an offer below MinProtocolVersion is answered with the agent's
// newest and the stream ends, so the CLI names both). Version 2 agents
// required equality: offered anything else, they answer 2 and end the
// stream, so a CLI whose offer is answered with 2 opens a new stream and
// offers 2 (clientHandshake). What version 3 adds is sent only in a version 3
// session: a version 2 peer refuses any byte it does not know.

// ProtocolVersion is the newest sync protocol spoken by this build.
// Version 2: the agent's hello answer carries the state ID of each folder's
// remote index. Version 3: negotiated versions; the hello answer also
// carries each remote folder's capabilities; large edited files travel as
// deltas (rsync.go).
const ProtocolVersion = 3

// MinProtocolVersion is the oldest protocol this build still speaks: the
// previous release's.
const MinProtocolVersion = 2

// protoNegotiates is the first version whose agents answer an offer with
// min(offer, newest) instead of requiring equality.
const protoNegotiates = 3

const (
	magic       = "DTSY"
	maxBlock    = 1 << 20   // decoded block payload bound
	flushAt     = 256 << 10 // a block is sent once this full
	chunkSize   = 128 << 10 // file data per frame
	compressMin = 2 << 10   // smaller blocks are sent as they are
)

const (
	msgHello byte = iota + 1
	msgHelloOK
	msgRules
	msgEntries
	msgOp
	msgChunk
	msgResult
	msgGet
	msgFatal
	msgNotice
	// protocol 3
	msgSigReq // the client asks the agent for the signature of its copy of a file
	msgSig    // a file's signature (part of it), for a delta (rsync.go)
)

func writeHelloV(w io.Writer, v uint16) error {
	var b [6]byte
	copy(b[:], magic)
	binary.BigEndian.PutUint16(b[4:], v)
	_, err := w.Write(b[:])
	return err
}

// readHelloV reads the peer's hello and returns its version.
func readHelloV(r io.Reader, peer string) (uint16, error) {
	var b [6]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return 0, fmt.Errorf("reading the %s's sync hello: %w", peer, err)
	}
	if string(b[:4]) != magic {
		return 0, fmt.Errorf("%w: the %s does not speak the devtool sync protocol (got %q)", ErrVersion, peer, b[:4])
	}
	return binary.BigEndian.Uint16(b[4:]), nil
}

// writeHello offers (or answers with) this build's newest version.
func writeHello(w io.Writer) error { return writeHelloV(w, ProtocolVersion) }

// readHello reads the peer's hello and requires this build's newest version
// (tests and fake peers).
func readHello(r io.Reader, peer string) error {
	v, err := readHelloV(r, peer)
	if err == nil && v != ProtocolVersion {
		err = fmt.Errorf("%w: this end speaks version %d, the %s version %d", ErrVersion, ProtocolVersion, peer, v)
	}
	return err
}

// serverHandshake reads the CLI's offer and answers it: min(offer, newest),
// or, for an offer below MinProtocolVersion, newest and an error naming
// both. newest is ProtocolVersion but in tests; strict answers as version 2
// agents did (newest, and an error unless the offer was the same).
func serverHandshake(rw io.ReadWriter, newest uint16, strict bool) (uint16, error) {
	offer, err := readHelloV(rw, "devtool CLI")
	answer := newest
	if err == nil {
		switch {
		case strict && offer != newest:
			err = fmt.Errorf("%w: this end speaks version %d, the devtool CLI version %d", ErrVersion, newest, offer)
		case offer < MinProtocolVersion:
			err = fmt.Errorf("%w: the devtool CLI speaks sync protocol %d, this agent %d to %d: use a devtool CLI of a newer release",
				ErrVersion, offer, MinProtocolVersion, newest)
		default:
			answer = min(offer, newest)
		}
	}
	if werr := writeHelloV(rw, answer); err == nil && werr != nil {
		err = werr
	}
	return answer, err
}

// clientHandshake opens a stream and agrees on a version: newest (this
// build's but in tests) is offered; a version 2 agent answers 2 and ends the
// stream (it requires equality), so a second stream offers 2. The stream
// returned is past the hellos.
func clientHandshake(open func() (io.ReadWriteCloser, error), newest uint16) (io.ReadWriteCloser, uint16, error) {
	offer := newest
	for {
		rw, err := open()
		if err != nil {
			return nil, 0, err
		}
		v, err := exchangeHello(rw, offer)
		if err == nil && v < offer && v < protoNegotiates && offer >= protoNegotiates {
			// A strict (version 2) agent refused the offer and ended
			// the stream: offer what it speaks on a new one.
			rw.Close()
			offer = v
			continue
		}
		if err != nil {
			rw.Close()
			return nil, 0, err
		}
		return rw, v, nil
	}
}

// exchangeHello sends offer and reads the agent's answer, checking it.
func exchangeHello(rw io.ReadWriter, offer uint16) (uint16, error) {
	if err := writeHelloV(rw, offer); err != nil {
		return 0, fmt.Errorf("sync hello: %w", err)
	}
	v, err := readHelloV(rw, "devtool agent")
	if err != nil {
		return 0, err
	}
	switch {
	case v < MinProtocolVersion:
		return 0, fmt.Errorf("%w: the devtool agent in the dev container speaks sync protocol %d, this devtool CLI %d to %d: "+
			"run this release's 'devtool up', which upgrades the agent in place, or use a devtool CLI of the agent's release",
			ErrVersion, v, MinProtocolVersion, ProtocolVersion)
	case v > offer:
		return 0, fmt.Errorf("%w: the devtool agent answered sync protocol %d to an offer of %d (this devtool CLI speaks %d to %d): "+
			"use a devtool CLI of the agent's release, or run 'devtool up' of this release to put its agent in place",
			ErrVersion, v, offer, MinProtocolVersion, ProtocolVersion)
	}
	return v, nil
}

// frameWriter batches frames into blocks, compressing a block when that pays.
// One goroutine uses it.
type frameWriter struct {
	w      io.Writer
	buf    []byte
	zbuf   []byte
	enc    *zstd.Encoder
	skip   int // blocks left to send raw after one that did not shrink
	Bytes  int64
	Blocks int64
	// flushedAt is when the last block was sent; firstAt when the pending
	// block got its first frame.
	flushedAt, firstAt time.Time
}

// pending is the size of the block not yet sent.
func (fw *frameWriter) pending() int { return len(fw.buf) - 8 }

func newFrameWriter(w io.Writer) *frameWriter {
	opts := []zstd.EOption{zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1), zstd.WithLowerEncoderMem(true)}
	if memRelease >= releaseAll {
		// Blocks are compressed one by one (EncodeAll) and are at most
		// maxBlock long: a larger window finds nothing more, and its
		// history (4.6 MB instead of 1.5 MB) stays allocated.
		opts = append(opts, zstd.WithWindowSize(maxBlock))
	}
	enc, _ := zstd.NewWriter(nil, opts...)
	return &frameWriter{w: w, enc: enc, buf: make([]byte, 8, flushAt+chunkSize+64)}
}

// trim drops the compression buffer a burst grew (up to a block).
func (fw *frameWriter) trim() { fw.zbuf = nil }

func (fw *frameWriter) close() { fw.enc.Close() }

// frame appends one frame; it sends the block first when the frame would not
// fit, and after it when the block is full.
func (fw *frameWriter) frame(typ byte, body []byte) error {
	n := 1 + len(body)
	if n+binary.MaxVarintLen32 > maxBlock {
		return fmt.Errorf("frame of %d bytes exceeds the %d-byte bound", n, maxBlock)
	}
	if len(fw.buf)-8+n+binary.MaxVarintLen32 > maxBlock {
		if err := fw.flush(); err != nil {
			return err
		}
	}
	if len(fw.buf) == 8 {
		fw.firstAt = time.Now()
	}
	fw.buf = binary.AppendUvarint(fw.buf, uint64(n))
	fw.buf = append(fw.buf, typ)
	fw.buf = append(fw.buf, body...)
	if len(fw.buf)-8 >= flushAt {
		return fw.flush()
	}
	return nil
}

// flush sends the pending block.
func (fw *frameWriter) flush() error {
	payload := fw.buf[8:]
	if len(payload) == 0 {
		return nil
	}
	out := fw.buf[4:] // 4-byte header + payload
	binary.BigEndian.PutUint32(out, uint32(len(payload)))
	if len(payload) >= compressMin && fw.skip == 0 {
		fw.zbuf = fw.enc.EncodeAll(payload, append(fw.zbuf[:0], make([]byte, 8)...))
		if z := len(fw.zbuf) - 8; z < len(payload)*7/8 {
			binary.BigEndian.PutUint32(fw.zbuf, uint32(z)|1<<31)
			binary.BigEndian.PutUint32(fw.zbuf[4:], uint32(len(payload)))
			out = fw.zbuf
		} else {
			fw.skip = 8 // incompressible data: try again 8 blocks later
		}
	} else if fw.skip > 0 {
		fw.skip--
	}
	_, err := fw.w.Write(out)
	fw.Bytes += int64(len(out))
	fw.Blocks++
	fw.flushedAt = time.Now()
	fw.buf = fw.buf[:8]
	return err
}

// frameReader splits the stream back into frames.
type frameReader struct {
	r     *bufio.Reader
	raw   []byte
	block []byte
	rest  []byte
	dec   *zstd.Decoder
	// trimNext, set by another goroutine, drops the block buffers a burst
	// grew (up to maxBlock each) before the next block is read.
	trimNext atomic.Bool
}

func newFrameReader(r io.Reader) *frameReader {
	dec, _ := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(maxBlock), zstd.WithDecoderLowmem(true))
	return &frameReader{r: bufio.NewReaderSize(r, 64<<10), dec: dec}
}

func (fr *frameReader) close() { fr.dec.Close() }

// next returns the next frame; body is valid until the following call.
func (fr *frameReader) next() (typ byte, body []byte, err error) {
	for len(fr.rest) == 0 {
		if err := fr.readBlock(); err != nil {
			return 0, nil, err
		}
	}
	n, k := binary.Uvarint(fr.rest)
	if k <= 0 || n == 0 || n > uint64(len(fr.rest)-k) {
		return 0, nil, fmt.Errorf("corrupt sync stream: frame length %d with %d bytes left in the block", n, len(fr.rest))
	}
	f := fr.rest[k : k+int(n)]
	fr.rest = fr.rest[k+int(n):]
	return f[0], f[1:], nil
}

func (fr *frameReader) readBlock() error {
	var h [4]byte
	if _, err := io.ReadFull(fr.r, h[:]); err != nil {
		return err
	}
	v := binary.BigEndian.Uint32(h[:])
	compressed := v&(1<<31) != 0
	n := int(v &^ (1 << 31))
	if fr.trimNext.Swap(false) {
		fr.raw, fr.block = nil, nil
	}
	if n == 0 || n > maxBlock {
		return fmt.Errorf("corrupt sync stream: block length %d (bound %d)", n, maxBlock)
	}
	if !compressed {
		fr.block = grow(fr.block, n)
		if _, err := io.ReadFull(fr.r, fr.block); err != nil {
			return unexpected(err)
		}
		fr.rest = fr.block
		return nil
	}
	if _, err := io.ReadFull(fr.r, h[:]); err != nil {
		return unexpected(err)
	}
	m := int(binary.BigEndian.Uint32(h[:]))
	if m == 0 || m > maxBlock {
		return fmt.Errorf("corrupt sync stream: decompressed block length %d (bound %d)", m, maxBlock)
	}
	fr.raw = grow(fr.raw, n)
	if _, err := io.ReadFull(fr.r, fr.raw); err != nil {
		return unexpected(err)
	}
	out, err := fr.dec.DecodeAll(fr.raw, fr.block[:0])
	if err != nil {
		return fmt.Errorf("corrupt sync stream: %w", err)
	}
	if len(out) != m {
		return fmt.Errorf("corrupt sync stream: block decompressed to %d bytes, header said %d", len(out), m)
	}
	fr.block = out
	fr.rest = out
	return nil
}

func grow(b []byte, n int) []byte {
	if cap(b) < n {
		return make([]byte, n)
	}
	return b[:n]
}

func unexpected(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

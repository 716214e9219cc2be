package filesync

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
)

// Kind is what a path is.
type Kind uint8

const (
	KindNone Kind = iota // absent
	KindFile
	KindDir
	KindSymlink
)

func (k Kind) String() string {
	switch k {
	case KindNone:
		return "absent"
	case KindFile:
		return "file"
	case KindDir:
		return "directory"
	case KindSymlink:
		return "symlink"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Entry is what one side knows about a path. The zero Entry means absent.
type Entry struct {
	Kind Kind
	Exec bool // any executable bit (files)
	// racy: the mtime was within racyWindow of the moment the hash was
	// taken, so a later write in the same timestamp tick could leave size and
	// mtime unchanged; the hash is recomputed rather than trusted.
	racy  bool
	Size  int64  // files
	MTime int64  // unix nanoseconds, as last seen on this side
	Hash  uint64 // files: xxhash64 of the content; symlinks: the target's ID (see symlinkEntry)
}

// An Entry is 32 bytes: a symlink's target is not kept in it but in
// symlinkTargets, by an ID in its Hash field. The engine keeps three indexes
// of a folder (local, base, remote), each an Entry per path: a string field
// cost every entry 16 bytes (21 a map slot) for the few that are symlinks —
// 6 MB of the idle client's memory after 100,000 files.

// symlinkTargets interns the symlink targets this process has seen: each
// distinct target gets an ID once, for the life of the process (targets are
// few and short; the table never shrinks).
var symlinkTargets struct {
	sync.Mutex
	id     map[string]uint64
	target []string // by ID-1
}

// symlinkEntry is the entry of a symlink to target (not empty) with mtime.
func symlinkEntry(target string, mtime int64) Entry {
	st := &symlinkTargets
	st.Lock()
	defer st.Unlock()
	id, ok := st.id[target]
	if !ok {
		if st.id == nil {
			st.id = map[string]uint64{}
		}
		st.target = append(st.target, target)
		id = uint64(len(st.target))
		st.id[target] = id
	}
	return Entry{Kind: KindSymlink, MTime: mtime, Hash: id}
}

// Target is a symlink's target ("" for other kinds).
func (e Entry) Target() string {
	if e.Kind != KindSymlink || e.Hash == 0 {
		return ""
	}
	st := &symlinkTargets
	st.Lock()
	defer st.Unlock()
	if e.Hash > uint64(len(st.target)) {
		return ""
	}
	return st.target[e.Hash-1]
}

// racyWindow covers the coarse clock file timestamps come from.
const racyWindow = int64(100 * 1e6)

// same reports whether two entries hold the same content for sync purposes:
// mtimes differ between sides and do not count.
func same(a, b Entry) bool {
	if a.Kind != b.Kind {
		return false
	}
	switch a.Kind {
	case KindFile:
		return a.Hash == b.Hash && a.Size == b.Size && a.Exec == b.Exec
	case KindSymlink:
		return a.Hash == b.Hash // one ID per target
	}
	return true
}

// Binary encoding shared by the wire and the persisted index.

type encoder struct{ b []byte }

func (e *encoder) uvarint(v uint64) { e.b = binary.AppendUvarint(e.b, v) }
func (e *encoder) varint(v int64)   { e.b = binary.AppendVarint(e.b, v) }
func (e *encoder) byte1(v byte)     { e.b = append(e.b, v) }
func (e *encoder) u64(v uint64)     { e.b = binary.LittleEndian.AppendUint64(e.b, v) }
func (e *encoder) str(s string)     { e.uvarint(uint64(len(s))); e.b = append(e.b, s...) }
func (e *encoder) bytes(p []byte)   { e.uvarint(uint64(len(p))); e.b = append(e.b, p...) }
func (e *encoder) bool(v bool) {
	if v {
		e.byte1(1)
	} else {
		e.byte1(0)
	}
}

func (e *encoder) entry(x Entry) {
	e.byte1(byte(x.Kind))
	switch x.Kind {
	case KindFile:
		var flags byte
		if x.Exec {
			flags |= 1
		}
		if x.racy {
			flags |= 2
		}
		e.byte1(flags)
		e.varint(x.Size)
		e.varint(x.MTime)
		e.u64(x.Hash)
	case KindDir:
		e.varint(x.MTime)
	case KindSymlink:
		e.varint(x.MTime)
		e.str(x.Target())
	}
}

var errShort = errors.New("truncated message")

// decoder reads what encoder wrote; every length is bounded by what is left,
// and the first error sticks.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(err error) {
	if d.err == nil {
		d.err = err
	}
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail(errShort)
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail(errShort)
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) byte1() byte {
	if d.err != nil {
		return 0
	}
	if len(d.b) < 1 {
		d.fail(errShort)
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *decoder) bool() bool { return d.byte1() != 0 }

func (d *decoder) u64() uint64 {
	if d.err != nil {
		return 0
	}
	if len(d.b) < 8 {
		d.fail(errShort)
		return 0
	}
	v := binary.LittleEndian.Uint64(d.b)
	d.b = d.b[8:]
	return v
}

func (d *decoder) bytes() []byte {
	n := d.uvarint()
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)) {
		d.fail(errShort)
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) str() string { return string(d.bytes()) }

// count reads a element count, bounded by the bytes left (each element takes
// at least min bytes), so a forged count cannot make a huge allocation.
func (d *decoder) count(min int) int {
	n := d.uvarint()
	if d.err != nil {
		return 0
	}
	if n > uint64(len(d.b)/min) {
		d.fail(fmt.Errorf("count %d larger than the message", n))
		return 0
	}
	return int(n)
}

func (d *decoder) entry() Entry {
	var x Entry
	x.Kind = Kind(d.byte1())
	switch x.Kind {
	case KindNone:
	case KindFile:
		flags := d.byte1()
		x.Exec, x.racy = flags&1 != 0, flags&2 != 0
		x.Size = d.varint()
		x.MTime = d.varint()
		x.Hash = d.u64()
		if x.Size < 0 {
			d.fail(fmt.Errorf("negative file size %d", x.Size))
		}
	case KindDir:
		x.MTime = d.varint()
	case KindSymlink:
		mtime, target := d.varint(), d.str()
		if target == "" || len(target) > maxPathLen {
			d.fail(fmt.Errorf("bad symlink target length %d", len(target)))
			break
		}
		x = symlinkEntry(target, mtime)
	default:
		d.fail(fmt.Errorf("unknown entry kind %d", x.Kind))
	}
	return x
}

package filesync

import (
	"errors"
	"fmt"
)

const (
	opPut     byte = iota + 1 // a file; chunk frames follow
	opMkdir                   // a directory
	opSymlink                 // a symlink (Entry.Target)
	opRemove                  // remove Path if it is still Expect
	opMove                    // rename Path to To (a conflict copy) if it is still Expect
	opDelta                   // protocol 3: a file rebuilt from Expect's content; delta chunk frames follow (rsync.go)
)

type helloMsg struct {
	Reset bool
	Roots []string
}

// helloOKMsg accepts the hello: IDs[i] is the identity of folder i's remote
// state (its index on the agent), new whenever that index is new, lost or
// unreadable. The client trusts its base only with the ID it was agreed with.
//
// Protocol 3 adds Caps[i], what folder i's filesystem on the agent keeps
// (probed in its root), encoded only in a protocol 3 session: a protocol 2
// CLI refuses bytes it does not know. Empty from a peer that sent none.
type helloOKMsg struct {
	IDs  []string
	Caps []caps
}

// The capability bits of the hello answer (a uvarint per folder). Unknown
// bits are ignored, so a later release can add some.
const (
	capExec       = 1 << iota // exec bits are kept
	capFoldCase               // names differing only in case are one file
	capFoldNorm               // names equal under Unicode normalization are one file
	capNoSymlinks             // symlinks cannot be created
)

func capsBits(c caps) uint64 {
	var b uint64
	if !c.noExec {
		b |= capExec
	}
	if c.foldCase {
		b |= capFoldCase
	}
	if c.foldNorm {
		b |= capFoldNorm
	}
	if c.noLinks {
		b |= capNoSymlinks
	}
	return b
}

func capsFromBits(b uint64) caps {
	return caps{noExec: b&capExec == 0, foldCase: b&capFoldCase != 0, foldNorm: b&capFoldNorm != 0, noLinks: b&capNoSymlinks != 0}
}

// defaultRemoteCaps are assumed for an agent that sends none (protocol 2):
// a Linux filesystem (the zero caps).
var defaultRemoteCaps = caps{}

const maxStateID = 64

type ruleFile struct{ Dir, Content string }

type rulesMsg struct {
	Folder   int
	Excludes []string
	Files    []ruleFile
}

type item struct {
	Path string
	E    Entry
}

// entriesMsg carries the server's index (Full: the whole of it, over several
// messages until Done) or the changes its watcher found.
type entriesMsg struct {
	Folder     int
	Full, Done bool
	Items      []item
}

type opMsg struct {
	ID     uint64
	Folder int
	Code   byte
	Path   string
	E      Entry // the new state (put, mkdir, symlink)
	Expect Entry // what Path must still be for the op to apply
	To     string
}

type chunkMsg struct {
	ID          uint64
	Data        []byte
	Last, Abort bool
}

// resultMsg answers an op or a get: the state of Path (and To) after it.
type resultMsg struct {
	ID      uint64
	Folder  int
	Path    string
	OK      bool
	Code    byte // why it failed: failChanged, failNotEmpty, failRefused, failOther
	Err     string
	State   Entry
	To      string
	ToState Entry
}

const (
	failOther byte = iota
	failChanged
	failNotEmpty
	failRefused
)

func failCode(err error) byte {
	switch {
	case errors.Is(err, errChanged):
		return failChanged
	case errors.Is(err, errNotEmpty):
		return failNotEmpty
	case errors.Is(err, errEscape), errors.Is(err, errIgnored):
		return failRefused
	}
	return failOther
}

type getMsg struct {
	ID     uint64
	Folder int
	Path   string
	Expect Entry
}

type fatalMsg struct{ Err string }

// noticeMsg tells the client something about a folder on the agent (e.g.
// that watching is incomplete), shown in status.
type noticeMsg struct {
	Folder int
	Text   string
}

func encodeMsg(e *encoder, m any) byte {
	switch m := m.(type) {
	case *helloMsg:
		e.bool(m.Reset)
		e.uvarint(uint64(len(m.Roots)))
		for _, r := range m.Roots {
			e.str(r)
		}
		return msgHello
	case *rulesMsg:
		e.uvarint(uint64(m.Folder))
		e.uvarint(uint64(len(m.Excludes)))
		for _, x := range m.Excludes {
			e.str(x)
		}
		e.uvarint(uint64(len(m.Files)))
		for _, f := range m.Files {
			e.str(f.Dir)
			e.str(f.Content)
		}
		return msgRules
	case *entriesMsg:
		e.uvarint(uint64(m.Folder))
		e.bool(m.Full)
		e.bool(m.Done)
		e.uvarint(uint64(len(m.Items)))
		for _, it := range m.Items {
			e.str(it.Path)
			e.entry(it.E)
		}
		return msgEntries
	case *opMsg:
		e.uvarint(m.ID)
		e.uvarint(uint64(m.Folder))
		e.byte1(m.Code)
		e.str(m.Path)
		e.entry(m.E)
		e.entry(m.Expect)
		e.str(m.To)
		return msgOp
	case *chunkMsg:
		e.uvarint(m.ID)
		e.bool(m.Last)
		e.bool(m.Abort)
		e.bytes(m.Data)
		return msgChunk
	case *resultMsg:
		e.uvarint(m.ID)
		e.uvarint(uint64(m.Folder))
		e.str(m.Path)
		e.bool(m.OK)
		e.byte1(m.Code)
		e.str(m.Err)
		e.entry(m.State)
		e.str(m.To)
		e.entry(m.ToState)
		return msgResult
	case *getMsg:
		e.uvarint(m.ID)
		e.uvarint(uint64(m.Folder))
		e.str(m.Path)
		e.entry(m.Expect)
		return msgGet
	case *fatalMsg:
		e.str(m.Err)
		return msgFatal
	case *noticeMsg:
		e.uvarint(uint64(m.Folder))
		e.str(m.Text)
		return msgNotice
	case *helloOKMsg:
		e.uvarint(uint64(len(m.IDs)))
		for _, id := range m.IDs {
			e.str(id)
		}
		if len(m.Caps) > 0 {
			e.uvarint(uint64(len(m.Caps)))
			for _, c := range m.Caps {
				e.uvarint(capsBits(c))
			}
		}
		return msgHelloOK
	case *sigReqMsg:
		e.uvarint(m.ID)
		e.uvarint(uint64(m.Folder))
		e.str(m.Path)
		e.entry(m.Expect)
		return msgSigReq
	case *sigMsg:
		encodeSig(e, m)
		return msgSig
	}
	panic(fmt.Sprintf("filesync: no encoding for %T", m))
}

// decodeMsg decodes one frame. Data slices alias body.
func decodeMsg(typ byte, body []byte) (any, error) {
	d := &decoder{b: body}
	var m any
	switch typ {
	case msgHello:
		x := &helloMsg{Reset: d.bool()}
		n := d.count(1)
		for i := 0; i < n && d.err == nil; i++ {
			x.Roots = append(x.Roots, d.str())
		}
		m = x
	case msgHelloOK:
		x := &helloOKMsg{}
		n := d.count(1)
		if d.err == nil && n > maxFolders {
			d.fail(fmt.Errorf("%d folder state IDs (at most %d)", n, maxFolders))
		}
		for i := 0; i < n && d.err == nil; i++ {
			id := d.str()
			if d.err == nil && (id == "" || len(id) > maxStateID) {
				d.fail(fmt.Errorf("state ID of %d bytes (1 to %d)", len(id), maxStateID))
			}
			x.IDs = append(x.IDs, id)
		}
		if d.err == nil && len(d.b) > 0 { // protocol 3
			n := d.count(1)
			if d.err == nil && n != len(x.IDs) {
				d.fail(fmt.Errorf("capabilities of %d folders for %d state IDs", n, len(x.IDs)))
			}
			for i := 0; i < n && d.err == nil; i++ {
				x.Caps = append(x.Caps, capsFromBits(d.uvarint()))
			}
		}
		m = x
	case msgRules:
		x := &rulesMsg{Folder: d.folder()}
		n := d.count(1)
		for i := 0; i < n && d.err == nil; i++ {
			x.Excludes = append(x.Excludes, d.str())
		}
		n = d.count(2)
		for i := 0; i < n && d.err == nil; i++ {
			x.Files = append(x.Files, ruleFile{Dir: d.str(), Content: d.str()})
		}
		m = x
	case msgEntries:
		x := &entriesMsg{Folder: d.folder(), Full: d.bool(), Done: d.bool()}
		n := d.count(2)
		if n > 0 {
			x.Items = make([]item, 0, n)
		}
		for i := 0; i < n && d.err == nil; i++ {
			x.Items = append(x.Items, item{Path: d.str(), E: d.entry()})
		}
		m = x
	case msgOp:
		x := &opMsg{ID: d.uvarint(), Folder: d.folder(), Code: d.byte1(), Path: d.str(), E: d.entry(), Expect: d.entry(), To: d.str()}
		if d.err == nil && (x.Code < opPut || x.Code > opDelta) {
			d.fail(fmt.Errorf("unknown op %d", x.Code))
		}
		m = x
	case msgChunk:
		m = &chunkMsg{ID: d.uvarint(), Last: d.bool(), Abort: d.bool(), Data: d.bytes()}
	case msgResult:
		m = &resultMsg{ID: d.uvarint(), Folder: d.folder(), Path: d.str(), OK: d.bool(), Code: d.byte1(), Err: d.str(), State: d.entry(), To: d.str(), ToState: d.entry()}
	case msgGet:
		m = &getMsg{ID: d.uvarint(), Folder: d.folder(), Path: d.str(), Expect: d.entry()}
	case msgFatal:
		m = &fatalMsg{Err: d.str()}
	case msgNotice:
		m = &noticeMsg{Folder: d.folder(), Text: d.str()}
	case msgSigReq:
		m = &sigReqMsg{ID: d.uvarint(), Folder: d.folder(), Path: d.str(), Expect: d.entry()}
	case msgSig:
		m = decodeSig(d)
	default:
		return nil, fmt.Errorf("corrupt sync stream: unknown message type %d", typ)
	}
	if d.err == nil && len(d.b) != 0 {
		d.fail(fmt.Errorf("%d trailing bytes", len(d.b)))
	}
	if d.err != nil {
		return nil, fmt.Errorf("corrupt sync stream: message type %d: %w", typ, d.err)
	}
	return m, nil
}

const maxFolders = 64

func (d *decoder) folder() int {
	v := d.uvarint()
	if d.err == nil && v >= maxFolders {
		d.fail(fmt.Errorf("folder index %d out of range", v))
	}
	return int(v)
}

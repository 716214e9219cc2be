package filesync

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Client is the local end of the synchronization. Run it once per connected
// period; its indexes persist between runs and across processes.
type Client struct {
	opts       ClientOptions
	log        *slog.Logger
	synced     chan struct{}
	syncedOnce sync.Once
	runMu      sync.Mutex
	folders    []*cfolder
	resetCh    chan struct{}

	// engine state, owned by the goroutine in Run
	nextID uint64
	ops    map[uint64]*pendingOp
	inbox  *queue[any]
	out    *queue[any]
	start  time.Time
	// statusNext: a busy engine computes its status no sooner (nextRun).
	statusNext time.Time
	freed      bool // memory given back after the first synchronization
	// opsSinceCompact counts the operations since memory was last given
	// back (compact.go).
	opsSinceCompact int
	// timer wakes the engine at wakeNext: held removals released
	// (halt.go), failed paths retried (retry.go), paths settled
	// (settle.go).
	timer    *time.Timer
	wakeNext time.Time

	// fr reads the session's stream (compact asks it to drop its buffers).
	fr *frameReader

	getsMu sync.Mutex
	gets   map[uint64]*pendingOp // pulls, read by the stream reader

	// proto is the session's protocol version (set before the engine runs).
	proto uint16
	// deltas holds the pushes waiting for the agent's signature (protocol 3,
	// see delta_client.go), by op ID; noDelta the paths whose delta failed
	// this session (sent whole from then on).
	deltaMu  sync.Mutex
	deltas   map[uint64]*sendJob
	deltaOps map[uint64]bool // ops tried as deltas
	noDelta  map[string]bool

	mu        sync.Mutex
	status    Status
	resetReq  bool
	connected bool

	// sent and received count the sync stream's bytes (compressed, as on the wire) over every
	// session of this client, for Status.
	sent, received atomic.Int64
}

// countingStream counts a session stream's bytes into its client.
type countingStream struct {
	io.ReadWriteCloser
	c *Client
}

func (s countingStream) Read(p []byte) (int, error) {
	n, err := s.ReadWriteCloser.Read(p)
	s.c.received.Add(int64(n))
	return n, err
}

func (s countingStream) Write(p []byte) (int, error) {
	n, err := s.ReadWriteCloser.Write(p)
	s.c.sent.Add(int64(n))
	return n, err
}

// cfolder is one synchronized folder pair on the client.
type cfolder struct {
	i     int
	f     Folder
	log   *slog.Logger
	file  string // persisted index
	t     *tree  // open during a session
	local map[string]Entry

	base map[string]Entry // the last state both sides agreed on
	// remoteID is the agent's state ID the base was agreed with (saved
	// with it); a base is trusted only while the agent sends the same ID.
	remoteID string
	remote   map[string]Entry // the server's index as last reported
	// lcaps and rcaps are what the local and the agent's folder keep
	// (exec bits, case, ...): lcaps probed at the start of a session,
	// rcaps defaultRemoteCaps until the agent reports it (protocol 3).
	lcaps, rcaps caps
	fullNext     map[string]Entry
	remoteReady  bool
	dirty        map[string]struct{}
	inflight     map[string]uint64
	failed       map[string][2]Entry // (local, remote) when an op failed; retried when either changes (or at its retry)
	retry        map[string]*retrying
	// settle holds back changes of paths still being written: [0] local,
	// [1] remote (settle.go).
	settle [2]settler
	// noRename holds paths whose rename failed this session: they are removed and sent again instead.
	noRename  map[string]struct{}
	diff      map[string]struct{}
	conflicts []Conflict
	errs      []PathError
	errPaths  int // errors in errs that name a path
	// halt, when not "", is why this folder's synchronization stopped this
	// session (see halt.go); rmSince and rmCount count the files removed on
	// each side (local, remote) in the current mass-deletion window.
	halt    string
	rmSince time.Time
	rmCount [2]int
	// held are paths whose removal waits until removals stop coming
	// (heldAt: the last one held); release lets the next round carry them
	// out (see holdRemovals).
	// folds maps each local ([0]) and remote ([1]) path's nameKey to it,
	// for a round that creates a path on a side that folds names (nil:
	// not built yet this round).
	folds [2]map[string]string
	// placed memoizes placedLocked per side for a round (reset with folds).
	placed [2]map[string]string
	// refused holds what was reported for paths left alone on purpose
	// (a symlink leaving the folder, a case clash), so each is reported once.
	refused map[string]string
	// clash holds the paths refused as the twin of another name on a side
	// that folds names: decided again when a path of the same name
	// changes (the twin renamed or removed).
	clash   map[string]struct{}
	held    map[string]struct{}
	unheld  map[string]struct{} // removals not to hold: they block a folder's replacement
	retried map[string]bool     // folders tried again at once after failing as not empty (see unblock)
	heldAt  time.Time
	release bool
	// newHeld are files created inside a folder created in the same round,
	// held until the time given for the removal they may pair with (see
	// holdCreations).
	newHeld     map[string]time.Time
	newReleased map[string]struct{}
	// rootID is the local root's identity this session (see rootIdentity).
	rootID  string
	changed bool
	// saveNext: the periodic save of a changing index waits until then
	// (nextRun), so a large index being filled is not written every tick.
	saveNext time.Time
	done     bool
	w        *watcher
	// rules are the rules files of the last local scan (persisted beside the
	// index), sent before this session's scan so the agent scans while this
	// side does; rulesKnown when they were loaded or scanned.
	rules      []ruleFile
	rulesKnown bool
	savedRules []ruleFile
	// rulesSent counts rules messages this session, fullsDone the agent's
	// complete indexes: each rules message gets one, and only the answer to
	// the last one is taken.
	rulesSent, fullsDone int
}

type pendingOp struct {
	folder int
	path   string // the key (see spelling)
	// lname and rname are the path's names on each side when they are not
	// path (a name paired with its Unicode normalization twin).
	lname, rname string
	to           string
	pull         bool
	exec         bool  // the exec bit a carried file takes (decision.e)
	rename       bool  // a move of path to to that stands for a removal and a creation
	local        Entry // the local state decided from
	remote       Entry // the remote state decided from
}

// lpath and rpath are the names op's path has on the local and the remote side.
func (op *pendingOp) lpath() string {
	if op.lname != "" {
		return op.lname
	}
	return op.path
}

func (op *pendingOp) rpath() string {
	if op.rname != "" {
		return op.rname
	}
	return op.path
}

// localDone reports an op that ended on this side: a pulled path applied
// (or not), or a push that could not start.
type localDone struct {
	id    uint64
	err   error
	state Entry
}

type watchBatch struct {
	folder int
	paths  []string // nil: rescan everything
}

var errReset = errors.New("sync reset requested")

// errHalted ends a session whose folder halted before it could start (its
// local root is gone); Status says why.
var errHalted = errors.New("synchronization halted (see the sync status)")

const maxListed = 100 // conflicts and errors kept for status

// NewClient checks the options and loads the persisted indexes.
func NewClient(opts ClientOptions) (*Client, error) {
	if len(opts.Folders) == 0 {
		return nil, errors.New("filesync: no folder to synchronize")
	}
	if len(opts.Folders) > maxFolders {
		return nil, fmt.Errorf("filesync: %d folders, at most %d", len(opts.Folders), maxFolders)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &Client{opts: opts, log: log, synced: make(chan struct{}), resetCh: make(chan struct{}, 1), resetReq: opts.Reset}
	for i, f := range opts.Folders {
		if !filepath.IsAbs(f.Local) {
			abs, err := filepath.Abs(f.Local)
			if err != nil {
				return nil, err
			}
			f.Local = abs
		}
		if !strings.HasPrefix(f.Remote, "/") || filepath.Clean(f.Remote) != f.Remote {
			return nil, fmt.Errorf("filesync: remote folder %q must be a clean absolute path", f.Remote)
		}
		cf := &cfolder{i: i, f: f, log: log.With("local", f.Local, "remote", f.Remote), base: map[string]Entry{}, local: map[string]Entry{}}
		if opts.StateDir != "" {
			cf.file = indexFile(opts.StateDir, "local", f.Local+"\x00"+f.Remote)
			if !opts.Reset {
				maps, id, err := loadIndex(cf.file, f.Local+"\x00"+f.Remote, 2)
				if err != nil {
					cf.log.Warn("sync index unreadable: starting afresh (differences become conflicts)", "err", err)
				}
				cf.base, cf.local, cf.remoteID = maps[0], maps[1], id
				if rules, err := loadRules(cf.file + ".rules"); err == nil {
					cf.rules, cf.savedRules, cf.rulesKnown = rules, rules, true
				}
			}
		}
		c.folders = append(c.folders, cf)
	}
	c.status = c.computeStatus()
	return c, nil
}

// Status returns a snapshot of the synchronization state.
func (c *Client) Status() Status {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.status
	st.Connected = c.connected
	st.Folders = append([]FolderStatus(nil), st.Folders...)
	st.BytesSent, st.BytesReceived = c.sent.Load(), c.received.Load()
	return st
}

// Synced is closed once every folder finished its first synchronization.
func (c *Client) Synced() <-chan struct{} { return c.synced }

// Reset drops both sides' indexes and synchronizes anew (differences become
// conflicts, both versions kept). A running Run restarts its session.
func (c *Client) Reset() {
	c.mu.Lock()
	c.resetReq = true
	c.mu.Unlock()
	select {
	case c.resetCh <- struct{}{}:
	default:
	}
}

// Run synchronizes over one stream opened by open until the stream breaks or
// ctx ends. The caller calls Run again after reconnecting. Every goroutine,
// watcher and file Run starts is stopped before it returns.
func (c *Client) Run(ctx context.Context, open func() (io.ReadWriteCloser, error)) error {
	if !c.runMu.TryLock() {
		return errors.New("filesync: Run is already running")
	}
	defer c.runMu.Unlock()
	for {
		err := c.session(ctx, open)
		if errors.Is(err, errReset) && ctx.Err() == nil {
			continue
		}
		return err
	}
}

func (c *Client) session(ctx context.Context, open func() (io.ReadWriteCloser, error)) (err error) {
	newest := c.opts.newest
	if newest == 0 {
		newest = ProtocolVersion
	}
	// The stream's bytes are counted for Status (every attempt of the handshake included).
	counted := func() (io.ReadWriteCloser, error) {
		raw, err := open()
		if err != nil {
			return nil, err
		}
		return countingStream{ReadWriteCloser: raw, c: c}, nil
	}
	rw, proto, err := clientHandshake(counted, newest)
	if err != nil {
		return err
	}
	c.proto = proto
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var fr *frameReader
	defer func() {
		cancel()
		rw.Close()
		wg.Wait()
		if fr != nil {
			fr.close()
		}
		c.fr = nil
		for _, f := range c.folders {
			if f.w != nil {
				f.w.close()
				f.w = nil
			}
			if f.t != nil {
				f.local = f.t.snapshot()
				c.save(f)
				f.t.close()
				f.t = nil
			}
		}
		c.mu.Lock()
		c.connected = false
		c.mu.Unlock()
		if err != nil && !errors.Is(err, errReset) && ctx.Err() == nil {
			c.log.Warn("sync session ended", "err", err)
		}
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		<-ctx.Done()
		rw.Close()
	}()

	c.mu.Lock()
	reset := c.resetReq
	c.mu.Unlock()
	c.start = time.Now()
	c.ops = map[uint64]*pendingOp{}
	c.gets = map[uint64]*pendingOp{}
	c.deltaMu.Lock()
	c.deltas, c.deltaOps, c.noDelta = map[uint64]*sendJob{}, map[uint64]bool{}, map[string]bool{}
	c.deltaMu.Unlock()
	c.inbox = newQueue[any]()
	c.out = newQueue[any]()
	trees := make([]*tree, len(c.folders))
	roots := make([]string, len(c.folders))
	for i, f := range c.folders {
		if reset {
			f.base, f.local = map[string]Entry{}, map[string]Entry{}
		}
		f.halt, f.rmCount = "", [2]int{}
		f.held, f.release, f.newHeld, f.newReleased = map[string]struct{}{}, false, nil, nil
		t, err := openTree(f.f.Local, false, f.log)
		if err != nil {
			if c.checkLocalRoot(f, err) {
				st := c.computeStatus()
				c.mu.Lock()
				c.status = st
				c.mu.Unlock()
				return fmt.Errorf("%s: %w", f.f.Local, errHalted)
			}
			return err
		}
		c.checkLocalRoot(f, nil)
		t.idx = f.local
		t.neverSync(c.opts.StateDir)
		t.readRules = true
		t.excludes = c.opts.Excludes
		f.t, trees[i], roots[i] = t, t, f.f.Remote
		f.remote, f.fullNext, f.remoteReady = map[string]Entry{}, nil, false
		f.lcaps, f.rcaps = t.caps, defaultRemoteCaps
		if c.opts.localCaps != nil {
			f.lcaps = c.opts.localCaps(t.caps)
		}
		t.foldNorm = f.lcaps.foldNorm
		f.dirty, f.inflight, f.failed, f.diff = map[string]struct{}{}, map[string]uint64{}, map[string][2]Entry{}, map[string]struct{}{}
		f.retry, f.settle = nil, [2]settler{}
		f.noRename = map[string]struct{}{}
		f.done = false
		f.rulesSent, f.fullsDone = 0, 0
		if reset {
			f.rules, f.rulesKnown = nil, false
		}
	}

	fr = newFrameReader(rw)
	c.fr = fr
	out := newSender(rw, c.out, trees, func(j *sendJob, cur Entry, err error) {
		c.inbox.push(&localDone{id: j.ID, err: err, state: cur})
	})
	if err := out.send(&helloMsg{Reset: reset, Roots: roots}); err != nil {
		return err
	}
	if err := out.fw.flush(); err != nil {
		return err
	}
	typ, body, err := fr.next()
	if err != nil {
		return fmt.Errorf("waiting for the agent's sync hello: %w", err)
	}
	m, err := decodeMsg(typ, body)
	if err != nil {
		return err
	}
	if f, ok := m.(*fatalMsg); ok {
		return fmt.Errorf("the agent refused the sync: %s", f.Err)
	}
	ok, isOK := m.(*helloOKMsg)
	if !isOK {
		return fmt.Errorf("protocol: expected the agent's hello, got message type %d", typ)
	}
	if len(ok.IDs) != len(c.folders) {
		return fmt.Errorf("protocol: the agent sent %d folder state IDs for %d folders", len(ok.IDs), len(c.folders))
	}
	if len(ok.Caps) > 0 && len(ok.Caps) != len(c.folders) {
		return fmt.Errorf("protocol: the agent sent the capabilities of %d folders for %d folders", len(ok.Caps), len(c.folders))
	}
	for i, f := range c.folders {
		c.checkRemoteID(f, ok.IDs[i], reset)
		f.rcaps = defaultRemoteCaps
		if len(ok.Caps) > 0 {
			f.rcaps = ok.Caps[i]
		}
	}
	c.log.Info("sync session", "protocol", proto)
	if reset {
		c.mu.Lock()
		c.resetReq = false
		c.mu.Unlock()
		c.log.Info("sync reset: both indexes dropped")
	}
	c.mu.Lock()
	c.connected = true
	c.mu.Unlock()
	c.updateStatus(true)

	// The sender and reader run from here: the rules of the last session go
	// out before the local scan, so the agent scans its side meanwhile; if
	// the scan finds other rules, they follow and the agent's answer to them
	// is the index taken.
	errc := make(chan error, 2)
	wg.Add(2)
	go func() { defer wg.Done(); errc <- out.run(ctx) }()
	go func() { defer wg.Done(); errc <- c.read(ctx, fr) }()
	for _, f := range c.folders {
		if f.rulesKnown {
			c.sendRulesFiles(f, f.rules)
		}
	}

	for i, f := range c.folders {
		// The watcher watches each folder before the scan reads it.
		w, err := f.t.newWatcher()
		if err != nil {
			f.log.Warn("no file watcher, periodic rescans only", "err", err)
			w = nil
		} else {
			f.w = w
		}
		var onDir func(string)
		if w != nil {
			onDir = w.add
		}
		changed, err := f.t.scanAll(true, onDir)
		c.scanErr(f, err)
		f.changed = f.changed || len(changed) > 0
		f.t.mu.Lock()
		scanned := append([]ruleFile(nil), f.t.rules...)
		f.t.mu.Unlock()
		if !f.rulesKnown || !sameRules(scanned, f.rules) {
			c.sendRulesFiles(f, scanned)
		}
		f.rules, f.rulesKnown = scanned, true
		if w != nil {
			if r := w.degradedReason(); r != "" {
				f.log.Warn("file watching incomplete", "reason", r)
				f.addErr("", r)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-ctx.Done():
						return
					case b := <-w.out:
						c.inbox.push(&watchBatch{folder: i, paths: b})
					}
				}
			}()
		}
		f.log.Info("local index ready", "entries", len(f.t.idx), "took", time.Since(c.start))
	}

	tick := time.NewTicker(saveEvery)
	defer tick.Stop()
	c.timer, c.wakeNext = time.NewTimer(time.Hour), time.Time{}
	c.timer.Stop()
	defer c.timer.Stop()
	lastRescan := time.Now()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-c.timer.C:
			c.wake(time.Now())
		case err := <-errc:
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrClosedPipe) {
				return fmt.Errorf("sync stream closed: %w", err)
			}
			return err
		case <-c.resetCh:
			return errReset
		case <-c.inbox.notify:
			for _, ev := range c.inbox.take() {
				c.handle(ev)
			}
		case <-tick.C:
			c.updateStatus(true)
			// A burst that is over is saved at once, then its memory given back.
			settled := c.opsSinceCompact >= compactAfter && c.idle()
			for _, f := range c.folders {
				if f.changed && (settled || !time.Now().Before(f.saveNext)) {
					c.save(f)
				}
			}
			if settled {
				c.compact()
			}
			if time.Since(lastRescan) >= c.rescanPeriod() {
				lastRescan = time.Now()
				for i := range c.folders {
					c.handle(&watchBatch{folder: i})
				}
			}
		}
		c.iterate()
	}
}

// wakeAt makes the engine loop call wake at t (or earlier).
func (c *Client) wakeAt(t time.Time) {
	if c.timer == nil || (!c.wakeNext.IsZero() && !t.Before(c.wakeNext)) {
		return
	}
	c.wakeNext = t
	c.timer.Reset(max(time.Until(t), 0))
}

// wake does what was due by now: held removals released, failed paths
// retried, settled paths taken; each asks to be woken again for what is
// still to come.
func (c *Client) wake(now time.Time) {
	c.wakeNext = time.Time{}
	c.releaseHeld(now)
	c.releaseCreations(now)
	c.retryDue(now)
	c.settleDue(now)
}

func (c *Client) rescanPeriod() time.Duration {
	for _, f := range c.folders {
		if f.w == nil || f.w.degradedReason() != "" {
			return rescanFast
		}
	}
	return rescanEvery
}

func (c *Client) sendRules(f *cfolder) {
	f.t.mu.Lock()
	files := append([]ruleFile(nil), f.t.rules...)
	f.t.mu.Unlock()
	f.rules, f.rulesKnown = files, true
	c.sendRulesFiles(f, files)
}

func (c *Client) sendRulesFiles(f *cfolder, files []ruleFile) {
	f.rulesSent++
	c.out.push(&rulesMsg{Folder: f.i, Excludes: c.opts.Excludes, Files: files})
}

// checkRemoteID compares the agent's state ID for f with the one f's base
// was agreed with. Another ID means the agent's state is new (a new or
// emptied volume, a lost index): its missing files are no deletions, so the
// base is dropped for f, as a reset does: every difference becomes a
// conflict (both kept), a file on one side only is copied to the other, and
// nothing is deleted on either side.
func (c *Client) checkRemoteID(f *cfolder, id string, reset bool) {
	if id == f.remoteID {
		return
	}
	if !reset && len(f.base) > 0 {
		f.log.Warn(fmt.Sprintf("remote state for %s is new (volume replaced?): resynchronizing without deletes", f.f.Remote),
			"remote_id", id, "base_remote_id", f.remoteID, "base_entries", len(f.base))
		f.base = map[string]Entry{}
	}
	f.remoteID = id
	f.changed = true
}

func (c *Client) save(f *cfolder) {
	start := time.Now()
	defer func() { f.saveNext = nextRun(start, 0) }()
	f.changed = false
	if f.file == "" {
		return
	}
	local := f.local
	if f.t != nil {
		local = f.t.snapshot()
	}
	if err := saveIndex(f.file, f.f.Local+"\x00"+f.f.Remote, f.remoteID, f.base, local); err != nil {
		f.log.Warn("saving the sync index", "err", err)
	}
	// The root's identity goes with the base, except while halted (the
	// next session checks again against the one the base was agreed with).
	if f.halt == "" && f.rootID != "" && loadRootID(f.file+".root") != f.rootID {
		if err := writeFileAtomic(f.file+".root", []byte(f.rootID+"\n")); err != nil {
			f.log.Warn("saving the sync folder's identity", "err", err)
		}
	}
	if f.rulesKnown && (f.savedRules == nil || !sameRules(f.rules, f.savedRules)) {
		if err := saveRules(f.file+".rules", f.rules); err != nil {
			f.log.Warn("saving the sync rules", "err", err)
		} else {
			f.savedRules = append([]ruleFile{}, f.rules...)
		}
	}
}

// read handles what the agent sends: index and changes and results go to
// the engine, pulled content is written here.
func (c *Client) read(ctx context.Context, fr *frameReader) error {
	var put *putFile
	var putID, skip uint64
	var sigs sigCollector
	defer func() {
		if put != nil {
			put.abort()
		}
	}()
	for {
		typ, body, err := fr.next()
		if err != nil {
			return err
		}
		m, err := decodeMsg(typ, body)
		if err != nil {
			return err
		}
		switch m := m.(type) {
		case *entriesMsg, *resultMsg, *noticeMsg:
			c.inbox.push(m)
		case *opMsg:
			if put != nil {
				return errors.New("protocol: op while a file is being received")
			}
			c.getsMu.Lock()
			g := c.gets[m.ID]
			c.getsMu.Unlock()
			if g == nil || g.rpath() != m.Path || g.folder != m.Folder {
				return fmt.Errorf("protocol: the agent sent %q, which was not asked for", m.Path)
			}
			lp := g.lpath() // this side's name of it
			t := c.folders[m.Folder].t
			var st Entry
			switch m.Code {
			case opPut, opDelta:
				begin := t.beginPut
				if m.Code == opDelta {
					if c.proto < 3 {
						return errors.New("protocol: a delta in a protocol 2 session")
					}
					begin = t.beginDelta
				}
				e := m.E
				e.Exec = g.exec // as decided for this side
				pf, err := begin(lp, e, g.local)
				if err != nil {
					skip = m.ID
					c.inbox.push(&localDone{id: m.ID, err: err, state: t.get(lp)})
					continue
				}
				put, putID = pf, m.ID
				continue
			case opMkdir:
				st, err = t.mkdir(lp, g.local)
			case opSymlink:
				st, err = t.symlink(lp, m.E.Target(), g.local)
			default:
				return fmt.Errorf("protocol: unexpected op %d from the agent", m.Code)
			}
			c.inbox.push(&localDone{id: m.ID, err: err, state: st})
		case *chunkMsg:
			if put == nil || putID != m.ID {
				if m.ID == skip {
					continue
				}
				return fmt.Errorf("protocol: data for op %d not in progress", m.ID)
			}
			if !m.Abort {
				err = put.take(ctx, m.Data)
			}
			if !m.Last && err == nil {
				continue
			}
			pf := put
			put = nil
			var st Entry
			switch {
			case m.Abort:
				pf.abort()
				err = fmt.Errorf("%w: it changed on the agent while it was sent", errChanged)
			case err != nil:
				pf.abort()
				skip = m.ID
			default:
				st, err = pf.commit()
			}
			c.inbox.push(&localDone{id: m.ID, err: err, state: st})
		case *sigMsg:
			if c.proto < 3 {
				return errors.New("protocol: a signature in a protocol 2 session")
			}
			if sig, done := sigs.add(m); done {
				if err := c.signed(m.ID, sig); err != nil {
					return err
				}
				sigs.release(sig)
			}
		case *fatalMsg:
			return fmt.Errorf("the agent ended the sync: %s", m.Err)
		default:
			return fmt.Errorf("protocol: unexpected message %T from the agent", m)
		}
	}
}

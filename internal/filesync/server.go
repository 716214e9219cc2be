package filesync

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"
)

const (
	saveEvery   = 2 * time.Second
	rescanEvery = 5 * time.Minute  // safety net while watches work
	rescanFast  = 10 * time.Second // when they do not
)

// Serve runs the remote end over rw (one devtool-sync subsystem channel)
// until the stream ends or ctx is done; it closes rw and stops every
// goroutine and watcher it started before returning.
func Serve(ctx context.Context, rw io.ReadWriteCloser, opts ServerOptions) error {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Add(1)
	go func() {
		defer wg.Done()
		<-ctx.Done()
		rw.Close()
	}()

	newest := opts.newest
	if newest == 0 {
		newest = ProtocolVersion
	}
	proto, herr := serverHandshake(rw, newest, opts.strict)
	if herr != nil {
		log.Error("sync handshake", "err", herr)
		return herr
	}
	fr := newFrameReader(rw)
	defer fr.close()
	typ, body, err := fr.next()
	if err != nil {
		return fmt.Errorf("reading the sync hello: %w", err)
	}
	m, err := decodeMsg(typ, body)
	hello, ok := m.(*helloMsg)
	if err == nil && !ok {
		err = fmt.Errorf("expected a hello, got message type %d", typ)
	}
	if err != nil {
		return err
	}
	s := &server{log: log, opts: opts, q: newQueue[any](), reset: hello.Reset, proto: proto}
	defer s.closeTrees()
	for _, root := range hello.Roots {
		if !filepath.IsAbs(root) || filepath.Clean(root) != root {
			err = fmt.Errorf("remote folder %q is not a clean absolute path", root)
			break
		}
		t, terr := openTree(root, true, log.With("folder", root))
		if terr != nil {
			err = terr
			break
		}
		t.neverSync(opts.StateDir)
		// Exec bits received are kept in the index where the filesystem cannot keep
		// them: a CLI that does not take the caps sent below into its decisions
		// (protocol 2, and protocol 3 before decide took them) sees a side that keeps
		// them; one that does ignores them there.
		t.evenExec = true
		s.trees = append(s.trees, t)
		s.folders = append(s.folders, &sfolder{})
	}
	out := newSender(rw, s.q, s.trees, s.sendFailed)
	if err == nil && (len(hello.Roots) == 0 || len(hello.Roots) > maxFolders) {
		err = fmt.Errorf("%d folders asked (1 to %d)", len(hello.Roots), maxFolders)
	}
	if err != nil {
		_ = out.send(&fatalMsg{Err: err.Error()})
		_ = out.fw.flush()
		out.fw.close()
		log.Error("sync hello refused", "err", err)
		return err
	}
	s.ids = make([]string, len(s.trees))
	for i, t := range s.trees {
		s.load(i, t)
	}
	answer := &helloOKMsg{IDs: s.ids}
	if proto >= 3 {
		// A protocol 2 CLI refuses any byte it does not know.
		for _, t := range s.trees {
			answer.Caps = append(answer.Caps, t.caps)
		}
	}
	_ = out.send(answer)
	if err := out.fw.flush(); err != nil {
		return err
	}
	log.Info("sync session started", "folders", hello.Roots, "reset", hello.Reset, "protocol", proto)

	errc := make(chan error, 2)
	wg.Add(2)
	go func() { defer wg.Done(); errc <- out.run(ctx) }()
	go func() { defer wg.Done(); errc <- s.read(ctx, fr) }()

	tick := time.NewTicker(saveEvery)
	defer tick.Stop()
	var lastRescan time.Time = time.Now()
	for {
		select {
		case err = <-errc:
			cancel()
			for _, t := range s.trees {
				t.stopped.Store(true) // a scan under way ends early
			}
			wg.Wait() // the reader and the sender are done: nothing changes the index any more
			s.stopWatchers()
			s.saveAll()
			if errors.Is(err, io.EOF) || errors.Is(err, context.Canceled) || ctx.Err() != nil {
				log.Info("sync session ended", "reason", err, "sent", out.fw.Bytes, "blocks", out.fw.Blocks, "delta_reused", out.DeltaCopied, "delta_sent", out.DeltaLiteral,
					"reading", time.Duration(s.waitT.Load()).Round(time.Millisecond), "applying", time.Duration(s.handleT.Load()).Round(time.Millisecond))
				return nil
			}
			log.Warn("sync session failed", "err", err)
			return err
		case <-tick.C:
			// throttled while busy (nextRun), at once when idle
			if !time.Now().Before(s.saveNext) || time.Since(time.Unix(0, s.lastOp.Load())) >= saveEvery {
				start := time.Now()
				s.saveAll()
				s.saveNext = nextRun(start, 0)
			}
			if d := s.rescanPeriod(); time.Since(lastRescan) >= d {
				lastRescan = time.Now()
				for i := range s.trees {
					s.rescan(i, nil)
				}
			}
		}
	}
}

// testHookRescanned, when set (tests only), runs between a rescan finding
// changes and queueing them: where an op could overtake them.
var testHookRescanned func(changed []item)

type sfolder struct {
	mu      sync.Mutex
	w       *watcher
	ready   bool // rules received and first scan sent
	dirty   bool
	stopFwd chan struct{}
}

type server struct {
	log   *slog.Logger
	opts  ServerOptions
	q     *queue[any]
	reset bool
	proto uint16 // the session's protocol version
	trees []*tree
	// ids are the state IDs of the remote indexes (one per folder), sent in
	// the hello answer and saved with each index.
	ids     []string
	folders []*sfolder
	fwd     sync.WaitGroup
	// order is held from reading or changing a tree's index until what
	// that produced (entries, results) is queued, so the client receives
	// them in the order the index went through: a rescan's entries computed
	// before an op must not arrive after the op's result, or the client's
	// mirror of the index keeps the older state (and acts on it: a file
	// taken for deleted there is deleted here).
	order sync.Mutex

	// time the reader spent waiting for the client and applying what it
	// sent (logged at the end of a session)
	waitT, handleT atomic.Int64 // nanoseconds
	lastOp         atomic.Int64 // when the last message was handled (unix nanoseconds)

	saveNext time.Time // the periodic save waits until then (nextRun)

	put   *putFile
	putID uint64
	putF  int
	skip  uint64 // chunks of a refused put are dropped
	// sigs gathers the client's signatures for its gets (protocol 3);
	// ready holds the complete ones until their get arrives.
	sigs  sigCollector
	ready map[uint64]*signature
}

func (s *server) closeTrees() {
	for _, t := range s.trees {
		t.close()
	}
}

func (s *server) stateFile(t *tree) string {
	if s.opts.StateDir == "" {
		return ""
	}
	return indexFile(s.opts.StateDir, "remote", t.root)
}

// load reads folder i's remote index and its state ID. The ID is new when
// the index is new, unreadable, dropped by a reset, or describes files of
// which none is left (the root was emptied or replaced under a kept state
// folder): the client then treats its base as unknown, so files missing here
// are not taken for deletions. A new ID is saved at once, so the ID the
// client learns is the one on disk.
func (s *server) load(i int, t *tree) {
	f := s.stateFile(t)
	var id, why string
	switch {
	case f == "":
		why = "no state folder"
	case s.reset:
		t.log.Info("sync reset: remote index dropped")
		why = "reset"
	default:
		maps, lid, err := loadIndex(f, t.root, 1)
		switch {
		case err != nil:
			t.log.Warn("remote index unreadable, rehashing", "err", err)
			why = "index unreadable"
		case lid == "":
			why = "no index"
			if len(maps[0]) > 0 {
				why = "index without a state ID"
			}
		case len(maps[0]) > 0 && rootEmpty(t.root):
			why = "folder emptied"
		default:
			id = lid
		}
		t.idx = maps[0]
	}
	if id == "" {
		id = newStateID()
		t.log.Info("new remote state", "id", id, "reason", why)
		if f != "" {
			if err := saveIndex(f, t.root, id, t.snapshot()); err != nil {
				t.log.Warn("saving the remote index", "err", err)
			}
		}
	}
	s.ids[i] = id
}

// rootEmpty reports whether root holds nothing (or cannot be read).
func rootEmpty(root string) bool {
	d, err := os.Open(root)
	if err != nil {
		return true
	}
	defer d.Close()
	names, _ := d.Readdirnames(1)
	return len(names) == 0
}

func (s *server) saveAll() {
	for i, t := range s.trees {
		f := s.folders[i]
		f.mu.Lock()
		dirty := f.dirty
		f.dirty = false
		f.mu.Unlock()
		if !dirty {
			continue
		}
		if file := s.stateFile(t); file != "" {
			if err := saveIndex(file, t.root, s.ids[i], t.snapshot()); err != nil {
				t.log.Warn("saving the remote index", "err", err)
			}
		}
	}
}

func (s *server) markDirty(i int) {
	f := s.folders[i]
	f.mu.Lock()
	f.dirty = true
	f.mu.Unlock()
}

func (s *server) rescanPeriod() time.Duration {
	for _, f := range s.folders {
		f.mu.Lock()
		w := f.w
		f.mu.Unlock()
		if w != nil && w.degradedReason() != "" {
			return rescanFast
		}
	}
	return rescanEvery
}

func (s *server) stopWatchers() {
	for _, f := range s.folders {
		f.mu.Lock()
		w, stop := f.w, f.stopFwd
		f.w = nil
		f.mu.Unlock()
		if w != nil {
			close(stop)
			w.close()
		}
	}
	s.fwd.Wait()
}

// sendFailed answers a get whose path changed or vanished.
func (s *server) sendFailed(j *sendJob, cur Entry, err error) {
	s.order.Lock()
	defer s.order.Unlock()
	err = asVanished(j.Path, err)
	if j.Folder >= 0 && j.Folder < len(s.trees) {
		cur = s.trees[j.Folder].get(j.Path) // the index's state: what later entries are relative to
	}
	s.q.push(&resultMsg{ID: j.ID, Folder: j.Folder, Path: j.Path, Err: err.Error(), Code: failCode(err), State: cur})
	// The path (or a folder above it) is gone or changed: the index learns
	// it now, so its entries follow the result.
	if j.Folder >= 0 && j.Folder < len(s.trees) {
		s.rescanLocked(j.Folder, ancestors(j.Path))
	}
}

// rescan scans paths (nil: everything) and sends what changed; it returns
// what changed.
func (s *server) rescan(i int, paths []string) []item {
	s.order.Lock()
	defer s.order.Unlock()
	return s.rescanLocked(i, paths)
}

// rescanLocked is rescan for callers holding order.
func (s *server) rescanLocked(i int, paths []string) []item {
	f := s.folders[i]
	f.mu.Lock()
	ready := f.ready
	w := f.w
	f.mu.Unlock()
	if !ready {
		return nil
	}
	t := s.trees[i]
	var changed []item
	if paths == nil {
		var err error
		changed, err = t.scanAll(false, nil)
		if errors.Is(err, errStopped) {
			return nil // the session is ending
		}
		s.scanErr(i, err)
	} else {
		changed, _ = t.scanPaths(paths)
		s.scanErr(i, errors.Join(t.takeScanErrs()...))
	}
	if len(changed) == 0 {
		if t.takeRefreshed() {
			s.markDirty(i)
		}
		return nil
	}
	if testHookRescanned != nil {
		testHookRescanned(changed)
	}
	s.markDirty(i)
	if w != nil {
		for _, it := range changed {
			if it.E.Kind == KindDir {
				w.add(it.Path)
			}
		}
	}
	s.sendEntries(i, false, changed)
	return changed
}

// scanErr reports to the client what a scan of folder i could not read
// (kept as it was in the index, so nothing is deleted because of it).
func (s *server) scanErr(i int, err error) {
	if err == nil {
		return
	}
	s.trees[i].log.Warn("scan", "err", err)
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	for _, e := range errs {
		s.q.push(&noticeMsg{Folder: i, Text: "agent: " + e.Error()})
	}
}

// sendEntries queues items in messages of bounded size.
func (s *server) sendEntries(i int, full bool, items []item) {
	const perMsg = 2000 // x at most ~4 KiB each stays under maxBlock... paths are bounded below
	size := 0
	start := 0
	for k, it := range items {
		size += len(it.Path) + 48
		if size > maxBlock/2 || k-start >= perMsg {
			s.q.push(&entriesMsg{Folder: i, Full: full, Items: items[start:k]})
			start, size = k, len(it.Path)+48
		}
	}
	s.q.push(&entriesMsg{Folder: i, Full: full, Done: full, Items: items[start:]})
}

// read applies what the client sends.
func (s *server) read(ctx context.Context, fr *frameReader) error {
	defer func() {
		if s.put != nil {
			s.put.abort()
		}
	}()
	for {
		t0 := time.Now()
		typ, body, err := fr.next()
		s.waitT.Add(int64(time.Since(t0)))
		if err != nil {
			return err
		}
		m, err := decodeMsg(typ, body)
		if err != nil {
			return err
		}
		t1 := time.Now()
		err = s.handle(ctx, m)
		s.handleT.Add(int64(time.Since(t1)))
		s.lastOp.Store(time.Now().UnixNano())
		if err != nil {
			return err
		}
	}
}

func (s *server) folder(i int) (*tree, error) {
	if i < 0 || i >= len(s.trees) {
		return nil, fmt.Errorf("folder %d out of range", i)
	}
	return s.trees[i], nil
}

func (s *server) handle(ctx context.Context, m any) error {
	switch m := m.(type) {
	case *rulesMsg:
		t, err := s.folder(m.Folder)
		if err != nil {
			return err
		}
		t.setRules(m.Excludes, m.Files)
		s.startFolder(m.Folder)
	case *getMsg:
		sig := s.ready[m.ID] // the client's signature of its copy, sent before the get
		delete(s.ready, m.ID)
		s.sigs.release(sig)
		if _, err := s.folder(m.Folder); err != nil {
			return err
		}
		if err := checkPath(m.Path); err != nil {
			s.q.push(&resultMsg{ID: m.ID, Folder: m.Folder, Path: m.Path, Err: err.Error()})
			s.trees[m.Folder].log.Warn("refused path from the client", "path", m.Path, "err", err)
			return nil
		}
		s.q.push(&sendJob{ID: m.ID, Folder: m.Folder, Path: m.Path, Expect: m.Expect, Sig: sig})
	case *sigMsg:
		if s.proto < 3 {
			return errors.New("protocol: a signature in a protocol 2 session")
		}
		if sig, done := s.sigs.add(m); done {
			if s.ready == nil {
				s.ready = map[uint64]*signature{}
			}
			if len(s.ready) >= maxFolders*16 {
				return errors.New("protocol: too many signatures without their get")
			}
			s.ready[m.ID] = sig
		}
	case *sigReqMsg:
		if s.proto < 3 {
			return errors.New("protocol: a signature request in a protocol 2 session")
		}
		if _, err := s.folder(m.Folder); err != nil {
			return err
		}
		j := &sigJob{ID: m.ID, Folder: m.Folder, Path: m.Path, Expect: m.Expect}
		if err := checkPath(m.Path); err != nil {
			j.Folder = -1 // answered with "no signature"; the push is refused on its own
		}
		s.q.push(j)
	case *opMsg:
		s.order.Lock()
		defer s.order.Unlock()
		t, err := s.folder(m.Folder)
		if err != nil {
			return err
		}
		if s.put != nil {
			return errors.New("protocol: op while a file is being received")
		}
		res := &resultMsg{ID: m.ID, Folder: m.Folder, Path: m.Path, To: m.To}
		switch m.Code {
		case opPut, opDelta:
			begin := t.beginPut
			if m.Code == opDelta {
				if s.proto < 3 {
					return errors.New("protocol: a delta in a protocol 2 session")
				}
				begin = t.beginDelta
			}
			pf, err := begin(m.Path, m.E, m.Expect)
			if err != nil {
				s.skip = m.ID
				s.finish(t, m.Folder, res, err)
				return nil
			}
			s.put, s.putID, s.putF = pf, m.ID, m.Folder
			return nil
		case opMkdir:
			res.State, err = t.mkdir(m.Path, m.Expect)
		case opSymlink:
			res.State, err = t.symlink(m.Path, m.E.Target(), m.Expect)
		case opRemove:
			res.State, err = t.remove(m.Path, m.Expect)
		case opMove:
			res.State, res.ToState, err = t.move(m.Path, m.To, m.Expect)
		}
		s.finish(t, m.Folder, res, err)
	case *chunkMsg:
		s.order.Lock()
		defer s.order.Unlock()
		if s.put == nil || s.putID != m.ID {
			if m.ID == s.skip {
				return nil
			}
			return fmt.Errorf("protocol: data for op %d not in progress", m.ID)
		}
		pf := s.put
		var err error
		if !m.Abort {
			err = pf.take(ctx, m.Data)
		}
		if !m.Last && err == nil {
			return nil
		}
		s.put = nil
		res := &resultMsg{ID: m.ID, Folder: s.putF, Path: pf.p}
		if m.Abort {
			pf.abort()
			err = fmt.Errorf("%s changed on the sending side while it was sent", pf.p)
			pf.t.mu.Lock()
			res.State, _ = pf.t.current(pf.p)
			pf.t.mu.Unlock()
		} else if err != nil {
			pf.abort()
			s.skip = m.ID
		} else {
			res.State, err = pf.commit()
		}
		s.finish(pf.t, s.putF, res, err)
	case *fatalMsg:
		return fmt.Errorf("the devtool CLI ended the sync: %s", m.Err)
	default:
		return fmt.Errorf("protocol: unexpected message %T", m)
	}
	return nil
}

func (s *server) finish(t *tree, i int, res *resultMsg, err error) {
	err = asVanished(res.Path, err)
	if err != nil {
		res.Err = err.Error()
		res.Code = failCode(err)
		// Report the index's state, not the disk's: what differs on disk
		// comes with the rescan that updates the index.
		res.State = t.get(res.Path)
		if res.To != "" {
			res.ToState = t.get(res.To)
		}
		if errors.Is(err, errEscape) {
			t.log.Warn("refused path from the client", "path", res.Path, "err", err)
		} else {
			t.log.Debug("op not applied", "path", res.Path, "err", err)
		}
	} else {
		res.OK = true
	}
	s.markDirty(i)
	if dirs := t.takeNewDirs(); len(dirs) > 0 {
		s.q.push(&entriesMsg{Folder: i, Items: dirs})
	}
	s.q.push(res)
	if errors.Is(err, errVanished) {
		s.rescanLocked(i, ancestors(res.Path, res.To))
	}
}

// startFolder scans folder i (first time: with the client's rules now
// known), sends its whole index, and starts watching it.
func (s *server) startFolder(i int) {
	t := s.trees[i]
	f := s.folders[i]
	f.mu.Lock()
	first := !f.ready
	f.ready = true
	f.mu.Unlock()
	start := time.Now()
	// The first time, the watcher watches each folder before the scan
	// reads it (nothing changed meanwhile goes unseen). Later (the client's
	// rules changed: the first scan may have used the previous session's),
	// the running watcher watches every folder the scan finds, since folders
	// ignored before are not watched yet.
	var w, running *watcher
	if first {
		var err error
		if w, err = t.newWatcher(); err != nil {
			t.log.Warn("no file watcher, periodic rescans only", "err", err)
			w = nil
		}
	} else {
		f.mu.Lock()
		running = f.w
		f.mu.Unlock()
	}
	var onDir func(string)
	if w != nil {
		onDir = w.add
	} else if running != nil {
		onDir = running.add
	}
	s.order.Lock()
	changed, err := t.scanAll(first, onDir)
	if errors.Is(err, errStopped) {
		s.order.Unlock()
		if w != nil {
			w.close()
		}
		return
	}
	s.scanErr(i, err)
	snap := t.snapshot()
	items := make([]item, 0, len(snap))
	for p, e := range snap {
		items = append(items, item{Path: p, E: e})
	}
	if len(changed) > 0 || t.takeRefreshed() {
		s.markDirty(i) // an unchanged index is not written again
	}
	s.sendEntries(i, true, items)
	s.order.Unlock()
	t.log.Info("remote index sent", "entries", len(items), "took", time.Since(start))
	if w == nil {
		return
	}
	if r := w.degradedReason(); r != "" {
		t.log.Warn("file watching incomplete", "reason", r)
		s.q.push(&noticeMsg{Folder: i, Text: "agent: " + r})
	}
	stop := make(chan struct{})
	f.mu.Lock()
	f.w, f.stopFwd = w, stop
	f.mu.Unlock()
	s.fwd.Add(1)
	go func() {
		defer s.fwd.Done()
		s.forward(i, w, stop)
	}()
}

// forward scans and reports what the watcher of folder i finds changed
// until stop closes. A file still being written waits to settle
// (settle.go): it is hashed and reported once, not at every write, so the
// CLI fetches it once, whole.
func (s *server) forward(i int, w *watcher, stop <-chan struct{}) {
	t := s.trees[i]
	var st settler
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	var armed time.Time // when the timer fires (zero: stopped)
	wakeAt := func(at time.Time) {
		if at.IsZero() || (!armed.IsZero() && !at.Before(armed)) {
			return
		}
		armed = at
		timer.Reset(time.Until(at))
	}
	for {
		var paths []string
		select {
		case <-stop:
			return
		case b := <-w.out:
			if b == nil { // events were lost: everything is rescanned
				s.rescan(i, nil)
				continue
			}
			now := time.Now()
			for _, p := range b {
				if due := st.hold(p, now); !due.IsZero() {
					wakeAt(due)
					continue
				}
				paths = append(paths, p)
			}
		case <-timer.C:
			armed = time.Time{}
			var next time.Time
			paths, next = st.due(time.Now(), t.changedAt)
			wakeAt(next)
		}
		if len(paths) == 0 {
			continue
		}
		changed := s.rescan(i, paths)
		now := time.Now()
		for _, it := range changed {
			if it.E.Kind == KindFile {
				st.seen(it.Path, now)
				wakeAt(now.Add(settleForget)) // the settler forgets it by then
			}
		}
	}
}

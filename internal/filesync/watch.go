package filesync

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"
)

const (
	debounce    = 3 * time.Millisecond  // quiet time before a batch is handed over
	debounceMax = 30 * time.Millisecond // a batch waits no longer under constant events
)

// watcher watches every synchronized folder of a tree through fsnotify and
// hands over debounced batches of changed paths (relative, slash-separated).
// A nil batch asks for a full rescan (events were lost).
type watcher struct {
	root    string
	ignored func(rel string) bool
	w       *fsnotify.Watcher
	out     chan []string
	done    chan struct{}
	wg      sync.WaitGroup

	mu       sync.Mutex
	degraded string // why watching is incomplete ("" when it is not)
	// watched are the folders watched (relative; "" the root).
	watched map[string]struct{}
	// own are the events the tree's own writes cause (a received file put
	// in place, a path removed), dropped when they come: the tree's index
	// already holds what they would make a rescan find. Each is dropped
	// once, only for the exact operation expected, and forgotten after
	// ownTTL. A write by anyone else makes events of its own, rescanned as
	// usual (and a received file's index entry is racy, so such a write in
	// the same timestamp tick is hashed anew).
	own map[string]ownEvent
}

type ownEvent struct {
	op fsnotify.Op
	at time.Time
}

// ownTTL bounds how long an expected event of the tree's own writes waits.
const ownTTL = 5 * time.Second

// newWatcher starts watching t's folders and links the watcher to t, so
// t's own writes do not come back as changes (see watcher.own).
func (t *tree) newWatcher() (*watcher, error) {
	w, err := newWatcher(t.root, t.ignoredDir)
	if err == nil {
		t.mu.Lock()
		t.w = w
		t.mu.Unlock()
	}
	return w, err
}

// expectOwn records that an event op at rel is coming from this side's own
// write, if rel's folder is watched (else no event comes). Callers hold the
// tree's mu.
func (w *watcher) expectOwn(rel string, op fsnotify.Op) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.watched[dirOf(rel)]; !ok {
		return
	}
	now := time.Now()
	if len(w.own) >= 10000 {
		for p, e := range w.own {
			if now.Sub(e.at) > ownTTL {
				delete(w.own, p)
			}
		}
		if len(w.own) >= 10000 {
			return // the rescans are what the events bring
		}
	}
	if w.own == nil {
		w.own = map[string]ownEvent{}
	}
	w.own[rel] = ownEvent{op: op, at: now}
}

// ownEvent tells t's watcher that p's event op is this side's own doing.
// Callers hold mu.
func (t *tree) ownEvent(p string, op fsnotify.Op) {
	if t.w != nil {
		t.w.expectOwn(p, op)
	}
}

// takeOwn reports whether the event op at rel is the one an own write
// caused (dropping it).
func (w *watcher) takeOwn(rel string, op fsnotify.Op) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	e, ok := w.own[rel]
	if !ok {
		return false
	}
	delete(w.own, rel)
	if len(w.own) == 0 {
		w.own = nil // a map that held a burst does not keep its size
	}
	return e.op == op && time.Since(e.at) <= ownTTL
}

// newWatcher starts watching; ignored tells which new folders not to watch.
func newWatcher(root string, ignored func(rel string) bool) (*watcher, error) {
	fw, err := fsnotify.NewBufferedWatcher(4096)
	if err != nil {
		return nil, err
	}
	w := &watcher{root: root, ignored: ignored, w: fw, out: make(chan []string, 1), done: make(chan struct{})}
	w.wg.Add(1)
	go w.loop()
	return w, nil
}

// close stops the watcher and waits for its goroutine.
func (w *watcher) close() {
	close(w.done)
	w.w.Close()
	w.wg.Wait()
}

// add watches folder rel ("" = root). Running out of inotify watches is
// remembered (the caller falls back to periodic rescans and reports it).
func (w *watcher) add(rel string) {
	err := w.w.Add(filepath.Join(w.root, filepath.FromSlash(rel)))
	w.mu.Lock()
	defer w.mu.Unlock()
	if err == nil {
		if w.watched == nil {
			w.watched = map[string]struct{}{}
		}
		w.watched[rel] = struct{}{}
		return
	}
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return
	}
	if w.degraded == "" {
		if errors.Is(err, syscall.ENOSPC) {
			w.degraded = "out of inotify watches (raise fs.inotify.max_user_watches); changes are found by periodic rescans"
		} else {
			w.degraded = "watching " + rel + ": " + err.Error() + "; changes are found by periodic rescans"
		}
	}
}

func (w *watcher) degradedReason() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.degraded
}

func (w *watcher) loop() {
	defer w.wg.Done()
	pending := map[string]struct{}{}
	rescan := false
	var timer *time.Timer
	var timerC <-chan time.Time
	var first time.Time
	for {
		select {
		case <-w.done:
			if timer != nil {
				timer.Stop()
			}
			return
		case ev, ok := <-w.w.Events:
			if !ok {
				return
			}
			rel, err := filepath.Rel(w.root, ev.Name)
			if err != nil || rel == "." || strings.HasPrefix(rel, "..") {
				continue
			}
			rel = filepath.ToSlash(rel)
			if strings.Contains(rel, tmpPrefix) {
				continue
			}
			if w.takeOwn(rel, ev.Op) {
				continue
			}
			pending[rel] = struct{}{}
			if ev.Has(fsnotify.Rename) {
				w.forget(ev.Name)
			}
			if ev.Has(fsnotify.Create) && !w.ignored(rel) {
				// Watch a new folder at once, and rescan what it already holds.
				if fi, err := os.Lstat(ev.Name); err == nil && fi.IsDir() {
					w.addNewTree(rel, 0, pending)
				}
			}
		case err, ok := <-w.w.Errors:
			if !ok {
				return
			}
			if errors.Is(err, fsnotify.ErrEventOverflow) {
				rescan = true
				w.mu.Lock()
				w.own = nil // some may be lost: the rescan sees everything
				w.mu.Unlock()
			}
		case <-timerC:
			var batch []string
			if !rescan {
				batch = make([]string, 0, len(pending))
				for p := range pending {
					batch = append(batch, p)
				}
			}
			select {
			case w.out <- batch:
				pending = map[string]struct{}{}
				rescan = false
				timerC = nil
			case <-w.done:
				return
			}
			continue
		}
		if timerC == nil {
			first = time.Now()
			timer = time.NewTimer(debounce)
			timerC = timer.C
		} else if time.Since(first) < debounceMax {
			timer.Reset(debounce)
		}
	}
}

// forget drops the watches of a folder that was moved away (name is its old
// path) and of every folder below it. inotify keeps a watch on a moved
// folder's inode, and fsnotify drops only the moved folder's own: the watches
// of its subfolders would go on reporting their events under the old path,
// and adding the new path (addNewTree on the move's Create event) gets the same
// watch back, still named by the old path. So changes below a renamed folder
// were missed until the next full rescan.
func (w *watcher) forget(name string) {
	prefix := name + string(filepath.Separator)
	for _, p := range w.w.WatchList() {
		if p == name || strings.HasPrefix(p, prefix) {
			_ = w.w.Remove(p)
			if rel, err := filepath.Rel(w.root, p); err == nil {
				w.mu.Lock()
				delete(w.watched, filepath.ToSlash(rel))
				w.mu.Unlock()
			}
		}
	}
}

// addNewTree watches a folder that just appeared and every folder below it, and puts everything
// they hold in pending. What was made in them before their watches took has no event of its own,
// and the rescan of the folder itself does not walk it when it is already in the index (a folder
// this side's sync just made, into which a user put a file at once): such a file was never seen.
func (w *watcher) addNewTree(rel string, depth int, pending map[string]struct{}) {
	w.add(rel)
	if depth > 256 {
		return
	}
	ents, err := os.ReadDir(filepath.Join(w.root, filepath.FromSlash(rel)))
	if err != nil {
		return
	}
	for _, e := range ents {
		if skipName(e.Name()) || strings.Contains(e.Name(), tmpPrefix) {
			continue
		}
		sub := join(rel, e.Name())
		pending[sub] = struct{}{}
		if e.IsDir() && !w.ignored(sub) {
			w.addNewTree(sub, depth+1, pending)
		}
	}
}

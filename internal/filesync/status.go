package filesync

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"sort"
	"time"
)

// Status is a snapshot of the client's synchronization.
type Status struct {
	// Connected is true while a Run is exchanging with the agent.
	Connected bool `json:"connected"`
	// Synced is true once every folder finished its initial synchronization.
	Synced  bool           `json:"synced"`
	Folders []FolderStatus `json:"folders"`
	// BytesSent and BytesReceived count the sync stream's bytes (compressed, as on the wire) since
	// the client started, over every reconnection.
	BytesSent     int64 `json:"bytesSent"`
	BytesReceived int64 `json:"bytesReceived"`
}

// FolderStatus is the state of one synchronized folder.
type FolderStatus struct {
	Local  string `json:"local"`
	Remote string `json:"remote"`
	// Percent of the known paths that are equal on both sides (0 before the
	// remote index arrived).
	Percent float64 `json:"percent"`
	// Files is the number of paths known on either side; Pending how many of
	// them still differ or wait for a transfer.
	Files   int `json:"files"`
	Pending int `json:"pending"`
	// Waiting names some of the pending paths (at most maxWaiting, sorted):
	// what a sync that does not finish is waiting on.
	Waiting []string `json:"waiting,omitempty"`
	// Halted, when not empty, says why this folder's synchronization
	// stopped before deleting anything (an emptied, replaced or missing
	// root, or a mass deletion) and how to go on.
	Halted string `json:"halted,omitempty"`
	// Conflicts lists the conflicts resolved so far (both versions kept).
	Conflicts []Conflict `json:"conflicts,omitempty"`
	// Errors lists paths that could not be synchronized, most recent last.
	Errors []PathError `json:"errors,omitempty"`
}

// Conflict is a path both sides changed: the other version was kept as
// Copy. A conflict without a copy is a name the receiving side cannot hold
// beside another (they differ only in case or Unicode form): Reason says
// which; neither is touched until one is renamed.
type Conflict struct {
	Path   string    `json:"path"`
	Copy   string    `json:"copy,omitempty"`
	Reason string    `json:"reason,omitempty"`
	Time   time.Time `json:"time"`
}

// PathError is a path that could not be synchronized.
type PathError struct {
	Path string    `json:"path"`
	Err  string    `json:"error"`
	Time time.Time `json:"time"`
	// Failures counts the failures of the path in a row, and NextTry is
	// when it is tried again (retries back off from 0.5 s to a minute);
	// both are absent for what is not retried on its own (a refused path
	// waits for a change).
	Failures int        `json:"failures,omitempty"`
	NextTry  *time.Time `json:"next_try,omitempty"`
}

// Percent is the completion over every folder, weighted by their number of
// paths, 0..100. A folder whose remote index has not arrived yet counts as
// 0 %.
func (s Status) Percent() float64 {
	files, done := 0, 0.0
	for _, f := range s.Folders {
		if f.Files == 0 {
			if f.Percent < 100 {
				return 0
			}
			continue
		}
		files += f.Files
		done += f.Percent / 100 * float64(f.Files)
	}
	if files == 0 {
		if len(s.Folders) > 0 {
			return 100
		}
		return 0
	}
	return 100 * done / float64(files)
}

// StatusHandler serves the client's Status as JSON behind HTTP basic auth.
func StatusHandler(user, password string, c *Client) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, p, ok := r.BasicAuth()
		uok := subtle.ConstantTimeCompare([]byte(u), []byte(user))
		pok := subtle.ConstantTimeCompare([]byte(p), []byte(password))
		if !ok || uok&pok != 1 {
			w.Header().Set("WWW-Authenticate", `Basic realm="devtool sync"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		st := c.Status()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(struct {
			Status
			Percent float64 `json:"percent"`
		}{st, st.Percent()})
	})
}

// ServeStatus serves StatusHandler on ln (the caller's listener, on
// 127.0.0.1) until ln is closed; it then returns nil.
func ServeStatus(ln net.Listener, user, password string, c *Client) error {
	srv := &http.Server{Handler: StatusHandler(user, password, c), ReadHeaderTimeout: 10 * time.Second}
	err := srv.Serve(ln)
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// updateStatus publishes the engine's state and closes Synced once every
// folder has caught up the first time.
func (c *Client) updateStatus(force bool) {
	all := true
	var save []*cfolder
	for _, f := range c.folders {
		if !f.done && f.halt != "" {
			// Halted: the engine does nothing more for it this session
			// (Status says why); the others go on.
			f.done = true
		}
		if !f.done && f.remoteReady && len(f.dirty) == 0 && len(f.inflight) == 0 && len(f.diff) <= len(f.failed) {
			f.done = true
			f.log.Info("initial sync done", "entries", len(f.base), "took", time.Since(c.start), "conflicts", len(f.conflicts))
			if f.changed {
				save = append(save, f)
			}
		}
		all = all && f.done
	}
	if all {
		c.syncedOnce.Do(func() {
			close(c.synced)
		})
	}
	// Saved once synced is announced (a warm session that changed nothing
	// writes nothing).
	for _, f := range save {
		c.save(f)
	}
	if all && !c.freed {
		c.freed = true
		c.compact()
	}
	// Computing the status walks the differing paths: at most every 100 ms,
	// and at most 5 % of the engine's time (nextRun); a change meanwhile
	// wakes the engine to publish it then.
	if !force && len(save) == 0 && time.Now().Before(c.statusNext) {
		c.wakeAt(c.statusNext)
		return
	}
	start := time.Now()
	st := c.computeStatus()
	c.statusNext = nextRun(start, 100*time.Millisecond)
	c.mu.Lock()
	c.status = st
	c.mu.Unlock()
}

func (c *Client) computeStatus() Status {
	st := Status{Synced: true}
	select {
	case <-c.synced:
	default:
		st.Synced = false
	}
	for _, f := range c.folders {
		fs := FolderStatus{Local: f.f.Local, Remote: f.f.Remote}
		extra := 0
		for p := range f.diff {
			if _, ok := f.base[p]; !ok {
				extra++
			}
		}
		fs.Files = len(f.base) + extra
		fs.Pending = len(f.diff) + f.settling()
		fs.Waiting = f.waitingSample()
		if !f.remoteReady {
			fs.Pending = fs.Files // nothing is known to be in sync before the agent's index
		}
		if f.remoteReady && fs.Files > 0 {
			fs.Percent = 100 * float64(fs.Files-fs.Pending) / float64(fs.Files)
		} else if f.remoteReady {
			fs.Percent = 100
		}
		fs.Halted = f.halt
		fs.Conflicts = append([]Conflict(nil), f.conflicts...)
		fs.Errors = append([]PathError(nil), f.errs...)
		for i, e := range fs.Errors {
			if rs := f.retry[e.Path]; rs != nil && e.Path != "" {
				fs.Errors[i].Failures = rs.n
				if !rs.next.IsZero() {
					next := rs.next
					fs.Errors[i].NextTry = &next
				}
			}
		}
		st.Folders = append(st.Folders, fs)
	}
	return st
}

// scanErr reports what a local scan could not read (each path once per
// message; what it held is kept, never taken for deleted).
func (c *Client) scanErr(f *cfolder, err error) {
	if err == nil || errors.Is(err, errStopped) {
		return
	}
	f.log.Warn("local scan", "err", err)
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	for _, e := range errs {
		f.addErr("", e.Error())
	}
}

// addErr lists an error in the status; the same error again (an unreadable
// folder at every rescan) moves to the end with its new time.
func (f *cfolder) addErr(p, msg string) {
	for i, e := range f.errs {
		if e.Path == p && e.Err == msg {
			f.errs = append(f.errs[:i], f.errs[i+1:]...)
			break
		}
	}
	f.errs = append(f.errs, PathError{Path: p, Err: msg, Time: time.Now()})
	if len(f.errs) > maxListed {
		f.errs = f.errs[len(f.errs)-maxListed:]
	}
	f.countErrPaths()
}

// dropErr takes p's errors off the list: it is in sync again.
func (f *cfolder) dropErr(p string) {
	out := f.errs[:0]
	for _, e := range f.errs {
		if e.Path != p {
			out = append(out, e)
		}
	}
	clear(f.errs[len(out):])
	f.errs = out
	f.countErrPaths()
}

func (f *cfolder) countErrPaths() {
	f.errPaths = 0
	for _, e := range f.errs {
		if e.Path != "" {
			f.errPaths++
		}
	}
}

func (f *cfolder) addConflict(cf Conflict) {
	f.conflicts = append(f.conflicts, cf)
	if len(f.conflicts) > maxListed {
		f.conflicts = f.conflicts[len(f.conflicts)-maxListed:]
	}
}

// maxWaiting bounds FolderStatus.Waiting.
const maxWaiting = 10

// waitingSample names up to maxWaiting of f's pending paths: those that
// differ or wait for a transfer, then those waiting to settle. Which ones,
// of more, is arbitrary; they are sorted for reading.
func (f *cfolder) waitingSample() []string {
	if !f.remoteReady {
		return nil
	}
	var out []string
	for p := range f.diff {
		if len(out) == maxWaiting {
			break
		}
		out = append(out, p)
	}
	for i := range f.settle {
		out = f.settle[i].waitingPaths(out, maxWaiting)
	}
	sort.Strings(out)
	return out
}

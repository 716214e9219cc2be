package filesync

// Failed paths are tried again with backoff: an operation that failed for a
// reason of this side or the other (permission denied, a read-only
// filesystem, a full disk) is retried 0.5 s later, then after twice as
// long each time up to a minute, so fixing the cause heals the path without
// an edit. A path that changes on either side is decided again at once, as
// before. Status lists how often each failing path failed and when it is
// tried next.

import (
	"time"
)

const (
	retryFirst = 500 * time.Millisecond
	retryMax   = time.Minute
)

// testRetryOff (tests only) turns retries off: a failed path then waits for
// a change, as it did before retries.
var testRetryOff bool

// retrying is the backoff state of a failing path.
type retrying struct {
	n    int       // failures in a row
	next time.Time // when it is tried again
}

// retryDelay is the wait after the n-th failure in a row.
func retryDelay(n int) time.Duration {
	d := retryFirst
	for i := 1; i < n && d < retryMax; i++ {
		d *= 2
	}
	return min(d, retryMax)
}

// failedAt reports whether p failed (or was refused) with exactly these
// local and remote states: then it waits (for a change, or its retry). A
// state that changed since forgets the failure, and so do states that
// agree: there is nothing left to wait for. (A folder's removal there that
// failed as not empty while a move here remade the folder recorded two
// folders; the path then waited, pending, until something below it changed.)
func (f *cfolder) failedAt(p string, l, r Entry) bool {
	fs, ok := f.failed[p]
	if !ok {
		return false
	}
	if same(fs[0], l) && same(fs[1], r) && !f.agree(l, r) {
		return true
	}
	delete(f.failed, p)
	return false
}

// scheduleRetry counts a failure of p and sets when it is tried again.
func (c *Client) scheduleRetry(f *cfolder, p string, now time.Time) {
	if testRetryOff {
		return
	}
	if f.retry == nil {
		f.retry = map[string]*retrying{}
	}
	rs := f.retry[p]
	if rs == nil {
		rs = &retrying{}
		f.retry[p] = rs
	}
	rs.n++
	rs.next = now.Add(retryDelay(rs.n))
	c.wakeAt(rs.next)
}

// retryDue tries again the failed paths whose time came, and wakes the
// engine for the next one.
func (c *Client) retryDue(now time.Time) {
	for _, f := range c.folders {
		for p, rs := range f.retry {
			if rs.next.IsZero() {
				continue
			}
			if now.Before(rs.next) {
				c.wakeAt(rs.next)
				continue
			}
			rs.next = time.Time{} // until it fails again (or heals)
			delete(f.failed, p)
			f.markDirty(p)
		}
	}
}

// healed forgets p's failures: both sides agree on it.
func (f *cfolder) healed(p string) {
	delete(f.failed, p)
	if _, ok := f.retry[p]; ok {
		delete(f.retry, p)
		if len(f.retry) == 0 {
			f.retry = nil // a map that held many paths does not keep its size
		}
	}
	if _, ok := f.refused[p]; ok {
		delete(f.refused, p)
		delete(f.clash, p)
	}
	if f.errPaths > 0 {
		f.dropErr(p)
	}
}

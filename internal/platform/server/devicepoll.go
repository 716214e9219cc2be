package server

import (
	"crypto/sha256"
	"sync"
	"time"
)

// devicePolls is RFC 8628 §3.5's slow_down: a device login polled again sooner than its interval
// while it is still pending is answered slow_down, and its interval grows by 5 seconds for every
// later poll. It is kept per replica in memory (a poll is a read, never a write to the cluster): a
// client alternating between replicas can poll at most once per interval at each, and the login
// limits per address still bound it.
type devicePolls struct {
	mu  sync.Mutex
	now func() time.Time
	m   map[[32]byte]*devicePoll
}

type devicePoll struct {
	last     time.Time
	interval time.Duration
}

// maxDevicePolls bounds the memory: past it, expired entries go; if it is still full, a new device
// code is not tracked (it is never slowed down, and never refused for that).
const maxDevicePolls = 10000

// tooSoon records a poll of a pending device code and says whether it came sooner than its
// interval (then the interval grows by 5 seconds, and the poll's time counts: the client is to wait
// the new interval from now).
func (p *devicePolls) tooSoon(code string) bool {
	key := sha256.Sum256([]byte(code))
	now := p.now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = map[[32]byte]*devicePoll{}
	}
	e, ok := p.m[key]
	if !ok {
		if len(p.m) >= maxDevicePolls {
			for k, v := range p.m {
				if now.Sub(v.last) > deviceLoginLifetime {
					delete(p.m, k)
				}
			}
			if len(p.m) >= maxDevicePolls {
				return false
			}
		}
		p.m[key] = &devicePoll{last: now, interval: devicePollInterval * time.Second}
		return false
	}
	// Half a second of slack for a client that waits exactly the interval (network, scheduling).
	soon := now.Sub(e.last) < e.interval-500*time.Millisecond
	e.last = now
	if soon {
		e.interval += 5 * time.Second
	}
	return soon
}

// forget drops a device code whose login ended (approved, denied, expired or unknown).
func (p *devicePolls) forget(code string) {
	key := sha256.Sum256([]byte(code))
	p.mu.Lock()
	delete(p.m, key)
	p.mu.Unlock()
}

package devssh

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"time"
)

// EventKind says what happened to a Session's connection.
type EventKind int

const (
	// Connected: the first connection is up (Duration: time to connect).
	Connected EventKind = iota + 1
	// Lost: the connection ended (Err says why); forwards wait for the next one.
	Lost
	// Reconnected: a new connection is up (Duration: time since Lost).
	Reconnected
)

func (k EventKind) String() string {
	switch k {
	case Connected:
		return "connected"
	case Lost:
		return "lost"
	case Reconnected:
		return "reconnected"
	}
	return "unknown"
}

// Event reports a change of a Session's connection.
type Event struct {
	Kind     EventKind
	Time     time.Time
	Duration time.Duration
	// Client is the new connection (Connected, Reconnected); nil for Lost.
	Client *Client
	// Err is the reason for Lost.
	Err error
	// Attempts is the number of dials it took (Connected, Reconnected).
	Attempts int
}

// Backoff between reconnection attempts: starts at backoffMin, doubles, caps at backoffMax.
// An agent that keeps dying right after the handshake (connections that live less than
// healthyPeriod, one after the other) makes the wait before the next dial grow too, doubling
// per short-lived connection up to flapMax; a connection that stayed up for healthyPeriod
// resets it. The first loss after a healthy connection reconnects at once.
const (
	backoffMin    = 50 * time.Millisecond
	backoffMax    = time.Second
	flapMax       = 30 * time.Second
	healthyPeriod = time.Minute
)

// lostBackoff is the wait before dialling again after the flaps-th short-lived connection in a
// row: none for the first, then backoffMin doubling up to flapMax.
func lostBackoff(flaps int) time.Duration {
	if flaps <= 1 {
		return 0
	}
	d := backoffMin
	for i := 2; i < flaps && d < flapMax; i++ {
		d *= 2
	}
	return min(d, flapMax)
}

// DefaultForwardWait is how long a connection to a local forward waits for the
// agent connection to come back before it is closed.
const DefaultForwardWait = 30 * time.Second

// Session owns the connection to the agent: it dials, reconnects with a short backoff
// when the connection drops or its keepalive fails, keeps the local forward listeners
// open across reconnections and re-requests the reverse forwards after each one.
type Session struct {
	dial func(ctx context.Context) (net.Conn, error)
	cfg  ClientConfig
	// ForwardWait is how long a connection to a local forward waits for a connection
	// to the agent (DefaultForwardWait when zero). Set before Run.
	ForwardWait time.Duration

	events chan Event

	mu       sync.Mutex
	cur      *Client
	ready    chan struct{} // closed when cur is set; replaced when it is lost
	forwards []*forward
	reverses []reverse
	running  bool
	closed   bool
}

type forward struct {
	ln         net.Listener
	remoteHost string
	remotePort int
}

type reverse struct {
	remotePort int
	localAddr  string
}

// NewSession returns a Session that gets its connections from dial (a port-forward
// stream to the agent). Nothing happens until Run.
func NewSession(dial func(ctx context.Context) (net.Conn, error), cfg ClientConfig) *Session {
	cfg.defaults()
	return &Session{dial: dial, cfg: cfg, events: make(chan Event, 64), ready: make(chan struct{})}
}

// Forward listens on 127.0.0.1:local now (0 picks a free port; see ForwardAddrs) and,
// while Run runs, forwards each connection to remoteHost:remotePort as dialled from
// inside the pod. The listener stays open across reconnections; Run closes it when
// it returns (or Close, when Run never ran).
func (s *Session) Forward(local int, remoteHost string, remotePort int) error {
	if remotePort <= 0 || remotePort > 65535 || local < 0 || local > 65535 {
		return fmt.Errorf("forward %d -> %s:%d: port out of range", local, remoteHost, remotePort)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(local)))
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running || s.closed {
		ln.Close()
		return errors.New("devssh: Forward after Run")
	}
	s.forwards = append(s.forwards, &forward{ln: ln, remoteHost: remoteHost, remotePort: remotePort})
	return nil
}

// ForwardAddrs are the local addresses of the forwards, in the order they were added.
func (s *Session) ForwardAddrs() []net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []net.Addr
	for _, f := range s.forwards {
		out = append(out, f.ln.Addr())
	}
	return out
}

// Reverse asks the agent, on every connection, to listen on 127.0.0.1:remotePort inside
// the pod and forwards each connection to localAddr (a loopback address here).
func (s *Session) Reverse(remotePort int, localAddr string) error {
	if remotePort <= 0 || remotePort > 65535 {
		return fmt.Errorf("reverse %d -> %s: port out of range", remotePort, localAddr)
	}
	if _, _, err := net.SplitHostPort(localAddr); err != nil {
		return fmt.Errorf("reverse %d -> %s: %w", remotePort, localAddr, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running || s.closed {
		return errors.New("devssh: Reverse after Run")
	}
	s.reverses = append(s.reverses, reverse{remotePort: remotePort, localAddr: localAddr})
	return nil
}

// Events delivers the connection's events. It is buffered; when nobody reads it, the
// oldest events are dropped. Use ClientConfig.OnEvent to see every one.
func (s *Session) Events() <-chan Event { return s.events }

// Client is the current connection, nil while disconnected.
func (s *Session) Client() *Client {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur
}

// WaitClient returns the current connection, waiting until there is one or ctx ends.
func (s *Session) WaitClient(ctx context.Context) (*Client, error) {
	for {
		s.mu.Lock()
		c, ready, closed := s.cur, s.ready, s.closed
		s.mu.Unlock()
		if c != nil {
			select {
			case <-c.Done():
			default:
				return c, nil
			}
		}
		if closed {
			return nil, errors.New("devssh: session closed")
		}
		select {
		case <-ready:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Close releases the forward listeners of a Session whose Run never ran. Run closes
// everything itself when it returns.
func (s *Session) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running {
		return nil
	}
	s.closed = true
	for _, f := range s.forwards {
		f.ln.Close()
	}
	return nil
}

func (s *Session) emit(e Event) {
	e.Time = time.Now()
	if s.cfg.OnEvent != nil {
		s.cfg.OnEvent(e)
	}
	for {
		select {
		case s.events <- e:
			return
		default:
		}
		select {
		case <-s.events:
		default:
		}
	}
}

// Run connects and keeps connecting until ctx ends; then it closes the connection,
// the forward listeners and every forwarded connection, waits for its goroutines and
// returns nil. It returns an error early only for faults that retrying cannot fix:
// a changed host key.
func (s *Session) Run(ctx context.Context) error {
	s.mu.Lock()
	if s.running || s.closed {
		s.mu.Unlock()
		return errors.New("devssh: Session.Run called twice")
	}
	s.running = true
	forwards := append([]*forward(nil), s.forwards...)
	reverses := append([]reverse(nil), s.reverses...)
	s.mu.Unlock()

	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	conns := newConnSet()
	defer func() {
		cancel()
		for _, f := range forwards {
			f.ln.Close()
		}
		s.mu.Lock()
		c := s.cur
		s.cur = nil
		s.closed = true
		if c == nil {
			// Disconnected: wake the waiters (they see closed). When connected, ready is
			// already closed.
			close(s.ready)
		}
		s.mu.Unlock()
		if c != nil {
			c.Close()
		}
		conns.closeAll()
		wg.Wait()
	}()
	for _, f := range forwards {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.acceptForward(ctx, f, conns, &wg)
		}()
	}

	first := true
	start := time.Now()
	backoff := time.Duration(0)
	flaps := 0 // short-lived connections in a row (lostBackoff)
	attempts := 0
	var lastErr error
	for {
		if backoff > 0 {
			t := time.NewTimer(backoff)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil
			case <-t.C:
			}
		}
		if ctx.Err() != nil {
			return nil
		}
		attempts++
		c, err := s.connect(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			var hk *HostKeyChangedError
			if errors.As(err, &hk) {
				return err
			}
			if lastErr == nil || lastErr.Error() != err.Error() {
				s.cfg.Logger.Debug("connecting to the agent", "err", err)
			}
			lastErr = err
			backoff = min(max(2*backoff, backoffMin), backoffMax)
			continue
		}
		kind := Reconnected
		if first {
			kind = Connected
		}
		first = false
		s.mu.Lock()
		s.cur = c
		close(s.ready)
		s.mu.Unlock()
		var rwg sync.WaitGroup
		for _, r := range reverses {
			rwg.Add(1)
			go func() {
				defer rwg.Done()
				s.serveReverse(ctx, c, r, conns, &wg)
			}()
		}
		s.emit(Event{Kind: kind, Client: c, Duration: time.Since(start), Attempts: attempts})
		connected := time.Now()
		select {
		case <-ctx.Done():
			c.Close()
			conns.closeAll()
			rwg.Wait()
			return nil
		case <-c.Done():
		}
		reason := c.Err()
		c.Close()
		rwg.Wait()
		s.mu.Lock()
		s.cur = nil
		s.ready = make(chan struct{})
		s.mu.Unlock()
		start = time.Now()
		attempts = 0
		if time.Since(connected) < healthyPeriod {
			flaps++
		} else {
			flaps = 0
		}
		backoff = lostBackoff(flaps)
		lastErr = nil
		if backoff > 0 {
			s.cfg.Logger.Debug("the agent's connections keep ending early: waiting before the next dial", "wait", backoff, "shortLived", flaps)
		}
		s.emit(Event{Kind: Lost, Err: reason})
	}
}

func (s *Session) connect(ctx context.Context) (*Client, error) {
	conn, err := s.dial(ctx)
	if err != nil {
		return nil, err
	}
	return Dial(ctx, conn, s.cfg)
}

func (s *Session) acceptForward(ctx context.Context, f *forward, conns *connSet, wg *sync.WaitGroup) {
	target := net.JoinHostPort(f.remoteHost, strconv.Itoa(f.remotePort))
	wait := s.ForwardWait
	if wait <= 0 {
		wait = DefaultForwardWait
	}
	for {
		lc, err := f.ln.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() && ctx.Err() == nil {
				continue
			}
			return
		}
		if !conns.add(lc) {
			lc.Close()
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer conns.remove(lc)
			// Two tries: a connection that dies between WaitClient and the dial is retried
			// on the next one.
			for try := 0; try < 2; try++ {
				wctx, cancel := context.WithTimeout(ctx, wait)
				c, err := s.WaitClient(wctx)
				cancel()
				if err != nil {
					s.cfg.Logger.Debug("forward: no connection to the agent", "target", target, "err", err)
					return
				}
				rc, err := c.ssh.Dial("tcp", target)
				if err != nil {
					select {
					case <-c.Done():
						continue
					default:
					}
					s.cfg.Logger.Debug("forward: agent could not dial", "target", target, "err", err)
					return
				}
				pipe(lc, rc)
				return
			}
		}()
	}
}

// serveReverse asks c's agent to listen on remotePort and forwards its connections
// to r.localAddr until c ends.
func (s *Session) serveReverse(ctx context.Context, c *Client, r reverse, conns *connSet, wg *sync.WaitGroup) {
	ln := s.listenReverse(ctx, c, r)
	if ln == nil {
		return
	}
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	go func() {
		<-c.Done()
		ln.Close()
	}()
	for {
		rc, err := ln.Accept()
		if err != nil {
			ln.Close()
			return
		}
		if !conns.add(rc) {
			rc.Close()
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer conns.remove(rc)
			var d net.Dialer
			dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			lc, err := d.DialContext(dctx, "tcp", r.localAddr)
			cancel()
			if err != nil {
				s.cfg.Logger.Debug("reverse: local dial failed", "addr", r.localAddr, "err", err)
				return
			}
			if !conns.add(lc) {
				lc.Close()
				return
			}
			defer conns.remove(lc)
			pipe(lc, rc)
		}()
	}
}

// Reverse forwards refused by the agent are asked again: right after a reconnect the agent may
// still hold the port for the connection that was cut (it learns of the cut only when its side
// of that connection fails), and it frees it within a few keepalives.
const (
	reverseRetryMin = 100 * time.Millisecond
	reverseRetryMax = 5 * time.Second
	// reverseWarnAfter: a port still refused after this long is worth a warning (another
	// program in the pod holds it).
	reverseWarnAfter = 30 * time.Second
)

// listenReverse asks c's agent to listen on r's port until it does (nil when c or ctx ends
// first), waiting reverseRetryMin doubling to reverseRetryMax between refusals.
func (s *Session) listenReverse(ctx context.Context, c *Client, r reverse) net.Listener {
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(r.remotePort))
	wait := reverseRetryMin
	began := time.Now()
	warned := false
	for try := 1; ; try++ {
		ln, err := c.ssh.Listen("tcp", addr)
		if err == nil {
			if try > 1 {
				s.cfg.Logger.Info("reverse forward accepted by the agent", "port", r.remotePort, "tries", try, "after", time.Since(began).Round(time.Millisecond))
			}
			return ln
		}
		if !warned && time.Since(began) >= reverseWarnAfter {
			warned = true
			s.cfg.Logger.Warn("reverse forward still refused by the agent (another program in the pod listens on the port?); asking again", "port", r.remotePort, "err", err)
		} else {
			s.cfg.Logger.Debug("reverse forward refused by the agent; asking again", "port", r.remotePort, "wait", wait, "err", err)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-c.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		wait = min(2*wait, reverseRetryMax)
	}
}

// pipe copies both ways, passing half-closes on, and closes both when done.
func pipe(a, b net.Conn) {
	var wg sync.WaitGroup
	wg.Add(2)
	cp := func(dst, src net.Conn) {
		defer wg.Done()
		_, _ = io.Copy(dst, src)
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		} else {
			dst.Close()
		}
	}
	go cp(a, b)
	go cp(b, a)
	wg.Wait()
	a.Close()
	b.Close()
}

// connSet tracks forwarded connections so Run can close them when it ends.
type connSet struct {
	mu     sync.Mutex
	closed bool
	m      map[net.Conn]struct{}
}

func newConnSet() *connSet { return &connSet{m: map[net.Conn]struct{}{}} }

func (s *connSet) add(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.m[c] = struct{}{}
	return true
}

func (s *connSet) remove(c net.Conn) {
	s.mu.Lock()
	delete(s.m, c)
	s.mu.Unlock()
	c.Close()
}

func (s *connSet) closeAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for c := range s.m {
		c.Close()
	}
}

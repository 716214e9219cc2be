package filesync

import (
	"context"
	"fmt"
	"io"
	"time"
)

// sendJob sends the current content of path (file, folder or symlink) as an
// op: a client's push, or a server's answer to a get.
type sendJob struct {
	ID     uint64
	Folder int
	Path   string
	// Local, when set, is the sending side's name of Path (a client's name
	// paired with its Unicode normalization twin on the agent's side).
	Local  string
	Expect Entry // what Path must still be on the sending side
	Peer   Entry // what Path must still be on the receiving side (pushes)
	// Sig, when set, is the receiver's signature of its copy (Peer): the
	// file goes as a delta against it (protocol 3, rsync.go).
	Sig *signature
	// SetExec: a file is sent with exec bit Exec (decided by the client
	// for the receiving side) instead of the one read here.
	SetExec, Exec bool
}

// sender owns the writing half of the stream; one goroutine runs it.
type sender struct {
	fw    *frameWriter
	q     *queue[any]
	trees []*tree
	enc   encoder
	buf   []byte
	// failed reports a sendJob that could not start (the path changed or
	// vanished): the client hands it to its engine, the server answers with a
	// failed result.
	failed func(j *sendJob, cur Entry, err error)
	// DeltaCopied and DeltaLiteral count the bytes of the files sent as
	// deltas that were reused from the receiver's copy and that were sent.
	DeltaCopied, DeltaLiteral int64
}

func newSender(w io.Writer, q *queue[any], trees []*tree, failed func(*sendJob, Entry, error)) *sender {
	return &sender{fw: newFrameWriter(w), q: q, trees: trees, failed: failed, buf: make([]byte, chunkSize)}
}

func (s *sender) send(m any) error {
	s.enc.b = s.enc.b[:0]
	typ := encodeMsg(&s.enc, m)
	return s.fw.frame(typ, s.enc.b)
}

// Coalescing: a message on a quiet stream goes out at once (an edit); while
// the stream is busy (a block sent within flushIdle), a block whose queue ran
// dry waits up to flushDelay for more, and at most flushMax after its first
// frame, so thousands of small messages (results of an initial sync) share
// blocks instead of each paying an SSH packet and a trip through every layer
// of the port-forward.
const (
	flushIdle  = 10 * time.Millisecond
	flushDelay = 2 * time.Millisecond
	flushMax   = 5 * time.Millisecond
)

// run writes what is queued until ctx ends or the stream fails, flushing
// when the queue runs dry (see flushIdle).
func (s *sender) run(ctx context.Context) error {
	defer s.fw.close()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		items, err := s.q.wait(ctx)
		if err != nil {
			return err
		}
		for _, it := range items {
			var err error
			switch j := it.(type) {
			case *sendJob:
				err = s.sendPath(ctx, j)
			case *sigJob:
				err = s.sendSignature(ctx, j)
			case trimMsg:
				s.fw.trim()
				s.enc.b = nil
			default:
				err = s.send(it)
			}
			if err != nil {
				return err
			}
		}
		if s.q.len() > 0 || s.fw.pending() == 0 {
			continue
		}
		if time.Since(s.fw.flushedAt) < flushIdle {
			if err := s.linger(ctx, timer); err != nil {
				return err
			}
			if s.q.len() > 0 {
				continue
			}
		}
		if err := s.fw.flush(); err != nil {
			return err
		}
	}
}

// linger waits until something is queued, flushDelay passed, or the pending
// block is flushMax old.
func (s *sender) linger(ctx context.Context, timer *time.Timer) error {
	deadline := time.Now().Add(flushDelay)
	if d := s.fw.firstAt.Add(flushMax); d.Before(deadline) {
		deadline = d
	}
	for s.q.len() == 0 {
		d := time.Until(deadline)
		if d <= 0 {
			return nil
		}
		timer.Reset(d)
		select {
		case <-ctx.Done():
			timer.Stop()
			return ctx.Err()
		case <-s.q.notify:
			timer.Stop() // a stale token (items already taken) loops again
		case <-timer.C:
			return nil
		}
	}
	return nil
}

func (s *sender) sendPath(ctx context.Context, j *sendJob) error {
	t := s.trees[j.Folder]
	here := j.Path
	if j.Local != "" {
		here = j.Local
	}
	cur, f, err := t.openExpected(here, j.Expect)
	if err == nil && cur.Kind == KindNone {
		err = fmt.Errorf("%s: %w (gone)", here, errChanged)
	}
	if err != nil {
		s.failed(j, cur, err)
		return nil
	}
	op := &opMsg{ID: j.ID, Folder: j.Folder, Path: j.Path, E: cur, Expect: j.Peer}
	if j.SetExec && cur.Kind == KindFile {
		op.E.Exec = j.Exec
	}
	switch cur.Kind {
	case KindDir:
		op.Code = opMkdir
		return s.send(op)
	case KindSymlink:
		op.Code = opSymlink
		return s.send(op)
	}
	if f == nil {
		if f, err = t.open(here); err != nil {
			s.failed(j, Entry{}, err)
			return nil
		}
	}
	defer f.Close()
	if j.Sig != nil {
		return s.sendDelta(ctx, j, op, cur, f)
	}
	op.Code = opPut
	if err := s.send(op); err != nil {
		return err
	}
	h := newHasher()
	var n int64
	r := ctxReader{ctx, f}
	for {
		k, rerr := io.ReadFull(r, s.buf)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		n += int64(k)
		h.Write(s.buf[:k])
		last := rerr != nil
		if n > cur.Size {
			// grew while being sent: the receiver drops it, the watcher
			// brings the new version.
			return s.send(&chunkMsg{ID: j.ID, Last: true, Abort: true})
		}
		if last && (n != cur.Size || h.Sum64() != cur.Hash) {
			return s.send(&chunkMsg{ID: j.ID, Last: true, Abort: true})
		}
		if err := s.send(&chunkMsg{ID: j.ID, Data: s.buf[:k], Last: last}); err != nil {
			return err
		}
		if last {
			return nil
		}
	}
}

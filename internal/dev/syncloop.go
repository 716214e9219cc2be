package dev

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/devtool/devtool/internal/filesync"
)

// SyncSubsystem is the SSH subsystem the agent serves the sync engine on.
const SyncSubsystem = "devtool-sync"

// Opener opens one sync stream over the current SSH connection.
type Opener func() (io.ReadWriteCloser, error)

// SyncLoop runs the sync client over each connection the SSH session makes, and reports the
// states startingSync, synchronizing and ready (once the initial sync is done: the engine's
// Synced, every path equal on both sides or listed as failed), and failed when the sync
// cannot start.
type SyncLoop struct {
	Client *filesync.Client
	Report func(Event)
	Logger *slog.Logger

	failed atomic.Bool // the failed state was reported and the sync has not run since
}

// Run takes an Opener for every (re)connection from conns and synchronizes over it until its
// stream breaks, then waits for the next. A stream that breaks while its connection is alive
// is opened again at once; when that fails too, the sync cannot start (the agent refused it,
// a folder cannot be read): Run reports the failed state with the reason and tries again after
// a growing wait (SyncRetryMin doubling to SyncRetryMax), and reports the state again once a
// sync runs. It returns when ctx ends or conns is closed, after its last Run returned.
func (s *SyncLoop) Run(ctx context.Context, conns <-chan Opener) error {
	readyDone := make(chan struct{})
	rctx, cancel := context.WithCancel(ctx)
	defer func() {
		cancel()
		<-readyDone
	}()
	started := make(chan struct{})
	go func() {
		defer close(readyDone)
		select {
		case <-started:
		case <-rctx.Done():
			return
		}
		select {
		case <-s.Client.Synced():
			s.report(StateReady, "files synchronized; the dev container is ready")
		case <-rctx.Done():
		}
	}()
	first := true
	var open Opener
	failures := 0
	var retry *time.Timer
	defer func() {
		if retry != nil {
			retry.Stop()
		}
	}()
	for {
		if open == nil || retry != nil {
			var retryC <-chan time.Time
			if retry != nil {
				retryC = retry.C
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case o, ok := <-conns:
				if !ok {
					return nil
				}
				open, failures = o, 0
			case <-retryC:
			}
			if retry != nil {
				retry.Stop()
				retry = nil
			}
		}
		if first {
			first = false
			s.report(StateStartingSync, "starting the file synchronization")
			s.report(StateSynchronizing, "synchronizing files")
			close(started)
		}
		var openErr error
		began := time.Now()
		err := s.runOnce(ctx, func() (io.ReadWriteCloser, error) {
			rw, err := open()
			openErr = err
			return rw, err
		})
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if s.Logger != nil && err != nil && !errors.Is(err, io.EOF) {
			s.Logger.Info("sync stream ended", "err", err)
		}
		if openErr != nil {
			open = nil // the connection is gone: wait for the next one
			continue
		}
		if time.Since(began) >= SyncRetryMax {
			failures = 0 // it ran well for a while
		}
		failures++
		if failures == 1 {
			continue
		}
		wait := SyncRetryMin
		for i := 2; i < failures && wait < SyncRetryMax; i++ {
			wait *= 2
		}
		wait = min(wait, SyncRetryMax)
		why := "the stream ended"
		if err != nil {
			why = err.Error()
		}
		s.failed.Store(true)
		s.report(StateFailed, fmt.Sprintf("the file synchronization cannot start: %s; trying again in %s", why, wait))
		retry = time.NewTimer(wait)
	}
}

// SyncRetryMin and SyncRetryMax bound the wait before trying a sync that could not start again.
var (
	SyncRetryMin = 2 * time.Second
	SyncRetryMax = time.Minute
)

// runOnce runs the client over one stream; after a reported failure it reports the state again
// as soon as the sync runs (connected): ready when the initial sync was done, else
// synchronizing.
func (s *SyncLoop) runOnce(ctx context.Context, open Opener) error {
	if !s.failed.Load() {
		return s.Client.Run(ctx, open)
	}
	wctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-wctx.Done():
				return
			case <-t.C:
			}
			if !s.Client.Status().Connected {
				continue
			}
			s.failed.Store(false)
			select {
			case <-s.Client.Synced():
				s.report(StateReady, "the file synchronization runs again; the dev container is ready")
			default:
				s.report(StateSynchronizing, "synchronizing files")
			}
			return
		}
	}()
	err := s.Client.Run(ctx, open)
	stop()
	<-done
	return err
}

func (s *SyncLoop) report(st State, msg string) {
	if s.Report != nil {
		s.Report(Event{State: st, Message: msg})
	}
}

package dev

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
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
// Synced, every path equal on both sides or listed as failed), halted instead of ready while a
// folder's synchronization is halted (and ready again when it goes on), and failed when the
// sync cannot start.
type SyncLoop struct {
	Client *filesync.Client
	Report func(Event)
	Logger *slog.Logger

	failed atomic.Bool // the failed state was reported and the sync has not run since

	haltMu sync.Mutex
	halts  string // the halts reported last ("" when none)
}

// HaltHint says how to go on after a halted synchronization of dev container name (up and
// status show it under the halt).
func HaltHint(name string) string {
	return fmt.Sprintf("To go on: stop this up and run 'devtool up %s --reset' to get the missing files back from the other side (nothing is deleted), "+
		"or 'devtool up %s --accept-deletions' to carry the deletions over.", name, name)
}

// haltCheckEvery is how often the engine's status is looked at for folders that halted or go
// on again (Client.Status is a snapshot: cheap).
var haltCheckEvery = time.Second

// halted describes the folders whose synchronization halted, "" when none.
func (s *SyncLoop) halted() string {
	var msgs []string
	for _, f := range s.Client.Status().Folders {
		if f.Halted != "" {
			msgs = append(msgs, "the synchronization of "+f.Local+" halted: "+f.Halted)
		}
	}
	return strings.Join(msgs, "; ")
}

// reportReady reports the ready state, or the halted one when a folder halted.
func (s *SyncLoop) reportReady(msg string) {
	s.haltMu.Lock()
	defer s.haltMu.Unlock()
	s.halts = s.halted()
	if s.halts != "" {
		s.report(StateHalted, s.halts)
		return
	}
	s.report(StateReady, msg)
}

// checkHalts reports a change of the halted folders once the initial sync is done: halted
// with the reasons, or ready when none is halted any more (the next session found the folder
// back, or up was started again with the deletions accepted).
func (s *SyncLoop) checkHalts() {
	if s.failed.Load() {
		return // the failed state stands until the sync runs again (runOnce reports then)
	}
	s.haltMu.Lock()
	defer s.haltMu.Unlock()
	h := s.halted()
	if h == s.halts {
		return
	}
	prev := s.halts
	s.halts = h
	switch {
	case h != "":
		s.report(StateHalted, h)
	case prev != "":
		s.report(StateReady, "no folder is halted any more; the dev container is ready")
	}
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
		case <-rctx.Done():
			return
		}
		// The engine's status snapshot is published a moment after Synced: the halts are
		// known once it says synced.
		for i := 0; i < 100 && !s.Client.Status().Synced; i++ {
			select {
			case <-rctx.Done():
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
		s.reportReady("files synchronized; the dev container is ready")
		// A folder may halt (or go on after a reconnect) at any time: the state follows.
		t := time.NewTicker(haltCheckEvery)
		defer t.Stop()
		for {
			select {
			case <-rctx.Done():
				return
			case <-t.C:
			}
			s.checkHalts()
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
				s.reportReady("the file synchronization runs again; the dev container is ready")
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

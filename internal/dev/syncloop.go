package dev

import (
	"context"
	"errors"
	"io"
	"log/slog"

	"github.com/devtool/devtool/internal/filesync"
)

// SyncSubsystem is the SSH subsystem the agent serves the sync engine on.
const SyncSubsystem = "devtool-sync"

// Opener opens one sync stream over the current SSH connection.
type Opener func() (io.ReadWriteCloser, error)

// SyncLoop runs the sync client over each connection the SSH session makes, and reports the
// states startingSync, synchronizing and ready (once the initial sync is done).
type SyncLoop struct {
	Client *filesync.Client
	Report func(Event)
	Logger *slog.Logger
}

// Run takes an Opener for every (re)connection from conns and synchronizes over it until its
// stream breaks, then waits for the next. It returns when ctx ends or conns is closed, after
// its last Run returned.
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
	for {
		var open Opener
		var ok bool
		select {
		case <-ctx.Done():
			return ctx.Err()
		case open, ok = <-conns:
			if !ok {
				return nil
			}
		}
		if first {
			first = false
			s.report(StateStartingSync, "starting the file synchronization")
			s.report(StateSynchronizing, "synchronizing files")
			close(started)
		}
		err := s.Client.Run(ctx, open)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if s.Logger != nil && err != nil && !errors.Is(err, io.EOF) {
			s.Logger.Info("sync stream ended", "err", err)
		}
	}
}

func (s *SyncLoop) report(st State, msg string) {
	if s.Report != nil {
		s.Report(Event{State: st, Message: msg})
	}
}

package main

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"

	"github.com/devtool/devtool/internal/filesync"
)

<<<<<<< HEAD
// syncServer serves the devtool-sync subsystem with the sync engine's remote end; its
// indexes live on the dev volume, next to (never inside) the synced folders.
func syncServer(home string, logger *slog.Logger) func(ctx context.Context, ch io.ReadWriteCloser) error {
	return func(ctx context.Context, ch io.ReadWriteCloser) error {
		return filesync.Serve(ctx, ch, filesync.ServerOptions{StateDir: filepath.Join(home, "filesync"), Logger: logger})
=======
// syncServer serves each devtool-sync subsystem channel with the sync engine's remote
// end; its indexes live on the dev volume (HOME/sync) so the next up starts warm.
func syncServer(home string, logger *slog.Logger) func(ctx context.Context, ch io.ReadWriteCloser) error {
	opts := filesync.ServerOptions{StateDir: filepath.Join(home, "sync"), Logger: logger.With("component", "sync")}
	return func(ctx context.Context, ch io.ReadWriteCloser) error {
		return filesync.Serve(ctx, ch, opts)
>>>>>>> agent
	}
}

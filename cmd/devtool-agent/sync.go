package main

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"

	"github.com/devtool/devtool/internal/filesync"
)

// syncServer serves each devtool-sync subsystem channel with the sync engine's remote
// end; its indexes live on the dev volume (HOME/sync) so the next up starts warm.
func syncServer(home string, logger *slog.Logger) func(ctx context.Context, ch io.ReadWriteCloser) error {
	opts := filesync.ServerOptions{StateDir: filepath.Join(home, "sync"), Logger: logger.With("component", "sync")}
	return func(ctx context.Context, ch io.ReadWriteCloser) error {
		return filesync.Serve(ctx, ch, opts)
	}
}

package main

import (
	"context"
	"io"
	"log/slog"
)

// syncServer serves the devtool-sync subsystem. Nil until the sync engine is wired in:
// the agent then refuses the subsystem.
func syncServer(home string, logger *slog.Logger) func(ctx context.Context, ch io.ReadWriteCloser) error {
	return nil
}

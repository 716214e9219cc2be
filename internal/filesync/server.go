package filesync

import (
	"context"
	"errors"
	"io"
)

// Serve runs the remote end over rw (one devtool-sync subsystem channel)
// until the stream ends or ctx is done; it closes rw before returning.
func Serve(ctx context.Context, rw io.ReadWriteCloser, opts ServerOptions) error {
	defer rw.Close()
	return errors.New("filesync: not implemented yet")
}

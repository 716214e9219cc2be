package up

import (
	"context"
	"errors"
	"fmt"

	"github.com/devtool/devtool/internal/dev"
)

func run(ctx context.Context, opts *Options) error {
	p, err := prepare(ctx, opts)
	if err != nil {
		return err
	}
	defer p.state.Unlock()
	defer p.log.Close()
	err = runSession(ctx, opts, p)
	// Ctrl-C while the dev container was being activated: the original may be at zero
	// replicas. main prints "Interrupted."; say first what is left and how to restore it.
	var ie *dev.InterruptedError
	if errors.As(err, &ie) {
		fmt.Fprintf(opts.IO.ErrOut, "%s may be left at zero replicas (the dev container %s was being activated): 'devtool down %s' restores it.\n", ie.Original, ie.Dev, ie.Dev)
	}
	return err
}

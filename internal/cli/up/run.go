package up

import (
	"context"
)

func run(ctx context.Context, opts *Options) error {
	p, err := prepare(ctx, opts)
	if err != nil {
		return err
	}
	defer p.state.Unlock()
	defer p.log.Close()
	return runSession(ctx, opts, p)
}

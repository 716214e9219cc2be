package up

import (
	"context"
	"errors"
)

// run is wired to the SSH session once internal/devssh lands; until then the command is not
// registered.
func run(ctx context.Context, opts *Options) error {
	p, err := prepare(ctx, opts)
	if err != nil {
		return err
	}
	defer p.state.Unlock()
	defer p.log.Close()
	return errors.New("up: the SSH session is not wired yet")
}

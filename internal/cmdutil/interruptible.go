package cmdutil

import "context"

// Interruptible runs f, work without side effects (reading, parsing and checking files), and
// returns ctx's error as soon as ctx ends. The YAML parser cannot be interrupted, so a Ctrl-C
// while a huge Compose file loads abandons the load (the process exits right after; the
// goroutine ends when the bounded work does) instead of waiting for it.
func Interruptible[T any](ctx context.Context, f func() (T, error)) (T, error) {
	var zero T
	if err := ctx.Err(); err != nil {
		return zero, err
	}
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1) // buffered: an abandoned f ends without blocking
	go func() {
		v, err := f()
		ch <- result{v, err}
	}()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		return zero, ctx.Err()
	}
}

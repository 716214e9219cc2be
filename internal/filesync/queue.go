package filesync

import (
	"context"
	"sync"
)

// queue is an unbounded FIFO between goroutines: push never blocks (so a
// reader never waits on a writer), wait hands over everything queued.
type queue[T any] struct {
	mu     sync.Mutex
	items  []T
	notify chan struct{}
}

func newQueue[T any]() *queue[T] { return &queue[T]{notify: make(chan struct{}, 1)} }

func (q *queue[T]) push(v ...T) {
	q.mu.Lock()
	q.items = append(q.items, v...)
	q.mu.Unlock()
	select {
	case q.notify <- struct{}{}:
	default:
	}
}

// take returns what is queued without waiting.
func (q *queue[T]) take() []T {
	q.mu.Lock()
	defer q.mu.Unlock()
	v := q.items
	q.items = nil
	return v
}

func (q *queue[T]) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.items)
}

// wait returns the queued items, waiting for one if none is.
func (q *queue[T]) wait(ctx context.Context) ([]T, error) {
	for {
		if v := q.take(); len(v) > 0 {
			return v, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-q.notify:
		}
	}
}

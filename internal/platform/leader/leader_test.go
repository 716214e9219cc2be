package leader

import (
	"context"
	"sync"
	"testing"
	"time"

	kfake "k8s.io/client-go/kubernetes/fake"
)

// TestOneLeaderAndTakeover: of two replicas one leads; when it stops (its context ends, as on
// SIGTERM) it releases the Lease and the other leads; Run returns once its context ends.
func TestOneLeaderAndTakeover(t *testing.T) {
	kc := kfake.NewClientset()
	var mu sync.Mutex
	leading := map[string]bool{}
	start := func(id string) (context.CancelFunc, chan struct{}) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			Run(ctx, Options{Kube: kc, Namespace: "ns", Identity: id,
				LeaseDuration: time.Second, RenewDeadline: 500 * time.Millisecond, RetryPeriod: 100 * time.Millisecond,
				Lead: func(lctx context.Context) {
					mu.Lock()
					leading[id] = true
					mu.Unlock()
					<-lctx.Done()
					mu.Lock()
					leading[id] = false
					mu.Unlock()
				}})
		}()
		return cancel, done
	}
	leaders := func() []string {
		mu.Lock()
		defer mu.Unlock()
		var out []string
		for id, on := range leading {
			if on {
				out = append(out, id)
			}
		}
		return out
	}
	waitFor := func(what string, ok func([]string) bool) []string {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			if l := leaders(); ok(l) {
				return l
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Fatalf("%s: leaders %v", what, leaders())
		return nil
	}
	cancelA, doneA := start("a")
	cancelB, doneB := start("b")
	defer func() { cancelA(); cancelB(); <-doneA; <-doneB }()
	first := waitFor("one leader", func(l []string) bool { return len(l) == 1 })[0]
	time.Sleep(300 * time.Millisecond)
	if l := leaders(); len(l) != 1 {
		t.Fatalf("two leaders: %v", l)
	}
	stop, done := cancelA, doneA
	if first == "b" {
		stop, done = cancelB, doneB
	}
	stop()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	waitFor("the other leads", func(l []string) bool { return len(l) == 1 && l[0] != first })
}

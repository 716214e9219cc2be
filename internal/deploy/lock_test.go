package deploy

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func TestLock(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewClientset()
	first, err := AcquireLock(ctx, cs, "dev", "shop", "alice@a (pid 1)")
	if err != nil {
		t.Fatal(err)
	}
	_, err = AcquireLock(ctx, cs, "dev", "shop", "bob@b (pid 2)")
	var le *LockedError
	if !errors.As(err, &le) || le.Holder != "alice@a (pid 1)" || !strings.Contains(err.Error(), "alice@a (pid 1) since") {
		t.Fatalf("second acquire: %v", err)
	}
	if other, err := AcquireLock(ctx, cs, "dev", "other", "bob@b (pid 2)"); err != nil {
		t.Fatalf("another environment is not locked: %v", err)
	} else {
		_ = other.Release(ctx)
	}
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoordinationV1().Leases("dev").Get(ctx, LockName("shop"), metav1.GetOptions{}); err == nil {
		t.Fatal("the lease is still there after Release")
	}

	// A lease not renewed for more than twice its duration is stale: taken over.
	crashed, err := AcquireLock(ctx, cs, "dev", "shop", "carol@c (pid 3)")
	if err != nil {
		t.Fatal(err)
	}
	crashed.cancel()
	<-crashed.done
	l, _ := cs.CoordinationV1().Leases("dev").Get(ctx, LockName("shop"), metav1.GetOptions{})
	old := metav1.NewMicroTime(time.Now().Add(-3 * LockDuration))
	l.Spec.RenewTime, l.Spec.AcquireTime = &old, &old
	if _, err := cs.CoordinationV1().Leases("dev").Update(ctx, l, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	taker, err := AcquireLock(ctx, cs, "dev", "shop", "bob@b (pid 2)")
	if err != nil {
		t.Fatalf("a stale lease was not taken over: %v", err)
	}
	l, _ = cs.CoordinationV1().Leases("dev").Get(ctx, LockName("shop"), metav1.GetOptions{})
	if *l.Spec.HolderIdentity != "bob@b (pid 2)" {
		t.Errorf("holder %q after takeover", *l.Spec.HolderIdentity)
	}
	_ = taker.Release(ctx)
}

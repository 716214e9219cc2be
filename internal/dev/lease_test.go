package dev

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// A second holder is refused naming the first (host, folder, since when); the same holder takes
// its own lease again (an up restarted after a crash); --force takes it over, and the first
// holder's next renewal finds it lost, naming the new holder; release leaves another's lease.
func TestLeaseOneOwner(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewClientset()
	a := Holder{ID: "SHA256:a", Host: "ann@laptop", Folder: "/home/ann/shop", PID: 11}
	b := Holder{ID: "SHA256:b", Host: "bob@desk", Folder: "/home/bob/shop", PID: 22}
	la, took, err := AcquireLease(ctx, cs, "ns", "api", a, false)
	if err != nil || took != nil {
		t.Fatalf("first acquire: %v (took %v)", err, took)
	}
	_, _, err = AcquireLease(ctx, cs, "ns", "api", b, false)
	var held *LeaseHeldError
	if !errors.As(err, &held) {
		t.Fatalf("second holder: %v, want a *LeaseHeldError", err)
	}
	for _, want := range []string{"ann@laptop", "/home/ann/shop", "pid 11", "since 20"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q does not name %q", err, want)
		}
	}
	if _, _, err := AcquireLease(ctx, cs, "ns", "api", a, false); err != nil {
		t.Fatalf("the holder again: %v", err)
	}
	if err := la.Renew(ctx); err != nil {
		t.Fatalf("renew: %v", err)
	}
	lb, took, err := AcquireLease(ctx, cs, "ns", "api", b, true)
	if err != nil || took == nil || took.ID != a.ID {
		t.Fatalf("--force: %v (took %v), want taken from %s", err, took, a.ID)
	}
	err = la.Renew(ctx)
	var lost *LeaseLostError
	if !errors.As(err, &lost) || lost.Holder.Host != "bob@desk" {
		t.Fatalf("renew after the takeover: %v, want lost to bob@desk", err)
	}
	select {
	case <-la.Lost():
	default:
		t.Error("Lost() not closed")
	}
	if err := la.Release(ctx); err != nil {
		t.Fatal(err)
	}
	l, err := cs.CoordinationV1().Leases("ns").Get(ctx, LeaseName("api"), metav1.GetOptions{})
	if err != nil || *l.Spec.HolderIdentity != b.ID || *l.Spec.LeaseTransitions != 1 {
		t.Fatalf("after the old holder's release: %v %+v", err, l)
	}
	if err := lb.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoordinationV1().Leases("ns").Get(ctx, LeaseName("api"), metav1.GetOptions{}); err == nil {
		t.Error("the holder's release left the lease")
	}
}

// A lease not renewed within its duration (its up died) is taken without --force.
func TestLeaseExpiredIsTaken(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewClientset()
	a, b := Holder{ID: "SHA256:a", Host: "ann@laptop"}, Holder{ID: "SHA256:b", Host: "bob@desk"}
	if _, _, err := AcquireLease(ctx, cs, "ns", "api", a, false); err != nil {
		t.Fatal(err)
	}
	l, err := cs.CoordinationV1().Leases("ns").Get(ctx, LeaseName("api"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	old := metav1.NewMicroTime(time.Now().Add(-LeaseDuration - time.Second))
	l.Spec.RenewTime = &old
	if _, err := cs.CoordinationV1().Leases("ns").Update(ctx, l, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, took, err := AcquireLease(ctx, cs, "ns", "api", b, false); err != nil || took != nil {
		t.Fatalf("taking an expired lease: %v (took %v: an expired holder is no live one)", err, took)
	}
}

// Two ups racing for an expired lease: the one whose update conflicts (the other renewed it in
// between, a new resourceVersion) reads it again and is refused, never both holding it.
func TestLeaseConflictIsJudgedAgain(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewClientset()
	a, b := Holder{ID: "SHA256:a", Host: "ann@laptop"}, Holder{ID: "SHA256:b", Host: "bob@desk"}
	if _, _, err := AcquireLease(ctx, cs, "ns", "api", a, false); err != nil {
		t.Fatal(err)
	}
	leases := cs.CoordinationV1().Leases("ns")
	l, _ := leases.Get(ctx, LeaseName("api"), metav1.GetOptions{})
	old := metav1.NewMicroTime(time.Now().Add(-LeaseDuration - time.Second))
	l.Spec.RenewTime = &old
	if _, err := leases.Update(ctx, l, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	raced := false
	cs.PrependReactor("update", "leases", func(action k8stesting.Action) (bool, runtime.Object, error) {
		if raced {
			return false, nil, nil
		}
		raced = true
		// a renews first: the lease is live again and b's write is stale (through the
		// tracker: the clientset is locked while its reactors run).
		gvr := coordinationv1.SchemeGroupVersion.WithResource("leases")
		obj, err := cs.Tracker().Get(gvr, "ns", LeaseName("api"))
		if err != nil {
			return true, nil, err
		}
		cur := obj.(*coordinationv1.Lease).DeepCopy()
		now := metav1.NewMicroTime(time.Now())
		cur.Spec.RenewTime = &now
		if err := cs.Tracker().Update(gvr, cur, "ns"); err != nil {
			return true, nil, err
		}
		return true, nil, apierrors.NewConflict(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, LeaseName("api"), errors.New("the object has been modified"))
	})
	_, _, err := AcquireLease(ctx, cs, "ns", "api", b, false)
	var held *LeaseHeldError
	if !raced || !errors.As(err, &held) || held.Holder.ID != a.ID {
		t.Fatalf("after losing the race: %v (raced %v), want held by %s", err, raced, a.ID)
	}
}

package dev

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	kptr "k8s.io/utils/ptr"

	"github.com/devtool/devtool/internal/kube"
)

// A dev container has one owner: the `up` holding its Lease (coordination.k8s.io), named
// LeaseName(dev), in the namespace. The holder's identity is its key's fingerprint (one key per
// machine, home and folder: the state folder's); annotations on the Lease say where it runs.
// The holder renews it every third of LeaseDuration; one not renewed within LeaseDuration
// belongs to an `up` that died and is taken over. A live lease of another holder refuses `up`
// (*LeaseHeldError) unless it is taken over on purpose (force); the `up` that lost it sees so
// at its next renewal and stops (*LeaseLostError). Every write is guarded by the
// resourceVersion read, so two `up`s never both think they took it.

// LeaseDuration is how long a dev container's lease lasts without renewal.
var LeaseDuration = 30 * time.Second

// Annotations on the lease saying where its holder runs.
const (
	annotationLeaseHost   = "dev.devtool/holder-host"
	annotationLeaseFolder = "dev.devtool/holder-folder"
	annotationLeasePID    = "dev.devtool/holder-pid"
)

// LeaseName is the Lease of a dev container.
func LeaseName(dev string) string { return "devtool-dev-" + dev }

// Holder says who holds a dev container: ID compares, the rest is shown.
type Holder struct {
	ID     string // the key's fingerprint
	Host   string // user@host
	Folder string // the manifest folder
	PID    int
}

func (h Holder) String() string {
	s := h.Host
	if h.Folder != "" {
		s += " in " + h.Folder
	}
	if h.PID > 0 {
		s += fmt.Sprintf(" (pid %d)", h.PID)
	}
	return s
}

// LeaseHeldError refuses `up` while another live `up` holds the dev container.
type LeaseHeldError struct {
	Dev, Namespace string
	Holder         Holder
	Since          time.Time
}

func (e *LeaseHeldError) Error() string {
	return fmt.Sprintf("dev container %s in namespace %s is held by another 'devtool up': %s, since %s",
		e.Dev, e.Namespace, e.Holder, sinceText(e.Since))
}

// LeaseLostError ends `up` when another `up` took the dev container over (--force).
type LeaseLostError struct {
	Dev    string
	Holder Holder
}

func (e *LeaseLostError) Error() string {
	return fmt.Sprintf("dev container %s was taken over by %s", e.Dev, e.Holder)
}

func sinceText(t time.Time) string {
	if t.IsZero() {
		return "an unknown time"
	}
	return fmt.Sprintf("%s (%s ago)", t.Local().Format(time.RFC3339), time.Since(t).Round(time.Second))
}

// Lease is a held dev container lease.
type Lease struct {
	cs     kubernetes.Interface
	ns     string
	dev    string
	holder Holder

	mu   sync.Mutex
	lost error
	gone chan struct{} // closed when lost
}

// AcquireLease takes the dev container's lease for holder: creates it, renews it when holder
// holds it already, takes it over when it expired or force is set. A live lease of another
// holder is a *LeaseHeldError. It returns the previous holder when it took a live lease over.
func AcquireLease(ctx context.Context, cs kubernetes.Interface, ns, dev string, holder Holder, force bool) (*Lease, *Holder, error) {
	leases := cs.CoordinationV1().Leases(ns)
	for attempt := 0; ; attempt++ {
		now := metav1.NewMicroTime(time.Now())
		cur, err := leases.Get(ctx, LeaseName(dev), metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: LeaseName(dev), Namespace: ns,
				Labels: map[string]string{kube.LabelManagedBy: kube.ManagedByValue, LabelDev: dev}}}
			setHolder(l, holder, now, true)
			_, err = leases.Create(ctx, l, metav1.CreateOptions{FieldManager: FieldManager})
			if apierrors.IsAlreadyExists(err) && attempt < 3 {
				continue
			}
			if err != nil {
				return nil, nil, fmt.Errorf("dev %s: taking its lease %s: %w", dev, LeaseName(dev), err)
			}
			return newLease(cs, ns, dev, holder), nil, nil
		case err != nil:
			return nil, nil, fmt.Errorf("dev %s: reading its lease %s: %w", dev, LeaseName(dev), err)
		}
		prev := leaseHolder(cur)
		mine := prev.ID == holder.ID
		live := !mine && prev.ID != "" && !leaseExpired(cur, time.Now())
		if live && !force {
			e := &LeaseHeldError{Dev: dev, Namespace: ns, Holder: prev}
			if cur.Spec.AcquireTime != nil {
				e.Since = cur.Spec.AcquireTime.Time
			}
			return nil, nil, e
		}
		setHolder(cur, holder, now, !mine)
		if !mine {
			cur.Spec.LeaseTransitions = kptr.To(kptr.Deref(cur.Spec.LeaseTransitions, 0) + 1)
		}
		// Update sends the resourceVersion read: a conflict means someone else wrote it
		// meanwhile, so it is read and judged again.
		_, err = leases.Update(ctx, cur, metav1.UpdateOptions{FieldManager: FieldManager})
		if apierrors.IsConflict(err) && attempt < 3 {
			continue
		}
		if err != nil {
			return nil, nil, fmt.Errorf("dev %s: taking its lease %s: %w", dev, LeaseName(dev), err)
		}
		var took *Holder
		if live {
			took = &prev
		}
		return newLease(cs, ns, dev, holder), took, nil
	}
}

func newLease(cs kubernetes.Interface, ns, dev string, h Holder) *Lease {
	return &Lease{cs: cs, ns: ns, dev: dev, holder: h, gone: make(chan struct{})}
}

func setHolder(l *coordinationv1.Lease, h Holder, now metav1.MicroTime, acquire bool) {
	l.Spec.HolderIdentity = kptr.To(h.ID)
	l.Spec.LeaseDurationSeconds = kptr.To(int32(LeaseDuration / time.Second))
	l.Spec.RenewTime = &now
	if acquire || l.Spec.AcquireTime == nil {
		l.Spec.AcquireTime = &now
	}
	if l.Annotations == nil {
		l.Annotations = map[string]string{}
	}
	l.Annotations[annotationLeaseHost] = h.Host
	l.Annotations[annotationLeaseFolder] = h.Folder
	l.Annotations[annotationLeasePID] = fmt.Sprint(h.PID)
}

func leaseHolder(l *coordinationv1.Lease) Holder {
	h := Holder{ID: kptr.Deref(l.Spec.HolderIdentity, ""), Host: l.Annotations[annotationLeaseHost], Folder: l.Annotations[annotationLeaseFolder]}
	fmt.Sscan(l.Annotations[annotationLeasePID], &h.PID)
	if h.Host == "" {
		h.Host = "unknown (" + h.ID + ")"
	}
	return h
}

// leaseExpired reports whether a lease was not renewed within its duration.
func leaseExpired(l *coordinationv1.Lease, now time.Time) bool {
	d := LeaseDuration
	if l.Spec.LeaseDurationSeconds != nil {
		d = time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second
	}
	t := l.CreationTimestamp.Time
	if l.Spec.RenewTime != nil {
		t = l.Spec.RenewTime.Time
	}
	return t.Add(d).Before(now)
}

// Lost is closed when another holder took the lease over; Err then says who.
func (l *Lease) Lost() <-chan struct{} { return l.gone }

// Err is the *LeaseLostError once the lease is lost, else nil.
func (l *Lease) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lost
}

// Keep renews the lease every third of LeaseDuration until ctx ends or the lease is lost (then
// it returns the *LeaseLostError). A renewal that fails (the API server is away) is tried again
// at the next tick.
func (l *Lease) Keep(ctx context.Context, log func(msg string, args ...any)) error {
	t := time.NewTicker(LeaseDuration / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		if err := l.Renew(ctx); err != nil {
			if l.Err() != nil {
				return err
			}
			if ctx.Err() == nil && log != nil {
				log("renewing the dev container's lease", "err", err)
			}
		}
	}
}

// Renew renews the lease once; a lease held by another holder is lost (*LeaseLostError).
func (l *Lease) Renew(ctx context.Context) error {
	leases := l.cs.CoordinationV1().Leases(l.ns)
	cur, err := leases.Get(ctx, LeaseName(l.dev), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		// Deleted (by `down`, or by hand): take it again; a racing `up` of another
		// holder makes Create fail and the next renewal sees it.
		_, _, err = AcquireLease(ctx, l.cs, l.ns, l.dev, l.holder, false)
		return l.judge(err)
	}
	if err != nil {
		return err
	}
	if h := leaseHolder(cur); h.ID != l.holder.ID {
		return l.judge(&LeaseHeldError{Holder: h})
	}
	setHolder(cur, l.holder, metav1.NewMicroTime(time.Now()), false)
	_, err = leases.Update(ctx, cur, metav1.UpdateOptions{FieldManager: FieldManager})
	return err
}

// judge turns a refusal into the lost state.
func (l *Lease) judge(err error) error {
	held, ok := err.(*LeaseHeldError)
	if !ok {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lost == nil {
		l.lost = &LeaseLostError{Dev: l.dev, Holder: held.Holder}
		close(l.gone)
	}
	return l.lost
}

// Release deletes the lease while this holder still holds it (guarded by its resourceVersion).
func (l *Lease) Release(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	leases := l.cs.CoordinationV1().Leases(l.ns)
	cur, err := leases.Get(ctx, LeaseName(l.dev), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if leaseHolder(cur).ID != l.holder.ID {
		return nil
	}
	err = leases.Delete(ctx, cur.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &cur.UID, ResourceVersion: &cur.ResourceVersion}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("dev %s: releasing its lease: %w", l.dev, err)
	}
	return nil
}

// LeaseStatus is who holds a dev container's lease as the cluster shows it (for the web UI):
// the holder, when it took and last renewed the lease, and whether it is still live (renewed
// within its duration).
type LeaseStatus struct {
	Dev     string
	Holder  Holder
	Since   time.Time
	Renewed time.Time
	Live    bool
}

// ReadLeaseStatus reads a dev container's Lease object (one named LeaseName(dev)).
func ReadLeaseStatus(l *coordinationv1.Lease, now time.Time) LeaseStatus {
	st := LeaseStatus{Dev: l.Labels[LabelDev], Holder: leaseHolder(l), Live: !leaseExpired(l, now)}
	if st.Dev == "" {
		st.Dev = strings.TrimPrefix(l.Name, LeaseName(""))
	}
	if l.Spec.AcquireTime != nil {
		st.Since = l.Spec.AcquireTime.Time
	}
	if l.Spec.RenewTime != nil {
		st.Renewed = l.Spec.RenewTime.Time
	}
	return st
}

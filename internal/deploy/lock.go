package deploy

import (
	"context"
	"fmt"
	"os"
	"os/user"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/devtool/devtool/internal/kube"
)

// LockDuration is the lease duration of an environment lock; it is renewed every third of it.
// A lease not renewed for twice its duration is stale (its holder died) and is taken over.
var LockDuration = 30 * time.Second

// LockName is the Lease that serialises deploys and destroys of an environment.
func LockName(env string) string { return "devtool-lock-" + env }

// LockedError says another deploy or destroy of the environment is running.
type LockedError struct {
	Env, Namespace, Holder string
	Since                  time.Time
}

func (e *LockedError) Error() string {
	since := "an unknown time"
	if !e.Since.IsZero() {
		since = fmt.Sprintf("%s (%s ago)", e.Since.Local().Format(time.RFC3339), time.Since(e.Since).Round(time.Second))
	}
	return fmt.Sprintf("environment %s in namespace %s is locked by another deploy or destroy: held by %s since %s (lease %s); try again when it has finished",
		e.Env, e.Namespace, e.Holder, since, LockName(e.Env))
}

// Lock is a held environment lock.
type Lock struct {
	cs     kubernetes.Interface
	ns     string
	env    string
	holder string
	cancel context.CancelFunc
	done   chan struct{}
}

// LockHolder describes this process: user@host (pid N).
func LockHolder() string {
	h, _ := os.Hostname()
	u := "unknown"
	if cur, err := user.Current(); err == nil {
		u = cur.Username
	}
	return fmt.Sprintf("%s@%s (pid %d)", u, h, os.Getpid())
}

// AcquireLock creates the environment's Lease, or takes over a stale one, and renews it until
// Release. A live lease held by someone else is a *LockedError.
func AcquireLock(ctx context.Context, cs kubernetes.Interface, ns, env, holder string) (*Lock, error) {
	leases := cs.CoordinationV1().Leases(ns)
	now := metav1.NewMicroTime(time.Now())
	secs := int32(LockDuration / time.Second)
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: LockName(env), Namespace: ns,
			Labels: map[string]string{kube.LabelManagedBy: kube.ManagedByValue, LabelState: env}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(holder), LeaseDurationSeconds: ptr.To(secs),
			AcquireTime: &now, RenewTime: &now},
	}
	_, err := leases.Create(ctx, lease, metav1.CreateOptions{FieldManager: kube.FieldManager})
	if apierrors.IsAlreadyExists(err) {
		cur, gerr := leases.Get(ctx, lease.Name, metav1.GetOptions{})
		if gerr != nil {
			return nil, fmt.Errorf("reading lock %s: %w", lease.Name, gerr)
		}
		if !stale(cur) {
			return nil, lockedError(cur, ns, env)
		}
		cur.Spec = lease.Spec
		_, err = leases.Update(ctx, cur, metav1.UpdateOptions{FieldManager: kube.FieldManager})
		if apierrors.IsConflict(err) {
			if cur2, gerr := leases.Get(ctx, lease.Name, metav1.GetOptions{}); gerr == nil {
				return nil, lockedError(cur2, ns, env)
			}
		}
	}
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("namespace %q does not exist", ns)
	}
	if err != nil {
		return nil, fmt.Errorf("taking the lock of environment %s (lease %s): %w", env, lease.Name, err)
	}
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	l := &Lock{cs: cs, ns: ns, env: env, holder: holder, cancel: cancel, done: make(chan struct{})}
	go l.renew(rctx)
	return l, nil
}

func stale(l *coordinationv1.Lease) bool {
	if l.Spec.RenewTime == nil {
		return l.CreationTimestamp.Time.Add(2 * LockDuration).Before(time.Now())
	}
	d := LockDuration
	if l.Spec.LeaseDurationSeconds != nil {
		d = time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second
	}
	return l.Spec.RenewTime.Time.Add(2 * d).Before(time.Now())
}

func lockedError(l *coordinationv1.Lease, ns, env string) error {
	e := &LockedError{Env: env, Namespace: ns, Holder: "unknown"}
	if l.Spec.HolderIdentity != nil {
		e.Holder = *l.Spec.HolderIdentity
	}
	if l.Spec.AcquireTime != nil {
		e.Since = l.Spec.AcquireTime.Time
	}
	return e
}

func (l *Lock) renew(ctx context.Context) {
	defer close(l.done)
	t := time.NewTicker(LockDuration / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		leases := l.cs.CoordinationV1().Leases(l.ns)
		cur, err := leases.Get(ctx, LockName(l.env), metav1.GetOptions{})
		if err != nil || cur.Spec.HolderIdentity == nil || *cur.Spec.HolderIdentity != l.holder {
			continue
		}
		now := metav1.NewMicroTime(time.Now())
		cur.Spec.RenewTime = &now
		_, _ = leases.Update(ctx, cur, metav1.UpdateOptions{FieldManager: kube.FieldManager})
	}
}

// Release stops renewing and deletes the lease (only while this process still holds it).
func (l *Lock) Release(ctx context.Context) error {
	l.cancel()
	<-l.done
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	leases := l.cs.CoordinationV1().Leases(l.ns)
	cur, err := leases.Get(ctx, LockName(l.env), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if cur.Spec.HolderIdentity == nil || *cur.Spec.HolderIdentity != l.holder {
		return nil
	}
	err = leases.Delete(ctx, cur.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &cur.UID, ResourceVersion: &cur.ResourceVersion}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("releasing the lock of environment %s: %w", l.env, err)
	}
	return nil
}

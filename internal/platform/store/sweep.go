package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
)

// ExpiredTokenGrace is how long an expired token is kept (listed as expired) before the sweep
// deletes it.
const ExpiredTokenGrace = 24 * time.Hour

// Swept counts what one Sweep removed or reset.
type Swept struct {
	Tokens, Failures, Logins, Sessions int
}

// Sweep is the leader's background work: it deletes tokens expired longer than ExpiredTokenGrace,
// resets failed-login counts whose last failure is older than StaleFailures (and whose lock is
// over), deletes expired login records and web sessions past their lifetime or idle too long
// (SweepSessions). Every change is guarded (UID precondition,
// resourceVersion), so a second replica sweeping at the same time changes nothing twice.
func (s *Store) Sweep(ctx context.Context) (Swept, error) {
	var out Swept
	var errs []error
	now := s.now()
	objs, err := s.tokens.ByNamespace(s.Namespace).List(labels.Everything())
	if err != nil {
		errs = append(errs, err)
	}
	res := s.Dyn.Resource(TokenResource).Namespace(s.Namespace)
	for _, o := range objs {
		u := o.(*unstructured.Unstructured)
		t := tokenFrom(u)
		if t.Expires.IsZero() || now.Sub(t.Expires) < ExpiredTokenGrace {
			continue
		}
		uid := u.GetUID()
		if err := res.Delete(ctx, t.ID, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}); err == nil {
			out.Tokens++
		} else if !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			errs = append(errs, fmt.Errorf("deleting expired token %s: %w", t.ID, err))
		}
	}
	users, err := s.Users()
	if err != nil {
		errs = append(errs, err)
	}
	for _, u := range users {
		if u.FailedLogins == 0 || now.Sub(u.LastFailure) < StaleFailures || now.Before(u.LockedUntil) {
			continue
		}
		changed := false
		_, err := s.updateUser(ctx, u.Name, func(u *User) bool {
			if u.FailedLogins == 0 || now.Sub(u.LastFailure) < StaleFailures || now.Before(u.LockedUntil) {
				return false
			}
			u.FailedLogins, u.LockedUntil, u.LastFailure = 0, time.Time{}, time.Time{}
			changed = true
			return true
		})
		if err != nil && !errors.Is(err, ErrNotFound) {
			errs = append(errs, fmt.Errorf("resetting the failed logins of %s: %w", u.Name, err))
		} else if changed {
			out.Failures++
		}
	}
	secs := s.Kube.CoreV1().Secrets(s.Namespace)
	list, err := secs.List(ctx, metav1.ListOptions{LabelSelector: LabelLogin})
	if err != nil {
		errs = append(errs, err)
	} else {
		for i := range list.Items {
			sec := &list.Items[i]
			if now.Before(secretExpires(sec).Add(time.Minute)) {
				continue
			}
			uid := sec.UID
			if err := secs.Delete(ctx, sec.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}); err == nil {
				out.Logins++
			} else if !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				errs = append(errs, fmt.Errorf("deleting expired login %s: %w", sec.Name, err))
			}
		}
	}
	n, err := s.SweepSessions(ctx)
	out.Sessions = n
	if err != nil {
		errs = append(errs, fmt.Errorf("deleting expired web sessions: %w", err))
	}
	return out, errors.Join(errs...)
}

package store

import (
	"context"
	"errors"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Web sessions are custom resources sessions.devtool.dev in the platform's namespace, one per
// signed-in browser, named after the session's id. The browser's cookie holds "dvs_<id>_<secret>";
// the resource holds the SHA-256 of the secret only, so reading the platform's objects never
// yields a usable cookie. Every request reads its session from the API server (not a cache), so a
// session ended on one replica is refused by every other at once, and any replica accepts a
// session another one made.

// SessionResource is the custom resource of web sessions.
var SessionResource = schema.GroupVersionResource{Group: Group, Version: Version, Resource: "sessions"}

// Session lifetimes.
const (
	SessionPrefix = "dvs_"
	// SessionLifetime is how long a session lasts at most after sign-in.
	SessionLifetime = 12 * time.Hour
	// SessionIdle ends a session not used for this long.
	SessionIdle = 2 * time.Hour
	// sessionSeenResolution: a session's last use is written at most this often.
	sessionSeenResolution = time.Minute
)

// Session is one signed-in browser.
type Session struct {
	ID       string
	User     string
	Hash     string
	Created  time.Time
	Expires  time.Time // absolute end
	LastSeen time.Time
	// ResourceVersion guards the update of LastSeen.
	ResourceVersion string
}

// ErrBadSession is any session cookie that does not authenticate: malformed, unknown, ended,
// expired, idle too long, or of a removed user.
var ErrBadSession = errors.New("no valid session")

func sessionFrom(u *unstructured.Unstructured) *Session {
	spec, _, _ := unstructured.NestedMap(u.Object, "spec")
	status, _, _ := unstructured.NestedMap(u.Object, "status")
	s := &Session{ID: u.GetName(), Created: u.GetCreationTimestamp().Time, ResourceVersion: u.GetResourceVersion()}
	s.User, _ = spec["user"].(string)
	s.Hash, _ = spec["hash"].(string)
	if v, ok := spec["expires"].(string); ok {
		s.Expires, _ = time.Parse(time.RFC3339, v)
	}
	if v, ok := status["lastSeen"].(string); ok {
		s.LastSeen, _ = time.Parse(time.RFC3339, v)
	}
	return s
}

func (s *Store) sessionObject(se *Session) *unstructured.Unstructured {
	obj := map[string]any{
		"apiVersion": Group + "/" + Version, "kind": "Session",
		"metadata": map[string]any{"name": se.ID, "namespace": s.Namespace, "labels": map[string]any{LabelOwner: se.User}},
		"spec": map[string]any{
			"user": se.User, "hash": se.Hash, "expires": se.Expires.UTC().Format(time.RFC3339),
		},
	}
	if !se.LastSeen.IsZero() {
		obj["status"] = map[string]any{"lastSeen": se.LastSeen.UTC().Format(time.RFC3339)}
	}
	out := &unstructured.Unstructured{Object: obj}
	if se.ResourceVersion != "" {
		out.SetResourceVersion(se.ResourceVersion)
	}
	return out
}

// CreateSession starts a session of user; the returned string (the cookie's value) is the only
// copy of its secret.
func (s *Store) CreateSession(ctx context.Context, user string) (*Session, string, error) {
	id, secret, cookie, err := newSecret(SessionPrefix)
	if err != nil {
		return nil, "", err
	}
	now := s.now().UTC().Truncate(time.Second)
	se := &Session{ID: id, User: user, Hash: HashSecret(secret), Created: now, Expires: now.Add(SessionLifetime), LastSeen: now}
	o, err := s.Dyn.Resource(SessionResource).Namespace(s.Namespace).Create(ctx, s.sessionObject(se), metav1.CreateOptions{})
	if err != nil {
		return nil, "", fromAPI(err, "session")
	}
	out := sessionFrom(o)
	if out.Created.IsZero() {
		out.Created = now
	}
	return out, cookie, nil
}

// SessionUser checks a session cookie and returns its user. It reads the session from the API
// server, compares the secret's hash in constant time, ends a session past its lifetime or idle
// too long (deleting it), and writes the last use at most once a minute.
func (s *Store) SessionUser(ctx context.Context, cookie string) (*User, *Session, error) {
	id, secret, ok := splitSecret(cookie, SessionPrefix)
	if !ok {
		return nil, nil, ErrBadSession
	}
	res := s.Dyn.Resource(SessionResource).Namespace(s.Namespace)
	o, err := res.Get(ctx, id, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil, ErrBadSession
	} else if err != nil {
		return nil, nil, err
	}
	se := sessionFrom(o)
	if !secretMatches(se.Hash, secret) {
		return nil, nil, ErrBadSession
	}
	now := s.now()
	seen := se.LastSeen
	if seen.IsZero() {
		seen = se.Created
	}
	if !now.Before(se.Expires) || now.Sub(seen) > SessionIdle {
		_ = s.deleteSession(ctx, se)
		return nil, nil, ErrBadSession
	}
	u, err := s.GetUserNow(ctx, se.User)
	if err != nil {
		return nil, nil, ErrBadSession
	}
	if now.Sub(se.LastSeen) >= sessionSeenResolution {
		se.LastSeen = now.UTC().Truncate(time.Second)
		if o, err := res.Update(ctx, s.sessionObject(se), metav1.UpdateOptions{}); err == nil {
			se = sessionFrom(o)
		}
	}
	return u, se, nil
}

func (s *Store) deleteSession(ctx context.Context, se *Session) error {
	err := s.Dyn.Resource(SessionResource).Namespace(s.Namespace).Delete(ctx, se.ID, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// EndSession deletes the session a cookie names (sign-out). A cookie that names no session is
// not an error: the browser is signed out either way.
func (s *Store) EndSession(ctx context.Context, cookie string) error {
	id, _, ok := splitSecret(cookie, SessionPrefix)
	if !ok {
		return nil
	}
	return s.deleteSession(ctx, &Session{ID: id})
}

// EndSessionsOf deletes every session of user (sign out everywhere).
func (s *Store) EndSessionsOf(ctx context.Context, user string) error {
	sel := metav1.ListOptions{LabelSelector: LabelOwner + "=" + user}
	return s.Dyn.Resource(SessionResource).Namespace(s.Namespace).DeleteCollection(ctx, metav1.DeleteOptions{}, sel)
}

// SweepSessions deletes sessions past their lifetime or idle too long and returns how many. Every
// replica may run it: a session another one deleted first is skipped.
func (s *Store) SweepSessions(ctx context.Context) (int, error) {
	l, err := s.Dyn.Resource(SessionResource).Namespace(s.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	now, n := s.now(), 0
	for i := range l.Items {
		se := sessionFrom(&l.Items[i])
		seen := se.LastSeen
		if seen.IsZero() {
			seen = se.Created
		}
		if now.Before(se.Expires) && now.Sub(seen) <= SessionIdle {
			continue
		}
		if err := s.deleteSession(ctx, se); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

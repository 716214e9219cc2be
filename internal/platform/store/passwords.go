package store

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"golang.org/x/crypto/argon2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
)

// Argon2id parameters: OWASP's minimum (19 MiB, 2 passes, 1 lane), stored with each hash as a PHC
// string, so raising them later keeps old hashes verifiable.
const (
	argonMemoryKiB = 19 * 1024
	argonTime      = 2
	argonThreads   = 1
	argonKeyLen    = 32
	argonSaltLen   = 16
)

// Password rules (OWASP: at least 8, allow long passphrases; the upper bound keeps a hash's input
// bounded).
const (
	MinPasswordLen   = 8
	MaxPasswordBytes = 1024
)

// Lockout: every LockEvery-th failed password login in a row locks the account for LockBase,
// doubling with each further lock up to LockMax. The counters live on the User resource, so a
// replica's restart or another replica changes nothing. StaleFailures: a count whose last failure is
// older is reset by the leader's sweep.
const (
	LockEvery     = 5
	LockBase      = 15 * time.Minute
	LockMax       = 24 * time.Hour
	StaleFailures = 24 * time.Hour
)

// Login errors. ErrBadLogin is every refusal of a user name and password (unknown user, no password
// set, wrong password, locked account): the caller learns nothing more. ErrBusy: too many password
// hashes waited for a slot (the server answers 429).
var (
	ErrBadLogin = errors.New("wrong user name or password")
	ErrBusy     = errors.New("too many logins are being checked: retry in a few seconds")
)

// LoginError is a refused login with the reason kept for the server's log (never for the caller:
// errors.Is(err, ErrBadLogin) holds for every one).
type LoginError struct {
	Reason string
	// LockedNow: this failure locked the account (worth an audit record; the failures before it
	// are counted on the User only).
	LockedNow bool
}

func (e *LoginError) Error() string        { return ErrBadLogin.Error() + " (" + e.Reason + ")" }
func (e *LoginError) Is(target error) bool { return target == ErrBadLogin }

// hashGate bounds the password hashes running at once in this process (each takes 19 MiB), so a
// login storm cannot exhaust memory; a hash that waits longer than the wait fails with ErrBusy.
type hashGate struct {
	mu    sync.Mutex
	slots chan struct{}
	wait  time.Duration
}

var gate = &hashGate{slots: make(chan struct{}, 4), wait: 10 * time.Second}

// SetHashLimits sets how many password hashes run at once in this process (at least 1) and how
// long one waits for a slot before ErrBusy. Call it before serving.
func SetHashLimits(n int, wait time.Duration) {
	gate.mu.Lock()
	defer gate.mu.Unlock()
	gate.slots = make(chan struct{}, max(1, n))
	if wait > 0 {
		gate.wait = wait
	}
}

func (g *hashGate) acquire(ctx context.Context) (release func(), err error) {
	g.mu.Lock()
	slots, wait := g.slots, g.wait
	g.mu.Unlock()
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case slots <- struct{}{}:
		return func() { <-slots }, nil
	case <-t.C:
		return nil, ErrBusy
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// ValidPassword says why password cannot be one ("" when it can).
func ValidPassword(password string) string {
	switch {
	case len(password) > MaxPasswordBytes:
		return fmt.Sprintf("at most %d bytes", MaxPasswordBytes)
	case !utf8.ValidString(password):
		return "not valid UTF-8"
	case utf8.RuneCountInString(password) < MinPasswordLen:
		return fmt.Sprintf("at least %d characters", MinPasswordLen)
	}
	return ""
}

// HashPassword returns the argon2id PHC string of password
// ($argon2id$v=19$m=19456,t=2,p=1$<salt>$<key>, base64 without padding).
func HashPassword(ctx context.Context, password string) (string, error) {
	release, err := gate.acquire(ctx)
	if err != nil {
		return "", err
	}
	defer release()
	salt := make([]byte, argonSaltLen)
	if _, err := rand.Read(salt); err != nil {
		return "", err
	}
	key := argon2.IDKey([]byte(password), salt, argonTime, argonMemoryKiB, argonThreads, argonKeyLen)
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, argonMemoryKiB, argonTime, argonThreads,
		base64.RawStdEncoding.EncodeToString(salt), base64.RawStdEncoding.EncodeToString(key)), nil
}

type phc struct {
	m, t   uint32
	p      uint8
	salt   []byte
	key    []byte
	broken bool
}

// parsePHC reads an argon2id PHC string; broken is set (and a dummy kept) for one it cannot read,
// so verifying it still costs a hash and then fails.
func parsePHC(s string) phc {
	dummy := phc{m: argonMemoryKiB, t: argonTime, p: argonThreads, salt: make([]byte, argonSaltLen), key: make([]byte, argonKeyLen), broken: true}
	parts := strings.Split(s, "$")
	if len(parts) != 6 || parts[0] != "" || parts[1] != "argon2id" || parts[2] != fmt.Sprintf("v=%d", argon2.Version) {
		return dummy
	}
	var out phc
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &out.m, &out.t, &out.p); err != nil {
		return dummy
	}
	// Parameters outside sane bounds would let a corrupted object cost unbounded memory or time.
	if out.m < 8*1024 || out.m > 256*1024 || out.t < 1 || out.t > 10 || out.p < 1 || out.p > 4 {
		return dummy
	}
	var err1, err2 error
	out.salt, err1 = base64.RawStdEncoding.DecodeString(parts[4])
	out.key, err2 = base64.RawStdEncoding.DecodeString(parts[5])
	if err1 != nil || err2 != nil || len(out.salt) < 8 || len(out.key) < 16 || len(out.key) > 64 {
		return dummy
	}
	return out
}

// VerifyPassword checks password against a PHC string in constant time (an unreadable or empty
// string costs the same hash and fails).
func VerifyPassword(ctx context.Context, encoded, password string) (bool, error) {
	h := parsePHC(encoded)
	release, err := gate.acquire(ctx)
	if err != nil {
		return false, err
	}
	defer release()
	got := argon2.IDKey([]byte(password), h.salt, h.t, h.m, h.p, uint32(len(h.key)))
	return subtle.ConstantTimeCompare(got, h.key) == 1 && !h.broken, nil
}

// lockFor is how long the failures-th failure in a row locks the account (0: not at all).
func lockFor(failures int) time.Duration {
	if failures <= 0 || failures%LockEvery != 0 {
		return 0
	}
	d := LockBase
	for i := 1; i < failures/LockEvery; i++ {
		d *= 2
		if d >= LockMax {
			return LockMax
		}
	}
	return min(d, LockMax)
}

// getUserLive reads a user from the API server (not the cache): a login must see the lockout
// another replica wrote a moment ago.
func (s *Store) getUserLive(ctx context.Context, name string) (*User, error) {
	o, err := s.Dyn.Resource(UserResource).Namespace(s.Namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, notFound("user %q", name)
	} else if err != nil {
		return nil, err
	}
	return userFrom(o), nil
}

// updateUser reads the user, lets change modify it and writes it back guarded by its
// resourceVersion, again on a conflict. change returning false writes nothing.
func (s *Store) updateUser(ctx context.Context, name string, change func(*User) bool) (*User, error) {
	var out *User
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		u, err := s.getUserLive(ctx, name)
		if err != nil {
			return err
		}
		if !change(u) {
			out = u
			return nil
		}
		o, err := s.Dyn.Resource(UserResource).Namespace(s.Namespace).Update(ctx, s.userObject(u), metav1.UpdateOptions{})
		if err != nil {
			return err
		}
		out = userFrom(o)
		return nil
	})
	if err != nil && !errors.Is(err, ErrNotFound) {
		return nil, fromAPI(err, "user "+name)
	}
	return out, err
}

// CheckPassword checks a user name and password: the web UI's sign-in, POST /api/v1/login and the
// browser login's form call it. It returns the user, or an error for which errors.Is(err,
// ErrBadLogin) holds (whatever the reason: unknown user, no password, wrong password, locked),
// ErrBusy when no hash slot came free in time, or another error when the Kubernetes API failed. A
// wrong password counts on the User resource (resourceVersion-guarded, retried on conflict); every
// LockEvery-th failure in a row locks the account (LockBase doubling to LockMax), for every replica.
// A right password resets the count.
func (s *Store) CheckPassword(ctx context.Context, name, password string) (*User, error) {
	if len(password) > MaxPasswordBytes || ValidUserName(name) != "" {
		return nil, &LoginError{Reason: "malformed user name or password"}
	}
	u, err := s.getUserLive(ctx, name)
	if errors.Is(err, ErrNotFound) || err == nil && u.PasswordHash == "" {
		// The same hash is paid, so the answer's timing does not tell whether the account exists.
		if _, err := VerifyPassword(ctx, "", password); err != nil {
			return nil, err
		}
		if u == nil {
			return nil, &LoginError{Reason: "no such user"}
		}
		return nil, &LoginError{Reason: "password login is off for this user"}
	} else if err != nil {
		return nil, err
	}
	now := s.now()
	if now.Before(u.LockedUntil) {
		// Not counted and not hashed: a locked account costs an attacker's requests nothing here.
		return nil, &LoginError{Reason: "account locked until " + u.LockedUntil.UTC().Format(time.RFC3339)}
	}
	ok, err := VerifyPassword(ctx, u.PasswordHash, password)
	if err != nil {
		return nil, err
	}
	if !ok {
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		locked := time.Time{}
		_, err := s.updateUser(wctx, name, func(u *User) bool {
			u.FailedLogins++
			u.LastFailure = now.UTC().Truncate(time.Second)
			if d := lockFor(u.FailedLogins); d > 0 {
				u.LockedUntil = now.Add(d).UTC().Truncate(time.Second)
				locked = u.LockedUntil
			}
			return true
		})
		if err != nil && !errors.Is(err, ErrNotFound) {
			return nil, fmt.Errorf("recording a failed login of %s: %w", name, err)
		}
		if !locked.IsZero() {
			return nil, &LoginError{Reason: "wrong password; account locked until " + locked.Format(time.RFC3339), LockedNow: true}
		}
		return nil, &LoginError{Reason: "wrong password"}
	}
	if u.FailedLogins > 0 || !u.LockedUntil.IsZero() {
		if u, err = s.updateUser(ctx, name, func(u *User) bool {
			if u.FailedLogins == 0 && u.LockedUntil.IsZero() {
				return false
			}
			u.FailedLogins, u.LockedUntil, u.LastFailure = 0, time.Time{}, time.Time{}
			return true
		}); err != nil {
			return nil, fmt.Errorf("resetting the failed logins of %s: %w", name, err)
		}
	}
	return u, nil
}

// SetPassword sets (or, with "", removes) user's password and clears its lockout.
func (s *Store) SetPassword(ctx context.Context, name, password string) error {
	h := ""
	if password != "" {
		if why := ValidPassword(password); why != "" {
			return &InputError{Field: "password", Reason: why}
		}
		var err error
		if h, err = HashPassword(ctx, password); err != nil {
			return err
		}
	}
	_, err := s.updateUser(ctx, name, func(u *User) bool {
		u.PasswordHash = h
		u.FailedLogins, u.LockedUntil, u.LastFailure = 0, time.Time{}, time.Time{}
		return true
	})
	return err
}

// Unlock clears user's failed logins and lockout.
func (s *Store) Unlock(ctx context.Context, name string) error {
	_, err := s.updateUser(ctx, name, func(u *User) bool {
		if u.FailedLogins == 0 && u.LockedUntil.IsZero() && u.LastFailure.IsZero() {
			return false
		}
		u.FailedLogins, u.LockedUntil, u.LastFailure = 0, time.Time{}, time.Time{}
		return true
	})
	return err
}

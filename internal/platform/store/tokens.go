package store

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"sort"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/devtool/devtool/internal/platform/api"
)

// Token lifetimes.
const (
	DefaultTokenLifetime = 90 * 24 * time.Hour
	MaxTokenLifetime     = 365 * 24 * time.Hour
	// LastUsedResolution: a token's last use is written at most this often.
	LastUsedResolution = time.Minute
)

// ErrBadToken is any token that does not authenticate: malformed, unknown, revoked, expired, or of
// a removed user. The caller gets 401 and never learns which.
var ErrBadToken = errors.New("invalid or expired token")

// ParseToken splits "dvt_<id>_<secret>" (id: 16 lowercase hex; secret: 43 base64url characters).
func ParseToken(tok string) (id, secret string, ok bool) {
	return splitSecret(tok, api.TokenPrefix)
}

// splitSecret splits "<prefix><id>_<secret>", the shape of tokens and session cookies (id: 16
// lowercase hex; secret: 43 base64url characters).
func splitSecret(s, prefix string) (id, secret string, ok bool) {
	rest, found := strings.CutPrefix(s, prefix)
	if !found || len(rest) != 16+1+43 || rest[16] != '_' {
		return "", "", false
	}
	id, secret = rest[:16], rest[17:]
	for _, c := range id {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return "", "", false
		}
	}
	if _, err := base64.RawURLEncoding.DecodeString(secret); err != nil {
		return "", "", false
	}
	return id, secret, true
}

// HashSecret is what is stored for a token's secret.
func HashSecret(secret string) string {
	h := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(h[:])
}

// secretMatches compares secret with a stored HashSecret in constant time.
func secretMatches(hash, secret string) bool {
	want, err := hex.DecodeString(hash)
	got := sha256.Sum256([]byte(secret))
	return err == nil && subtle.ConstantTimeCompare(want, got[:]) == 1
}

// newSecret makes a random id and secret and the string "<prefix><id>_<secret>" that splitSecret
// splits.
func newSecret(prefix string) (id, secret, value string, err error) {
	var idb [8]byte
	var sb [32]byte
	if _, err := rand.Read(idb[:]); err != nil {
		return "", "", "", err
	}
	if _, err := rand.Read(sb[:]); err != nil {
		return "", "", "", err
	}
	id = hex.EncodeToString(idb[:])
	secret = base64.RawURLEncoding.EncodeToString(sb[:])
	return id, secret, prefix + id + "_" + secret, nil
}

// CreateToken makes a new API token of owner; the returned string is the only copy of its secret.
// lifetime 0 means DefaultTokenLifetime.
func (s *Store) CreateToken(ctx context.Context, owner, name string, lifetime time.Duration) (*AccessToken, string, error) {
	if lifetime == 0 {
		lifetime = DefaultTokenLifetime
	}
	if lifetime < 0 || lifetime > MaxTokenLifetime {
		return nil, "", &InputError{Field: "expiresInSeconds", Reason: "between 1 and 31536000 (one year)"}
	}
	if len(name) > 100 {
		return nil, "", &InputError{Field: "name", Reason: "at most 100 characters"}
	}
	id, secret, tok, err := newSecret(api.TokenPrefix)
	if err != nil {
		return nil, "", err
	}
	now := s.now().UTC().Truncate(time.Second)
	t := &AccessToken{ID: id, Name: name, Owner: owner, Hash: HashSecret(secret), Created: now, Expires: now.Add(lifetime)}
	o, err := s.Dyn.Resource(TokenResource).Namespace(s.Namespace).Create(ctx, s.tokenObject(t), metav1.CreateOptions{})
	if err != nil {
		return nil, "", fromAPI(err, "token")
	}
	out := tokenFrom(o)
	if out.Created.IsZero() { // the API server sets it; fakes do not
		out.Created = now
	}
	return out, tok, nil
}

// Authenticate checks a bearer token and returns its user and token. The token is read from the API
// server, not the cache, so a token revoked on another replica fails here at once; the secret's
// hash is compared in constant time. The last use is written at most once a LastUsedResolution.
func (s *Store) Authenticate(ctx context.Context, bearer string) (*User, *AccessToken, error) {
	id, secret, ok := ParseToken(bearer)
	if !ok {
		return nil, nil, ErrBadToken
	}
	o, err := s.Dyn.Resource(TokenResource).Namespace(s.Namespace).Get(ctx, id, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil, ErrBadToken
	} else if err != nil {
		return nil, nil, err
	}
	t := tokenFrom(o)
	if !secretMatches(t.Hash, secret) {
		return nil, nil, ErrBadToken
	}
	now := s.now()
	if !now.Before(t.Expires) {
		return nil, nil, ErrBadToken
	}
	u, err := s.GetUserNow(ctx, t.Owner)
	if err != nil {
		return nil, nil, ErrBadToken
	}
	if now.Sub(t.LastUsed) >= LastUsedResolution {
		// Best effort: a conflict means another request wrote it just now.
		t.LastUsed = now.UTC().Truncate(time.Second)
		if o, err := s.Dyn.Resource(TokenResource).Namespace(s.Namespace).Update(ctx, s.tokenObject(t), metav1.UpdateOptions{}); err == nil {
			t = tokenFrom(o)
		}
	}
	return u, t, nil
}

// Tokens lists owner's tokens, newest first.
func (s *Store) Tokens(owner string) ([]*AccessToken, error) {
	objs, err := s.tokens.ByNamespace(s.Namespace).List(labels.SelectorFromSet(labels.Set{LabelOwner: owner}))
	if err != nil {
		return nil, err
	}
	out := make([]*AccessToken, 0, len(objs))
	for _, o := range objs {
		if t := tokenFrom(o.(*unstructured.Unstructured)); t.Owner == owner {
			out = append(out, t)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].Created.Equal(out[j].Created) {
			return out[i].Created.After(out[j].Created)
		}
		return out[i].ID < out[j].ID
	})
	return out, nil
}

// DeleteToken revokes owner's token id (ErrNotFound when owner has no such token). The check reads
// the API server, so another user's token id is "not found" even right after it was made.
func (s *Store) DeleteToken(ctx context.Context, owner, id string) error {
	res := s.Dyn.Resource(TokenResource).Namespace(s.Namespace)
	o, err := res.Get(ctx, id, metav1.GetOptions{})
	if apierrors.IsNotFound(err) || err == nil && tokenFrom(o).Owner != owner {
		return notFound("token %q", id)
	} else if err != nil {
		return err
	}
	uid := o.GetUID()
	err = res.Delete(ctx, id, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if apierrors.IsNotFound(err) {
		return notFound("token %q", id)
	}
	return err
}

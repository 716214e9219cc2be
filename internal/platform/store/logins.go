package store

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A login the CLI started in a browser (authorization code with PKCE) or on another device (device
// authorization, RFC 8628) is kept in a Secret of the platform's namespace until it is used or
// expires, so a login started on one replica finishes on any other. The Secret is named after a
// hash of the code, never the code itself; redeeming deletes it with a UID precondition, so a code
// works once even when two replicas race.
const (
	LabelLogin       = "devtool.dev/login"     // "code" or "device" on a login's Secret
	LabelUserCode    = "devtool.dev/user-code" // on a device login: hash of its user code
	loginPrefix      = "devtool-login-"
	SigningKeySecret = "devtool-platform-signing"
)

// Device login states.
const (
	DevicePending  = "pending"
	DeviceApproved = "approved"
	DeviceDenied   = "denied"
)

// userCodeAlphabet has no vowels (no words) and no look-alikes, as RFC 8628 §6.1 suggests.
const userCodeAlphabet = "BCDFGHJKLMNPQRSTVWXZ"

// AuthCode is an authorization code's record: who signed in, and the PKCE challenge and redirect
// address the code is bound to.
type AuthCode struct {
	User, Challenge, RedirectURI string
	Expires                      time.Time
}

// ValidPKCE says whether s has the form of a PKCE code verifier or S256 challenge (RFC 7636 §4.1:
// 43 to 128 characters of A-Z a-z 0-9 - . _ ~).
func ValidPKCE(s string) bool {
	if len(s) < 43 || len(s) > 128 {
		return false
	}
	for _, r := range s {
		if !(r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || strings.ContainsRune("-._~", r)) {
			return false
		}
	}
	return true
}

// Matches says whether a token request's verifier and redirect address are those the code was
// made for: BASE64URL(SHA-256(verifier)) is the challenge (compared in constant time).
func (c *AuthCode) Matches(verifier, redirectURI string) bool {
	if redirectURI != c.RedirectURI || !ValidPKCE(verifier) {
		return false
	}
	sum := sha256.Sum256([]byte(verifier))
	want := base64.RawURLEncoding.EncodeToString(sum[:])
	return subtle.ConstantTimeCompare([]byte(want), []byte(c.Challenge)) == 1
}

// DeviceLogin is a device authorization request.
type DeviceLogin struct {
	UserCode string
	Status   string // DevicePending, DeviceApproved, DeviceDenied
	User     string // who approved or denied it
	Client   string // what the CLI said about itself (host name), shown on the approval page
	Expires  time.Time
}

func hashName(kind, secret string) string {
	h := sha256.Sum256([]byte(kind + "\x00" + secret))
	return hex.EncodeToString(h[:20])
}

func randomString(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

func (s *Store) loginSecret(name, kind string, lbl map[string]string, data map[string]string, expires time.Time) *corev1.Secret {
	l := map[string]string{LabelLogin: kind, LabelManaged: "true"}
	for k, v := range lbl {
		l[k] = v
	}
	d := map[string][]byte{"expires": []byte(expires.UTC().Format(time.RFC3339))}
	for k, v := range data {
		d[k] = []byte(v)
	}
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.Namespace, Labels: l}, Type: corev1.SecretTypeOpaque, Data: d}
}

func secretExpires(sec *corev1.Secret) time.Time {
	t, _ := time.Parse(time.RFC3339, string(sec.Data["expires"]))
	return t
}

// CreateAuthCode stores c and returns the code (256 random bits) to send to the redirect address.
func (s *Store) CreateAuthCode(ctx context.Context, c AuthCode) (string, error) {
	code, err := randomString(32)
	if err != nil {
		return "", err
	}
	sec := s.loginSecret(loginPrefix+hashName("code", code), "code", nil,
		map[string]string{"user": c.User, "challenge": c.Challenge, "redirectURI": c.RedirectURI}, c.Expires)
	if _, err := s.Kube.CoreV1().Secrets(s.Namespace).Create(ctx, sec, metav1.CreateOptions{}); err != nil {
		return "", fmt.Errorf("storing the authorization code: %w", err)
	}
	return code, nil
}

// RedeemAuthCode returns the record of code and deletes it: a code works once, on any replica.
// An unknown, used or expired code is ErrNotFound.
func (s *Store) RedeemAuthCode(ctx context.Context, code string) (*AuthCode, error) {
	if code == "" || len(code) > 200 {
		return nil, notFound("authorization code")
	}
	sec, err := s.takeSecret(ctx, loginPrefix+hashName("code", code), "code")
	if err != nil {
		return nil, err
	}
	c := &AuthCode{User: string(sec.Data["user"]), Challenge: string(sec.Data["challenge"]),
		RedirectURI: string(sec.Data["redirectURI"]), Expires: secretExpires(sec)}
	if !s.now().Before(c.Expires) {
		return nil, notFound("authorization code (expired)")
	}
	return c, nil
}

// takeSecret reads a login Secret and deletes it (UID precondition): only one caller gets it.
func (s *Store) takeSecret(ctx context.Context, name, kind string) (*corev1.Secret, error) {
	secs := s.Kube.CoreV1().Secrets(s.Namespace)
	sec, err := secs.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) || err == nil && sec.Labels[LabelLogin] != kind {
		return nil, notFound("login")
	} else if err != nil {
		return nil, err
	}
	uid := sec.UID
	if err := secs.Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}); apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil, notFound("login")
	} else if err != nil {
		return nil, err
	}
	return sec, nil
}

// NormalizeUserCode upper-cases a user code and drops what is not of its alphabet (dashes, spaces).
func NormalizeUserCode(c string) string {
	var b strings.Builder
	for _, r := range strings.ToUpper(c) {
		if strings.ContainsRune(userCodeAlphabet, r) {
			b.WriteRune(r)
		}
	}
	return b.String()
}

func newUserCode() (string, error) {
	out := make([]byte, 0, 9)
	b := make([]byte, 1)
	for len(out) < 9 {
		if len(out) == 4 {
			out = append(out, '-')
			continue
		}
		if _, err := rand.Read(b); err != nil {
			return "", err
		}
		if int(b[0]) >= 256/len(userCodeAlphabet)*len(userCodeAlphabet) {
			continue // rejection sampling: every letter equally likely
		}
		out = append(out, userCodeAlphabet[int(b[0])%len(userCodeAlphabet)])
	}
	return string(out), nil
}

// CreateDeviceLogin starts a device login: it returns the device code (for the CLI's polls, 256
// random bits) and the user code (XXXX-XXXX, for the person).
func (s *Store) CreateDeviceLogin(ctx context.Context, client string, lifetime time.Duration) (deviceCode, userCode string, err error) {
	if deviceCode, err = randomString(32); err != nil {
		return "", "", err
	}
	if userCode, err = newUserCode(); err != nil {
		return "", "", err
	}
	if len(client) > 100 {
		client = client[:100]
	}
	sec := s.loginSecret(loginPrefix+hashName("device", deviceCode), "device",
		map[string]string{LabelUserCode: hashName("user", NormalizeUserCode(userCode))},
		map[string]string{"userCode": userCode, "status": DevicePending, "client": client}, s.now().Add(lifetime))
	if _, err := s.Kube.CoreV1().Secrets(s.Namespace).Create(ctx, sec, metav1.CreateOptions{}); err != nil {
		return "", "", fmt.Errorf("storing the device login: %w", err)
	}
	return deviceCode, userCode, nil
}

func deviceFrom(sec *corev1.Secret) *DeviceLogin {
	return &DeviceLogin{UserCode: string(sec.Data["userCode"]), Status: string(sec.Data["status"]), User: string(sec.Data["user"]),
		Client: string(sec.Data["client"]), Expires: secretExpires(sec)}
}

func (s *Store) deviceByUserCode(ctx context.Context, userCode string) (*corev1.Secret, error) {
	n := NormalizeUserCode(userCode)
	if len(n) != 8 {
		return nil, notFound("code")
	}
	list, err := s.Kube.CoreV1().Secrets(s.Namespace).List(ctx, metav1.ListOptions{
		LabelSelector: LabelLogin + "=device," + LabelUserCode + "=" + hashName("user", n)})
	if err != nil {
		return nil, err
	}
	for i := range list.Items {
		sec := &list.Items[i]
		if NormalizeUserCode(string(sec.Data["userCode"])) == n && s.now().Before(secretExpires(sec)) {
			return sec, nil
		}
	}
	return nil, notFound("code")
}

// FindDeviceLogin reads the pending device login of a user code (ErrNotFound when there is none
// or it expired).
func (s *Store) FindDeviceLogin(ctx context.Context, userCode string) (*DeviceLogin, error) {
	sec, err := s.deviceByUserCode(ctx, userCode)
	if err != nil {
		return nil, err
	}
	return deviceFrom(sec), nil
}

// DecideDeviceLogin approves (or denies) the device login of userCode as user. Only a pending
// login changes (resourceVersion-guarded: of two decisions, the first wins).
func (s *Store) DecideDeviceLogin(ctx context.Context, userCode, user string, approve bool) error {
	sec, err := s.deviceByUserCode(ctx, userCode)
	if err != nil {
		return err
	}
	if string(sec.Data["status"]) != DevicePending {
		return conflict("this code was used already")
	}
	sec.Data["status"] = []byte(DeviceDenied)
	if approve {
		sec.Data["status"] = []byte(DeviceApproved)
	}
	sec.Data["user"] = []byte(user)
	if _, err := s.Kube.CoreV1().Secrets(s.Namespace).Update(ctx, sec, metav1.UpdateOptions{}); apierrors.IsConflict(err) {
		return conflict("this code was used already")
	} else if err != nil {
		return err
	}
	return nil
}

// PollDeviceLogin answers the CLI's poll with deviceCode: the login while pending; once approved
// or denied the record is taken (deleted) and returned, so its token is made once.
func (s *Store) PollDeviceLogin(ctx context.Context, deviceCode string) (*DeviceLogin, error) {
	if deviceCode == "" || len(deviceCode) > 200 {
		return nil, notFound("device code")
	}
	name := loginPrefix + hashName("device", deviceCode)
	sec, err := s.Kube.CoreV1().Secrets(s.Namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) || err == nil && sec.Labels[LabelLogin] != "device" {
		return nil, notFound("device code")
	} else if err != nil {
		return nil, err
	}
	d := deviceFrom(sec)
	if !s.now().Before(d.Expires) {
		return d, nil
	}
	if d.Status == DevicePending {
		return d, nil
	}
	sec, err = s.takeSecret(ctx, name, "device")
	if err != nil {
		return nil, err
	}
	return deviceFrom(sec), nil
}

// signing holds the key that signs values the platform hands out and takes back (an OpenID
// Connect login's state), shared by every replica through a Secret.
type signing struct {
	mu  sync.Mutex
	key []byte
}

// SigningKey returns the platform's HMAC key (32 random bytes), made on first use.
func (s *Store) SigningKey(ctx context.Context) ([]byte, error) {
	s.sign.mu.Lock()
	defer s.sign.mu.Unlock()
	if s.sign.key != nil {
		return s.sign.key, nil
	}
	secs := s.Kube.CoreV1().Secrets(s.Namespace)
	sec, err := secs.Get(ctx, SigningKeySecret, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		key := make([]byte, 32)
		if _, err := rand.Read(key); err != nil {
			return nil, err
		}
		sec = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: SigningKeySecret, Namespace: s.Namespace, Labels: map[string]string{LabelManaged: "true"}},
			Data: map[string][]byte{"key": key}}
		if _, err = secs.Create(ctx, sec, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
			sec, err = secs.Get(ctx, SigningKeySecret, metav1.GetOptions{})
		}
	}
	if err != nil {
		return nil, fmt.Errorf("reading the platform's signing key (Secret %s/%s): %w", s.Namespace, SigningKeySecret, err)
	}
	if len(sec.Data["key"]) < 32 {
		return nil, fmt.Errorf("the platform's signing key (Secret %s/%s) is shorter than 32 bytes", s.Namespace, SigningKeySecret)
	}
	s.sign.key = sec.Data["key"]
	return s.sign.key, nil
}

// Sign returns value with an HMAC-SHA256 of it and an expiry: "<base64 value>.<unix expiry>.<mac>".
func (s *Store) Sign(ctx context.Context, purpose string, value []byte, expires time.Time) (string, error) {
	key, err := s.SigningKey(ctx)
	if err != nil {
		return "", err
	}
	body := base64.RawURLEncoding.EncodeToString(value) + "." + fmt.Sprint(expires.Unix())
	return body + "." + mac(key, purpose, body), nil
}

// ErrBadSignature is a signed value that is malformed, forged, of another purpose or expired.
var ErrBadSignature = errors.New("invalid or expired signed value")

// Verify checks a value made by Sign for the same purpose and returns it.
func (s *Store) Verify(ctx context.Context, purpose, signed string) ([]byte, error) {
	key, err := s.SigningKey(ctx)
	if err != nil {
		return nil, err
	}
	i := strings.LastIndexByte(signed, '.')
	if i < 0 || len(signed) > 8192 {
		return nil, ErrBadSignature
	}
	body, sum := signed[:i], signed[i+1:]
	if !hmac.Equal([]byte(sum), []byte(mac(key, purpose, body))) {
		return nil, ErrBadSignature
	}
	v, exp, ok := strings.Cut(body, ".")
	var unix int64
	if _, err := fmt.Sscan(exp, &unix); !ok || err != nil || !s.now().Before(time.Unix(unix, 0)) {
		return nil, ErrBadSignature
	}
	out, err := base64.RawURLEncoding.DecodeString(v)
	if err != nil {
		return nil, ErrBadSignature
	}
	return out, nil
}

func mac(key []byte, purpose, body string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(purpose + "\x00" + body))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

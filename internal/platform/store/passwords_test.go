package store

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestLockFor(t *testing.T) {
	for n, want := range map[int]time.Duration{0: 0, 1: 0, 4: 0, 5: 15 * time.Minute, 6: 0, 10: 30 * time.Minute,
		15: time.Hour, 30: 8 * time.Hour, 35: 16 * time.Hour, 40: 24 * time.Hour, 500: 24 * time.Hour} {
		if got := lockFor(n); got != want {
			t.Errorf("lockFor(%d) = %s, want %s", n, got, want)
		}
	}
}

func TestPasswordHash(t *testing.T) {
	ctx := context.Background()
	h, err := HashPassword(ctx, "correct horse")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(h, "$argon2id$v=19$m=19456,t=2,p=1$") {
		t.Fatalf("PHC string %q", h)
	}
	h2, _ := HashPassword(ctx, "correct horse")
	if h == h2 {
		t.Fatal("two hashes of one password are equal: no salt")
	}
	for pw, want := range map[string]bool{"correct horse": true, "correct hors": false, "": false} {
		if ok, err := VerifyPassword(ctx, h, pw); err != nil || ok != want {
			t.Errorf("VerifyPassword(%q) = %v %v, want %v", pw, ok, err, want)
		}
	}
	// Broken or hostile PHC strings fail (after the same hash), never panic or cost more.
	for _, bad := range []string{"", "$argon2id$v=19$m=19456,t=2,p=1$", "$argon2i$v=19$m=19456,t=2,p=1$AAAAAAAAAAA$AAAAAAAAAAAAAAAAAAAAAA",
		"$argon2id$v=19$m=99999999,t=2,p=1$AAAAAAAAAAA$AAAAAAAAAAAAAAAAAAAAAA", "$argon2id$v=19$m=19456,t=2,p=1$!!$AAAA"} {
		if ok, err := VerifyPassword(ctx, bad, "x"); ok || err != nil {
			t.Errorf("VerifyPassword(%q) = %v %v", bad, ok, err)
		}
	}
}

func TestHashGateBusy(t *testing.T) {
	defer SetHashLimits(4, 10*time.Second)
	SetHashLimits(1, 50*time.Millisecond)
	release, err := gate.acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := VerifyPassword(context.Background(), "", "x"); !errors.Is(err, ErrBusy) {
		t.Fatalf("with the one slot taken: %v, want ErrBusy", err)
	}
	if time.Since(start) < 50*time.Millisecond {
		t.Fatal("ErrBusy before the wait was over")
	}
	release()
	if _, err := VerifyPassword(context.Background(), "", "x"); err != nil {
		t.Fatalf("after release: %v", err)
	}
}

func TestSweep(t *testing.T) {
	st, clock := fakeStore(t)
	ctx := context.Background()
	if _, _, err := st.CreateUser(ctx, "alice", false, "correct horse"); err != nil {
		t.Fatal(err)
	}
	old, _, err := st.CreateToken(ctx, "alice", "old", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := st.CheckPassword(ctx, "alice", "wrong horse"); !errors.Is(err, ErrBadLogin) {
			t.Fatal(err)
		}
	}
	if _, err := st.CreateAuthCode(ctx, AuthCode{User: "alice", Expires: clock.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.CreateSession(ctx, "alice"); err != nil {
		t.Fatal(err)
	}
	// Nothing is due yet.
	if n, err := st.Sweep(ctx); err != nil || n != (Swept{}) {
		t.Fatalf("early sweep: %+v %v", n, err)
	}
	*clock = clock.Add(ExpiredTokenGrace + 2*time.Hour)
	var n Swept
	deadline := time.Now().Add(5 * time.Second)
	for n.Tokens == 0 && time.Now().Before(deadline) { // the token informer is fed asynchronously
		m, err := st.Sweep(ctx)
		if err != nil {
			t.Fatal(err)
		}
		n.Tokens, n.Failures, n.Logins, n.Sessions = n.Tokens+m.Tokens, n.Failures+m.Failures, n.Logins+m.Logins, n.Sessions+m.Sessions
		time.Sleep(20 * time.Millisecond)
	}
	if n.Tokens < 1 || n.Failures != 1 || n.Logins != 1 || n.Sessions != 1 {
		t.Fatalf("sweep: %+v", n)
	}
	if _, err := st.Dyn.Resource(TokenResource).Namespace(st.Namespace).Get(ctx, old.ID, metav1.GetOptions{}); err == nil {
		t.Fatal("swept token still there")
	}
	u, _ := st.getUserLive(ctx, "alice")
	if u.FailedLogins != 0 || !u.LastFailure.IsZero() {
		t.Fatalf("failures not reset: %+v", u)
	}
	list, _ := st.Kube.CoreV1().Secrets(st.Namespace).List(ctx, metav1.ListOptions{LabelSelector: LabelLogin})
	if len(list.Items) != 0 {
		t.Fatalf("login records left: %d", len(list.Items))
	}
}

func TestSignedValues(t *testing.T) {
	st, clock := fakeStore(t)
	ctx := context.Background()
	v, err := st.Sign(ctx, "p", []byte("hello"), clock.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := st.Verify(ctx, "p", v); err != nil || string(got) != "hello" {
		t.Fatalf("Verify: %q %v", got, err)
	}
	for what, bad := range map[string]string{"other purpose": "", "forged": v[:len(v)-2] + "AA", "empty": "", "no dot": "abc"} {
		purpose := "p"
		if what == "other purpose" {
			purpose, bad = "q", v
		}
		if _, err := st.Verify(ctx, purpose, bad); !errors.Is(err, ErrBadSignature) {
			t.Errorf("%s: %v", what, err)
		}
	}
	*clock = clock.Add(2 * time.Minute)
	if _, err := st.Verify(ctx, "p", v); !errors.Is(err, ErrBadSignature) {
		t.Errorf("expired: %v", err)
	}
	// A second store (another replica) shares the key through the Secret.
	other := &Store{Namespace: st.Namespace, Kube: st.Kube, Now: st.Now}
	*clock = clock.Add(-2 * time.Minute)
	if got, err := other.Verify(ctx, "p", v); err != nil || string(got) != "hello" {
		t.Fatalf("other replica: %q %v", got, err)
	}
	var sec *corev1.Secret
	if sec, err = st.Kube.CoreV1().Secrets(st.Namespace).Get(ctx, SigningKeySecret, metav1.GetOptions{}); err != nil || len(sec.Data["key"]) != 32 {
		t.Fatalf("signing key Secret: %v", err)
	}
}

func TestUserCodes(t *testing.T) {
	seen := map[string]bool{}
	for range 200 {
		c, err := newUserCode()
		if err != nil || len(c) != 9 || c[4] != '-' || NormalizeUserCode(c) != strings.ReplaceAll(c, "-", "") {
			t.Fatalf("user code %q %v", c, err)
		}
		seen[c] = true
	}
	if len(seen) < 199 {
		t.Fatalf("%d distinct codes of 200", len(seen))
	}
	if NormalizeUserCode(" bcdf-ghjk ") != "BCDFGHJK" {
		t.Fatal("NormalizeUserCode")
	}
}

package store

import (
	"context"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kfake "k8s.io/client-go/kubernetes/fake"

	"github.com/devtool/devtool/internal/kubefake"
	"github.com/devtool/devtool/internal/platform/api"
)

func fakeStore(t *testing.T, objs ...runtime.Object) (*Store, *time.Time) {
	t.Helper()
	dc := kubefake.Dynamic(map[schema.GroupVersionResource]string{
		UserResource: "UserList", TokenResource: "AccessTokenList", SessionResource: "SessionList",
	})
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	st := &Store{Namespace: DefaultNamespace, Limits: DefaultLimits, Kube: kfake.NewClientset(objs...), Dyn: dc, Now: func() time.Time { return now }}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := st.Start(ctx); err != nil {
		t.Fatal(err)
	}
	return st, &now
}

// TestSessions: a session's cookie works until sign-out, expiry or idleness; only the hash is
// stored; a cookie of another shape, a wrong secret or a removed user does not authenticate.
func TestSessions(t *testing.T) {
	st, now := fakeStore(t)
	ctx := context.Background()
	if _, _, err := st.CreateUser(ctx, "alice", false, ""); err != nil {
		t.Fatal(err)
	}
	wait := func() {
		for i := 0; i < 500; i++ {
			if _, err := st.GetUser("alice"); err == nil {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Fatal("alice never reached the cache")
	}
	wait()
	se, cookie, err := st.CreateSession(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(cookie, SessionPrefix) || strings.Contains(se.Hash, cookie[len(SessionPrefix)+17:]) {
		t.Fatalf("cookie %q, stored hash %q", cookie, se.Hash)
	}
	o, _ := st.Dyn.Resource(SessionResource).Namespace(st.Namespace).Get(ctx, se.ID, metav1.GetOptions{})
	if b, _ := o.MarshalJSON(); strings.Contains(string(b), cookie[len(SessionPrefix)+17:]) {
		t.Fatalf("the session resource holds the cookie's secret: %s", b)
	}
	if u, _, err := st.SessionUser(ctx, cookie); err != nil || u.Name != "alice" {
		t.Fatalf("SessionUser: %v %v", u, err)
	}
	other := "A" // another last character: a wrong secret of the right shape
	if strings.HasSuffix(cookie, "A") {
		other = "B"
	}
	for _, bad := range []string{"", "dvs_", cookie[:len(cookie)-1] + other, "dvt_" + cookie[4:], cookie + "x"} {
		if _, _, err := st.SessionUser(ctx, bad); err != ErrBadSession {
			t.Errorf("SessionUser(%q): %v, want ErrBadSession", bad, err)
		}
	}
	// Idle for longer than SessionIdle: ended (and deleted).
	*now = now.Add(SessionIdle + time.Minute)
	if _, _, err := st.SessionUser(ctx, cookie); err != ErrBadSession {
		t.Errorf("an idle session: %v", err)
	}
	// Used within the idle time, it lasts until its lifetime.
	_, cookie, _ = st.CreateSession(ctx, "alice")
	for passed := time.Duration(0); passed < SessionLifetime-time.Hour; passed += time.Hour {
		*now = now.Add(time.Hour)
		if _, _, err := st.SessionUser(ctx, cookie); err != nil {
			t.Fatalf("a session in use after %s: %v", passed+time.Hour, err)
		}
	}
	*now = now.Add(2 * time.Hour)
	if _, _, err := st.SessionUser(ctx, cookie); err != ErrBadSession {
		t.Errorf("a session past its lifetime: %v", err)
	}
	// Sign-out.
	_, cookie, _ = st.CreateSession(ctx, "alice")
	if err := st.EndSession(ctx, cookie); err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.SessionUser(ctx, cookie); err != ErrBadSession {
		t.Errorf("a signed-out session: %v", err)
	}
	// Expired ones are swept.
	_, _, _ = st.CreateSession(ctx, "alice")
	_, live, _ := st.CreateSession(ctx, "alice")
	*now = now.Add(SessionIdle + time.Minute)
	_, _, _ = st.SessionUser(ctx, live) // too late for it as well
	_, live, _ = st.CreateSession(ctx, "alice")
	if n, err := st.SweepSessions(ctx); err != nil || n < 1 {
		t.Errorf("SweepSessions: %d %v", n, err)
	}
	if _, _, err := st.SessionUser(ctx, live); err != nil {
		t.Errorf("the sweep ended a live session: %v", err)
	}
}

// TestMembershipOfAnotherPlatform: a membership binding of another platform's ServiceAccount (a
// second install with a user of the same name) is not this platform's user's membership.
func TestMembershipOfAnotherPlatform(t *testing.T) {
	rb := func(name, ns, saNS string) *rbacv1.RoleBinding {
		return &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: BindingPrefix + "admin", Namespace: ns,
			Labels: map[string]string{LabelMember: "admin", LabelRole: api.RoleOwner}},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: RolePrefix + api.RoleOwner},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: SAName("admin"), Namespace: saNS}}}
	}
	st, _ := fakeStore(t, rb("m", "mine", DefaultNamespace), rb("o", "theirs", "devtool-sys-other"))
	ms, err := st.MembershipsOf("admin")
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 1 || ms[0].Namespace != "mine" {
		t.Errorf("memberships: %+v, want only namespace mine", ms)
	}
	if st.RoleIn("admin", "theirs") != "" || st.RoleIn("admin", "mine") != api.RoleOwner {
		t.Errorf("RoleIn: theirs %q, mine %q", st.RoleIn("admin", "theirs"), st.RoleIn("admin", "mine"))
	}
}

// TestLimitsSettings: saved quota defaults reach the next namespace; bad values are refused naming
// the key; a hand-edited value that is no quantity is ignored (the namespace still gets a quota).
func TestLimitsSettings(t *testing.T) {
	st, _ := fakeStore(t)
	ctx := context.Background()
	l := DefaultLimits
	l.QuotaPods, l.DefaultMemory = "12", "2Gi"
	if err := st.SetLimits(ctx, l); err != nil {
		t.Fatal(err)
	}
	bad := l
	bad.QuotaCPU = "eight"
	if err := st.SetLimits(ctx, bad); err == nil || !strings.Contains(err.Error(), "quota.cpu") {
		t.Errorf("a bad quantity: %v", err)
	}
	bad = l
	bad.DefaultRequestMemory = "4Gi"
	if err := st.SetLimits(ctx, bad); err == nil || !strings.Contains(err.Error(), "default-request.memory") {
		t.Errorf("a request above its limit: %v", err)
	}
	if _, err := st.CreateNamespace(ctx, "alice", "shop"); err != nil {
		t.Fatal(err)
	}
	q, err := st.Kube.CoreV1().ResourceQuotas("shop").Get(ctx, QuotaName, metav1.GetOptions{})
	if err != nil || q.Spec.Hard.Pods().String() != "12" {
		t.Fatalf("quota of the new namespace: %v %v", q, err)
	}
	cm, _ := st.Kube.CoreV1().ConfigMaps(st.Namespace).Get(ctx, SettingsName, metav1.GetOptions{})
	cm.Data["quota.pods"] = "many"
	if _, err := st.Kube.CoreV1().ConfigMaps(st.Namespace).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if got, err := st.EffectiveLimits(ctx); err != nil || got.QuotaPods != DefaultLimits.QuotaPods || got.DefaultMemory != "2Gi" {
		t.Errorf("a hand-edited bad value: %+v %v, want the default pods and the saved memory", got, err)
	}
}

package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"golang.org/x/time/rate"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devtool/devtool/internal/platform/api"
	"github.com/devtool/devtool/internal/platform/store"
	"github.com/devtool/devtool/internal/platform/store/storetest"
)

// newTestServer runs the API on fake Kubernetes clients (a unit test of the HTTP layer: the fakes
// enforce no RBAC; the integration test on the local cluster proves isolation) and returns it with
// an admin token.
func newTestServer(t *testing.T) (*httptest.Server, string) {
	ts, tok, _ := newTestServerStore(t)
	return ts, tok
}

func newTestServerStore(t *testing.T) (*httptest.Server, string, *store.Store) {
	t.Helper()
	return newTestServerOptions(t, nil)
}

// newTestServerOptions is newTestServerStore with set changing the server's options first.
func newTestServerOptions(t *testing.T, set func(*Options)) (*httptest.Server, string, *store.Store) {
	t.Helper()
	st, _ := storetest.New(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	_, tok, err := st.CreateUser(ctx, "admin", true, "")
	if err != nil {
		t.Fatal(err)
	}
	o := Options{Store: st, Info: api.Info{Version: "test", Domain: "devtool.localhost"},
		AddrRate: rate.Inf, AccountRate: rate.Inf}
	if set != nil {
		set(&o)
	}
	srv := New(o)
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	return ts, tok, st
}

type answer struct {
	status int
	body   []byte
	err    api.ErrorBody
}

func call(t *testing.T, ts *httptest.Server, method, path, token string, body any) answer {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		j, _ := json.Marshal(b)
		rd = bytes.NewReader(j)
	}
	req, _ := http.NewRequest(method, ts.URL+path, rd)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	a := answer{status: resp.StatusCode}
	a.body, _ = io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		var e api.Error
		if err := json.Unmarshal(a.body, &e); err != nil {
			t.Fatalf("%s %s: %d with a body that is not the JSON error: %q", method, path, resp.StatusCode, a.body)
		}
		a.err = e.Error
	}
	return a
}

// until calls a route until it answers want: reads come from informers, which the fake clients
// feed asynchronously.
func until(t *testing.T, want int, f func() answer) answer {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		a := f()
		if a.status == want || time.Now().After(deadline) {
			if a.status != want {
				t.Fatalf("status %d (%s), want %d", a.status, a.body, want)
			}
			return a
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestAPI(t *testing.T) {
	ts, admin, st := newTestServerStore(t)
	p := api.Prefix

	// info needs no token; everything else does.
	if a := call(t, ts, "GET", p+"/info", "", nil); a.status != 200 || !strings.Contains(string(a.body), `"domain":"devtool.localhost"`) {
		t.Fatalf("info: %d %s", a.status, a.body)
	}
	if a := call(t, ts, "GET", p+"/me", "", nil); a.status != 401 || a.err.Code != "unauthorized" {
		t.Fatalf("me without token: %d %+v", a.status, a.err)
	}
	bad := admin[:len(admin)-1] + "A"
	if bad == admin {
		bad = admin[:len(admin)-1] + "B"
	}
	if a := call(t, ts, "GET", p+"/me", bad, nil); a.status != 401 {
		t.Fatalf("me with a wrong secret: %d", a.status)
	}
	a := until(t, 200, func() answer { return call(t, ts, "GET", p+"/me", admin, nil) })
	var me api.User
	_ = json.Unmarshal(a.body, &me)
	if me.Name != "admin" || !me.Admin {
		t.Fatalf("me: %+v", me)
	}

	// users: admin only; bad input names the field.
	if a := call(t, ts, "POST", p+"/users", admin, api.CreateUserRequest{Name: "Alice!"}); a.status != 400 || a.err.Field != "name" {
		t.Fatalf("bad user name: %d %+v", a.status, a.err)
	}
	if a := call(t, ts, "POST", p+"/users", admin, `{"name": 5}`); a.status != 400 || a.err.Field != "name" {
		t.Fatalf("name of the wrong type: %d %+v", a.status, a.err)
	}
	if a := call(t, ts, "POST", p+"/users", admin, `{"name": "x"`); a.status != 400 {
		t.Fatalf("malformed JSON: %d", a.status)
	}
	if a := call(t, ts, "POST", p+"/users", admin, `{"name":"`+strings.Repeat("a", MaxBody)+`"}`); a.status != 413 || a.err.Code != "too_large" {
		t.Fatalf("huge body: %d %+v", a.status, a.err)
	}
	var alice, bob api.CreateUserResponse
	a = call(t, ts, "POST", p+"/users", admin, api.CreateUserRequest{Name: "alice"})
	if a.status != 201 {
		t.Fatalf("create alice: %d %s", a.status, a.body)
	}
	_ = json.Unmarshal(a.body, &alice)
	if _, _, ok := store.ParseToken(alice.Token); !ok {
		t.Fatalf("alice's token %q is not dvt_<id>_<secret>", alice.Token)
	}
	if a := call(t, ts, "POST", p+"/users", admin, api.CreateUserRequest{Name: "alice"}); a.status != 409 {
		t.Fatalf("alice again: %d", a.status)
	}
	_ = json.Unmarshal(call(t, ts, "POST", p+"/users", admin, api.CreateUserRequest{Name: "bob"}).body, &bob)
	if a := until(t, 403, func() answer { return call(t, ts, "GET", p+"/users", alice.Token, nil) }); a.err.Code != "forbidden" {
		t.Fatalf("alice lists users: %+v", a.err)
	}

	// namespaces: personal one listed; create is idempotent; a non-member gets 404, another creator 409.
	a = until(t, 200, func() answer {
		a := call(t, ts, "GET", p+"/namespaces", alice.Token, nil)
		if !strings.Contains(string(a.body), `"name":"alice"`) {
			a.status = 0
		}
		return a
	})
	if !strings.Contains(string(a.body), `"personal":true`) {
		t.Fatalf("alice's namespaces: %s", a.body)
	}
	if a := call(t, ts, "POST", p+"/namespaces", alice.Token, api.CreateNamespaceRequest{Name: "team-a"}); a.status != 201 {
		t.Fatalf("create team-a: %d %s", a.status, a.body)
	}
	if a := call(t, ts, "POST", p+"/namespaces", alice.Token, api.CreateNamespaceRequest{Name: "team-a"}); a.status != 200 {
		t.Fatalf("create team-a again: %d %s", a.status, a.body)
	}
	if a := call(t, ts, "POST", p+"/namespaces", bob.Token, api.CreateNamespaceRequest{Name: "team-a"}); a.status != 409 {
		t.Fatalf("bob creates team-a: %d %s", a.status, a.body)
	}
	if a := call(t, ts, "POST", p+"/namespaces", bob.Token, api.CreateNamespaceRequest{Name: "kube-system"}); a.status != 400 || a.err.Field != "name" {
		t.Fatalf("bob creates kube-system: %d %+v", a.status, a.err)
	}
	until(t, 200, func() answer { return call(t, ts, "GET", p+"/namespaces/team-a", alice.Token, nil) })
	if a := call(t, ts, "GET", p+"/namespaces/team-a", bob.Token, nil); a.status != 404 {
		t.Fatalf("bob reads team-a: %d", a.status)
	}
	for _, r := range []struct{ method, path string }{
		{"DELETE", "/namespaces/team-a"}, {"PUT", "/namespaces/team-a/members/bob"}, {"DELETE", "/namespaces/team-a/members/alice"},
	} {
		if a := call(t, ts, r.method, p+r.path, bob.Token, api.ShareRequest{Role: "owner"}); a.status != 404 {
			t.Fatalf("bob %s %s: %d, want 404", r.method, r.path, a.status)
		}
	}
	if a := call(t, ts, "PUT", p+"/namespaces/team-a/members/bob", alice.Token, api.ShareRequest{Role: "boss"}); a.status != 400 || a.err.Field != "role" {
		t.Fatalf("bad role: %d %+v", a.status, a.err)
	}
	if a := call(t, ts, "PUT", p+"/namespaces/team-a/members/bob", alice.Token, api.ShareRequest{Role: "viewer"}); a.status != 200 {
		t.Fatalf("share: %d %s", a.status, a.body)
	}
	a = until(t, 200, func() answer { return call(t, ts, "GET", p+"/namespaces/team-a", bob.Token, nil) })
	var ns api.Namespace
	_ = json.Unmarshal(a.body, &ns)
	if ns.Role != "viewer" || len(ns.Members) != 2 {
		t.Fatalf("bob's view of team-a: %+v", ns)
	}
	if a := call(t, ts, "DELETE", p+"/namespaces/team-a", bob.Token, nil); a.status != 403 {
		t.Fatalf("viewer deletes: %d", a.status)
	}
	if a := call(t, ts, "DELETE", p+"/namespaces/team-a/members/alice", alice.Token, nil); a.status != 409 {
		t.Fatalf("the only owner leaves: %d", a.status)
	}

	// tokens: made, listed without secrets, revoked at once; another user's id is not found.
	var tok api.Token
	a = call(t, ts, "POST", p+"/tokens", alice.Token, api.CreateTokenRequest{Name: "ci", ExpiresInSeconds: 3600})
	_ = json.Unmarshal(a.body, &tok)
	if a.status != 201 || tok.Token == "" || tok.Expires.Sub(tok.Created) != time.Hour {
		t.Fatalf("create token: %d %s", a.status, a.body)
	}
	if a := call(t, ts, "POST", p+"/tokens", alice.Token, api.CreateTokenRequest{ExpiresInSeconds: 400 * 24 * 3600}); a.status != 400 || a.err.Field != "expiresInSeconds" {
		t.Fatalf("too long a token: %d %+v", a.status, a.err)
	}
	a = until(t, 200, func() answer {
		a := call(t, ts, "GET", p+"/tokens", alice.Token, nil)
		if !strings.Contains(string(a.body), tok.ID) {
			a.status = 0
		}
		return a
	})
	if strings.Contains(string(a.body), `"token"`) {
		t.Fatalf("token list shows a secret: %s", a.body)
	}
	if a := call(t, ts, "DELETE", p+"/tokens/"+tok.ID, bob.Token, nil); a.status != 404 {
		t.Fatalf("bob revokes alice's token: %d", a.status)
	}
	if a := call(t, ts, "GET", p+"/me", tok.Token, nil); a.status != 200 {
		t.Fatalf("new token: %d", a.status)
	}
	if a := call(t, ts, "DELETE", p+"/tokens/"+tok.ID, alice.Token, nil); a.status != 204 {
		t.Fatalf("revoke: %d", a.status)
	}
	if a := call(t, ts, "GET", p+"/me", tok.Token, nil); a.status != 401 {
		t.Fatalf("revoked token: %d", a.status)
	}

	// stored secrets: names only in the list; namespace over user over admin; a non-member's namespace is 404.
	for _, put := range []struct{ q, name, value, token string }{
		{"", "DB_PASS", "user", alice.Token}, {"?scope=admin", "DB_PASS", "admin", admin}, {"?scope=admin", "REGION", "eu", admin},
		{"?scope=namespace&namespace=team-a", "DB_PASS", "ns", alice.Token},
	} {
		if a := call(t, ts, "PUT", p+"/secrets/"+put.name+put.q, put.token, api.SecretValue{Value: put.value}); a.status != 200 {
			t.Fatalf("PUT %s%s: %d %s", put.name, put.q, a.status, a.body)
		}
	}
	if a := call(t, ts, "PUT", p+"/secrets/REGION?scope=admin", alice.Token, api.SecretValue{Value: "x"}); a.status != 403 {
		t.Fatalf("alice sets an admin secret: %d", a.status)
	}
	if a := call(t, ts, "PUT", p+"/secrets/1BAD", alice.Token, api.SecretValue{Value: "x"}); a.status != 400 || a.err.Field != "name" {
		t.Fatalf("bad secret name: %d %+v", a.status, a.err)
	}
	if a := call(t, ts, "PUT", p+"/secrets/X?scope=namespace&namespace=bob", alice.Token, api.SecretValue{Value: "x"}); a.status != 404 {
		t.Fatalf("alice sets a secret in bob's namespace: %d", a.status)
	}
	a = call(t, ts, "GET", p+"/secrets?namespace=team-a", alice.Token, nil)
	if a.status != 200 || strings.Contains(string(a.body), `"ns"`) || !strings.Contains(string(a.body), `{"name":"DB_PASS","scope":"namespace"}`) {
		t.Fatalf("secret list: %d %s", a.status, a.body)
	}
	var res api.ResolvedSecrets
	_ = json.Unmarshal(call(t, ts, "GET", p+"/secrets/values?namespace=team-a", alice.Token, nil).body, &res)
	if res.Values["DB_PASS"] != "ns" || res.Values["REGION"] != "eu" {
		t.Fatalf("resolved in team-a: %v", res.Values)
	}
	_ = json.Unmarshal(call(t, ts, "GET", p+"/secrets/values", alice.Token, nil).body, &res)
	if res.Values["DB_PASS"] != "user" {
		t.Fatalf("resolved: %v", res.Values)
	}
	if a := call(t, ts, "GET", p+"/secrets/values?namespace=team-a", admin, nil); a.status != 404 {
		t.Fatalf("a non-member resolves team-a's secrets: %d", a.status)
	}
	if a := call(t, ts, "DELETE", p+"/secrets/DB_PASS", alice.Token, nil); a.status != 204 {
		t.Fatalf("delete secret: %d", a.status)
	}
	if a := call(t, ts, "DELETE", p+"/secrets/DB_PASS", alice.Token, nil); a.status != 404 {
		t.Fatalf("delete it again: %d", a.status)
	}

	// every change leaves an audit Event on its object: who, what, the result.
	evs, err := st.Kube.CoreV1().Events("").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var audit []string
	for _, e := range evs.Items {
		audit = append(audit, e.Namespace+" "+e.InvolvedObject.Kind+"/"+e.InvolvedObject.Name+": "+e.Message)
	}
	all := strings.Join(audit, "\n")
	for _, want := range []string{"devtool-system User/alice: admin create User alice (admin=false)", "team-a Namespace/team-a: alice share Namespace team-a (bob as viewer)",
		"Namespace/team-a: alice unshare Namespace team-a (alice): refused", "AccessToken/" + tok.ID + ": alice revoke"} {
		if !strings.Contains(all, want) {
			t.Errorf("no audit record %q in:\n%s", want, all)
		}
	}

	// removing a user: its tokens stop at once.
	if a := call(t, ts, "DELETE", p+"/users/bob", alice.Token, nil); a.status != 403 {
		t.Fatalf("alice removes bob: %d", a.status)
	}
	if a := call(t, ts, "DELETE", p+"/users/bob", admin, nil); a.status != 204 {
		t.Fatalf("remove bob: %d %s", a.status, a.body)
	}
	if a := call(t, ts, "GET", p+"/me", bob.Token, nil); a.status != 401 {
		t.Fatalf("removed user's token: %d", a.status)
	}
	ctx := context.Background()
	if _, err := st.Kube.CoreV1().ServiceAccounts(store.DefaultNamespace).Get(ctx, "u-bob", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("bob's ServiceAccount after removal: %v", err)
	}
	if _, err := st.Kube.RbacV1().RoleBindings("team-a").Get(ctx, store.BindingPrefix+"bob", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("bob's binding in team-a after removal: %v", err)
	}
	if _, err := st.Kube.CoreV1().ResourceQuotas("alice").Get(ctx, store.QuotaName, metav1.GetOptions{}); err != nil {
		t.Errorf("alice's personal namespace has no quota: %v", err)
	}
	if lr, err := st.Kube.CoreV1().LimitRanges("team-a").Get(ctx, store.LimitsName, metav1.GetOptions{}); err != nil || lr.Spec.Limits[0].Default.Memory().String() != store.DefaultLimits.DefaultMemory {
		t.Errorf("team-a's limit range: %v %v", lr, err)
	}
	if a := call(t, ts, "GET", p+"/nothing", admin, nil); a.status != 404 || a.err.Code != "not_found" {
		t.Fatalf("unknown route: %d %+v", a.status, a.err)
	}
}

func TestRateLimit(t *testing.T) {
	now := time.Unix(1000, 0)
	l := newLimiters(1, 2, func() time.Time { return now })
	if !l.allow("a") || !l.allow("a") || l.allow("a") {
		t.Fatal("burst of 2 not enforced")
	}
	if !l.allow("b") {
		t.Fatal("another address shares the budget")
	}
	now = now.Add(time.Second)
	if !l.allow("a") {
		t.Fatal("the budget did not refill")
	}
	now = now.Add(11 * time.Minute)
	l.allow("c")
	if _, ok := l.m["a"]; ok {
		t.Fatal("an idle entry was kept")
	}
}

func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"name":"alice","admin":true}`))
	f.Add([]byte(`{"name":5}`))
	f.Add([]byte(`{} {}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var req api.CreateUserRequest
		_ = Decode(bytes.NewReader(b), &req)
		var tr api.CreateTokenRequest
		_ = Decode(bytes.NewReader(b), &tr)
		var sr api.ShareRequest
		_ = Decode(bytes.NewReader(b), &sr)
	})
}

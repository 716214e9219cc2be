//go:build integration

package server_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devtool/devtool/internal/platform/api"
	"github.com/devtool/devtool/internal/platform/install"
	"github.com/devtool/devtool/internal/platform/leader"
	"github.com/devtool/devtool/internal/platform/server"
	"github.com/devtool/devtool/internal/platform/store"
	"github.com/devtool/devtool/internal/testcluster"
)

// TestPlatformPasswordLockoutAcrossReplicas: five wrong passwords through one replica lock the
// account for the other too (the count and the lock live on the User resource), with the same
// answer as an unknown user; an admin's unlock through the first lets the right password in through
// the second.
func TestPlatformPasswordLockoutAcrossReplicas(t *testing.T) {
	c := testcluster.Connect(t)
	p := connectPlatform(t, c)
	pods := platformPods(t, c)
	if len(pods) < 2 {
		t.Fatalf("%d ready platform pods, want 2", len(pods))
	}
	name := "lock-" + suffix()
	const pw = "correct horse battery"
	p.want(p.do(p.url, "POST", "/users", p.admin, api.CreateUserRequest{Name: name, Password: pw}), 201, "create user")
	t.Cleanup(func() {
		p.do(p.url, "DELETE", "/users/"+name, p.admin, nil)
		_ = c.Clientset.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	login := func(pod int, password string) reply {
		return doWith(t, pods[pod], p.podURL(), "POST", "/login", "", api.LoginRequest{User: name, Password: password})
	}
	p.want(login(1, pw), 200, "right password through pod 1")
	var refused string
	for i := range 5 {
		r := p.want(login(0, "wrong password"), 401, fmt.Sprintf("wrong password %d through pod 0", i+1))
		refused = string(r.body)
	}
	r := p.want(login(1, pw), 401, "right password through pod 1 while locked")
	unknown := doWith(t, pods[1], p.podURL(), "POST", "/login", "", api.LoginRequest{User: "nobody-" + suffix(), Password: pw})
	if string(r.body) != refused || string(unknown.body) != refused {
		t.Errorf("refusals differ: locked %s, wrong %s, unknown %s", r.body, refused, unknown.body)
	}
	var users api.UserList
	_ = json.Unmarshal(p.want(doWith(t, pods[1], p.podURL(), "GET", "/users", p.admin, nil), 200, "users").body, &users)
	for _, u := range users.Items {
		if u.Name == name && (u.LockedUntil == nil || u.FailedLogins != 5) {
			t.Errorf("the locked user as the admin sees it: %+v", u)
		}
	}
	p.want(doWith(t, pods[0], p.podURL(), "POST", "/users/"+name+"/unlock", p.admin, nil), 204, "unlock through pod 0")
	p.want(login(1, pw), 200, "right password through pod 1 after the unlock")
}

// TestPlatformLoginAcrossReplicas: a browser login whose sign-in (the web UI's page), consent and code
// are made by one replica is finished (code exchanged) by the other; a device login started on one is approved on
// the other and polled on the first.
func TestPlatformLoginAcrossReplicas(t *testing.T) {
	c := testcluster.Connect(t)
	p := connectPlatform(t, c)
	pods := platformPods(t, c)
	if len(pods) < 2 {
		t.Fatalf("%d ready platform pods, want 2", len(pods))
	}
	name := "xrep-" + suffix()
	const pw = "correct horse battery"
	p.want(p.do(p.url, "POST", "/users", p.admin, api.CreateUserRequest{Name: name, Password: pw}), 201, "create user")
	t.Cleanup(func() {
		p.do(p.url, "DELETE", "/users/"+name, p.admin, nil)
		_ = c.Clientset.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	jar, _ := cookiejar.New(nil)
	for _, hc := range pods {
		hc.Jar = jar
		hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	}
	form := func(pod int, path string, v url.Values) *http.Response {
		t.Helper()
		req, _ := http.NewRequest("POST", p.podURL()+path, strings.NewReader(v.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", p.podURL())
		resp, err := pods[pod].Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	readAll := func(resp *http.Response) string {
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	// sign in on the web UI's page through pod 0 (the session is a Session resource read live: valid on both)
	if r := form(0, "/signin", url.Values{"name": {name}, "password": {pw}, "return": {"/namespaces"}}); r.StatusCode != 303 {
		t.Fatalf("sign in: %d %s", r.StatusCode, readAll(r))
	}
	verifier := strings.Repeat("x", 64)
	sum := sha256.Sum256([]byte(verifier))
	auth := url.Values{"response_type": {"code"}, "client_id": {api.CLIClientID}, "redirect_uri": {"http://127.0.0.1:1/callback"},
		"state": {"st"}, "code_challenge": {base64.RawURLEncoding.EncodeToString(sum[:])}, "code_challenge_method": {"S256"}, "action": {"allow"}}
	r := form(1, api.AuthorizePath, auth) // consent given to pod 1
	loc, _ := url.Parse(r.Header.Get("Location"))
	readAll(r)
	if r.StatusCode != 303 || loc == nil || loc.Query().Get("code") == "" || loc.Query().Get("state") != "st" {
		t.Fatalf("consent: %d %v", r.StatusCode, loc)
	}
	tokenAt := func(pod int, v url.Values) map[string]any {
		r := form(pod, api.TokenPath, v)
		var m map[string]any
		_ = json.Unmarshal([]byte(readAll(r)), &m)
		return m
	}
	m := tokenAt(0, url.Values{"grant_type": {"authorization_code"}, "client_id": {api.CLIClientID}, "code": {loc.Query().Get("code")},
		"redirect_uri": {"http://127.0.0.1:1/callback"}, "code_verifier": {verifier}})
	tok, _ := m["access_token"].(string)
	if tok == "" {
		t.Fatalf("code made by pod 1, exchanged at pod 0: %v", m)
	}
	p.want(doWith(t, pods[1], p.podURL(), "GET", "/me", tok, nil), 200, "token of the cross-replica browser login")

	// device: started on pod 1, approved on pod 0, polled on pod 1
	r = form(1, api.DeviceAuthPath, url.Values{"client_id": {api.CLIClientID}})
	var da map[string]any
	_ = json.Unmarshal([]byte(readAll(r)), &da)
	dc, uc := fmt.Sprint(da["device_code"]), fmt.Sprint(da["user_code"])
	if m := tokenAt(1, url.Values{"grant_type": {"urn:ietf:params:oauth:grant-type:device_code"}, "client_id": {api.CLIClientID}, "device_code": {dc}}); m["error"] != "authorization_pending" {
		t.Fatalf("poll before approval: %v", m)
	}
	if r := form(0, api.DevicePagePath, url.Values{"user_code": {uc}, "action": {"approve"}}); r.StatusCode != 200 {
		t.Fatalf("approve on pod 0: %d %s", r.StatusCode, readAll(r))
	}
	m = tokenAt(1, url.Values{"grant_type": {"urn:ietf:params:oauth:grant-type:device_code"}, "client_id": {api.CLIClientID}, "device_code": {dc}})
	if tok, _ := m["access_token"].(string); tok == "" {
		t.Fatalf("poll on pod 1 after approval on pod 0: %v", m)
	}
	if m := tokenAt(0, url.Values{"grant_type": {"urn:ietf:params:oauth:grant-type:device_code"}, "client_id": {api.CLIClientID}, "device_code": {dc}}); m["error"] != "invalid_grant" {
		t.Fatalf("the device code used twice: %v", m)
	}
}

// TestPlatformLeaderElection: one replica holds the Lease; when its pod is deleted another takes
// it (possibly the Deployment's replacement pod, which may take the Lease before its readiness
// probe passes), and the Deployment is back at 2 ready replicas.
func TestPlatformLeaderElection(t *testing.T) {
	c := testcluster.Connect(t)
	connectPlatform(t, c)
	ctx := context.Background()
	ns := platformNS()
	holder := func() string {
		l, err := c.Clientset.CoordinationV1().Leases(ns).Get(ctx, leader.LeaseName, metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil {
			return ""
		}
		return *l.Spec.HolderIdentity
	}
	var first string
	eventually(t, time.Minute, func() string {
		if first = holder(); first == "" {
			return "no Lease holder"
		}
		return ""
	})
	if _, err := c.Clientset.CoreV1().Pods(ns).Get(ctx, first, metav1.GetOptions{}); err != nil {
		t.Fatalf("the Lease holder %q is not a platform pod: %v", first, err)
	}
	if err := c.Clientset.CoreV1().Pods(ns).Delete(ctx, first, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	var next string
	eventually(t, 2*time.Minute, func() string {
		if next = holder(); next == "" || next == first {
			return "the Lease is still held by the deleted pod " + first
		}
		return ""
	})
	// Back at 2: the deleted pod gone and its replacement ready (the Deployment's status alone can
	// still count the deleted pod right after the delete).
	eventually(t, 3*time.Minute, func() string {
		d, err := c.Clientset.AppsV1().Deployments(ns).Get(ctx, install.Name, metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		if !deploymentReady(d) {
			return fmt.Sprintf("deployment: %d/%d ready", d.Status.ReadyReplicas, *d.Spec.Replicas)
		}
		pods, err := c.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=" + install.Name})
		if err != nil {
			return err.Error()
		}
		ready := 0
		for _, p := range pods.Items {
			if p.Name == first {
				return "the deleted pod " + first + " is still there"
			}
			for _, cond := range p.Status.Conditions {
				if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue && p.DeletionTimestamp == nil {
					ready++
				}
			}
		}
		if ready != int(*d.Spec.Replicas) {
			return fmt.Sprintf("%d of %d platform pods ready", ready, *d.Spec.Replicas)
		}
		return ""
	})
	if _, err := c.Clientset.CoreV1().Pods(ns).Get(ctx, next, metav1.GetOptions{}); err != nil {
		t.Errorf("the new holder %q is not a platform pod: %v", next, err)
	}
}

func deploymentReady(d *appsv1.Deployment) bool {
	return d.Spec.Replicas != nil && d.Status.ReadyReplicas == *d.Spec.Replicas && d.Status.UpdatedReplicas == *d.Spec.Replicas &&
		d.Status.Replicas == *d.Spec.Replicas && d.Generation <= d.Status.ObservedGeneration
}

// TestPlatformRoutesWrongUser: every API route, called with bob's token on what is alice's (her
// namespaces, members, tokens, secrets) or an admin's, is refused: 404 where a name would leak,
// 403 for an admin route, and alice's things are unchanged afterwards.
func TestPlatformRoutesWrongUser(t *testing.T) {
	c := testcluster.Connect(t)
	p := connectPlatform(t, c)
	s := suffix()
	alice, bob := "ra-"+s, "rb-"+s
	var aliceU, bobU api.CreateUserResponse
	_ = json.Unmarshal(p.want(p.do(p.url, "POST", "/users", p.admin, api.CreateUserRequest{Name: alice}), 201, "alice").body, &aliceU)
	_ = json.Unmarshal(p.want(p.do(p.url, "POST", "/users", p.admin, api.CreateUserRequest{Name: bob}), 201, "bob").body, &bobU)
	t.Cleanup(func() {
		p.do(p.url, "DELETE", "/users/"+alice, p.admin, nil)
		p.do(p.url, "DELETE", "/users/"+bob, p.admin, nil)
		for _, ns := range []string{alice, bob} {
			_ = c.Clientset.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
		}
	})
	eventually(t, 10*time.Second, func() string {
		if r := p.do(p.url, "GET", "/namespaces/"+alice, aliceU.Token, nil); r.status != 200 {
			return fmt.Sprintf("alice's namespace: %d", r.status)
		}
		return ""
	})
	var aliceTok api.Token
	_ = json.Unmarshal(p.want(p.do(p.url, "POST", "/tokens", aliceU.Token, api.CreateTokenRequest{Name: "keep"}), 201, "alice's token").body, &aliceTok)
	p.want(p.do(p.url, "PUT", "/secrets/KEY?scope=namespace&namespace="+alice, aliceU.Token, api.SecretValue{Value: "v"}), 200, "alice's namespace secret")
	// alice's pipeline "p" (run 1; its clone fails: nothing answers on 127.0.0.1:1).
	p.want(p.do(p.url, "POST", "/namespaces/"+alice+"/pipelines", aliceU.Token,
		api.PipelineRequest{Name: "p", Repository: "https://127.0.0.1:1/r.git"}), 201, "alice's pipeline")

	cases := []struct {
		method, path string
		body         any
		want         int
	}{
		{"GET", "/namespaces/" + alice, nil, 404},
		{"DELETE", "/namespaces/" + alice, nil, 404},
		{"PUT", "/namespaces/" + alice + "/members/" + bob, api.ShareRequest{Role: api.RoleOwner}, 404},
		{"DELETE", "/namespaces/" + alice + "/members/" + alice, nil, 404},
		{"POST", "/namespaces", api.CreateNamespaceRequest{Name: alice}, 409},
		{"DELETE", "/tokens/" + aliceTok.ID, nil, 404},
		{"GET", "/secrets?namespace=" + alice, nil, 404},
		{"GET", "/secrets/values?namespace=" + alice, nil, 404},
		{"PUT", "/secrets/KEY?scope=namespace&namespace=" + alice, api.SecretValue{Value: "x"}, 404},
		{"DELETE", "/secrets/KEY?scope=namespace&namespace=" + alice, nil, 404},
		{"PUT", "/secrets/KEY?scope=admin", api.SecretValue{Value: "x"}, 403},
		{"DELETE", "/secrets/KEY?scope=admin", nil, 403},
		{"POST", "/users", api.CreateUserRequest{Name: "x-" + s}, 403},
		{"GET", "/users", nil, 403},
		{"DELETE", "/users/" + alice, nil, 403},
		{"PUT", "/users/" + alice + "/password", api.PasswordReset{Password: "taken over!"}, 403},
		{"POST", "/users/" + alice + "/unlock", nil, 403},
		{"GET", "/analytics", nil, 403},
		{"PUT", "/analytics/settings", map[string]bool{"enabled": true}, 403},
		{"POST", "/namespaces/" + alice + "/pipelines", api.PipelineRequest{Name: "p", Repository: "https://127.0.0.1:1/r.git"}, 404},
		{"GET", "/namespaces/" + alice + "/pipelines", nil, 404},
		{"GET", "/namespaces/" + alice + "/pipelines/p", nil, 404},
		{"GET", "/namespaces/" + alice + "/pipelines/p/runs/1", nil, 404},
		{"GET", "/namespaces/" + alice + "/pipelines/p/runs/1/log", nil, 404},
		// Previews on what is not bob's (a real personal preview of alice's: TestPreviews, e2e).
		{"POST", "/previews", api.PreviewRequest{Name: "g-" + s, Repository: "https://127.0.0.1:1/r.git", Scope: "global"}, 403},
		{"GET", "/previews/" + alice, nil, 404},
		{"DELETE", "/previews/" + alice, nil, 404},
		{"GET", "/previews/" + alice + "/endpoints", nil, 404},
		{"POST", "/previews/" + alice + "/wake", nil, 404},
	}
	for _, tc := range cases {
		r := p.do(p.url, tc.method, tc.path, bobU.Token, tc.body)
		if r.status != tc.want {
			t.Errorf("bob: %s %s: %d, want %d: %s", tc.method, tc.path, r.status, tc.want, r.body)
		}
	}
	// Routes of the caller's own (me, tokens, kubetoken, password, analytics events and the setting's
	// reading) never reach alice's.
	var toks api.TokenList
	_ = json.Unmarshal(p.want(p.do(p.url, "GET", "/tokens", bobU.Token, nil), 200, "bob's tokens").body, &toks)
	for _, tk := range toks.Items {
		if tk.Owner != bob {
			t.Errorf("bob's token list holds %+v", tk)
		}
	}
	if r := p.want(p.do(p.url, "GET", "/previews", bobU.Token, nil), 200, "bob's previews"); strings.Contains(string(r.body), alice) {
		t.Errorf("bob's previews name alice's: %s", r.body)
	}
	var me api.User
	_ = json.Unmarshal(p.want(p.do(p.url, "GET", "/me", bobU.Token, nil), 200, "bob's me").body, &me)
	if me.Name != bob {
		t.Errorf("me: %+v", me)
	}
	// alice is untouched: her namespace, member, token and secret.
	p.want(p.do(p.url, "GET", "/namespaces/"+alice, aliceU.Token, nil), 200, "alice's namespace after bob")
	p.want(p.do(p.url, "GET", "/me", aliceTok.Token, nil), 200, "alice's token after bob")
	var res api.ResolvedSecrets
	_ = json.Unmarshal(p.want(p.do(p.url, "GET", "/secrets/values?namespace="+alice, aliceU.Token, nil), 200, "alice resolves").body, &res)
	if res.Values["KEY"] != "v" {
		t.Errorf("alice's namespace secret after bob: %v", res.Values)
	}
	// A route list that grew without this table: every pattern the server registers is covered here
	// or in TestPlatformOnCluster (checked by name, so a new route fails until it is added).
	// builder/credentials signs a certificate naming the caller only (pushes are checked by the
	// registry with the user's own Kubernetes token: TestPlatformHostedBuild).
	covered := regexp.MustCompile(`^(GET|POST|PUT|DELETE) /api/v1/(info|me|me/password|login|oauth/token|oauth/device|users|users/\{name\}|users/\{name\}/password|users/\{name\}/unlock|analytics|analytics/settings|tokens|tokens/\{id\}|namespaces|namespaces/\{name\}|namespaces/\{name\}/members/\{user\}|kubetoken|builder/credentials|secrets|secrets/values|secrets/\{name\}|namespaces/\{name\}/pipelines|namespaces/\{name\}/pipelines/\{pipeline\}|namespaces/\{name\}/pipelines/\{pipeline\}/runs/\{run\}|namespaces/\{name\}/pipelines/\{pipeline\}/runs/\{run\}/log|previews|previews/\{name\}|previews/\{name\}/endpoints|previews/\{name\}/wake)$`)
	for _, route := range apiRoutes(t) {
		if !covered.MatchString(route) {
			t.Errorf("route %s is not in the wrong-user table", route)
		}
	}
}

func apiRoutes(t *testing.T) []string {
	t.Helper()
	routes := server.New(server.Options{Store: &store.Store{}}).Routes()
	if len(routes) < 20 {
		t.Fatalf("the server lists %d routes", len(routes))
	}
	return routes
}

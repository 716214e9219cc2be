package preview

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kfake "k8s.io/client-go/kubernetes/fake"

	"github.com/devtool/devtool/internal/platform/api"
	"github.com/devtool/devtool/internal/platform/pipeline"
	"github.com/devtool/devtool/internal/platform/store"
	"github.com/devtool/devtool/internal/platform/store/storetest"
)

type fixture struct {
	m                   *Manager
	pl                  *pipeline.Manager
	st                  *store.Store
	kc                  *kfake.Clientset
	admin, alice, bob   *store.User
	ctx                 context.Context
	now                 time.Time
	secret              []byte
	repository, pullURL string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	st, kc := storetest.New(t, map[schema.GroupVersionResource]string{pipeline.RunResource: "PipelineRunList", Resource: "PreviewList"})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	f := &fixture{st: st, kc: kc, ctx: ctx, now: time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC), secret: []byte("webhook-secret"),
		repository: "https://git.example.com/acme/shop.git", pullURL: "https://git.example.com/acme/shop/pull/7"}
	for _, u := range []string{"admin", "alice", "bob"} {
		if _, _, err := st.CreateUser(ctx, u, u == "admin", ""); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, func() bool { _, err := st.GetUser("bob"); return err == nil })
	f.admin, _ = st.GetUser("admin")
	f.alice, _ = st.GetUser("alice")
	f.bob, _ = st.GetUser("bob")
	f.pl = pipeline.New(pipeline.Options{Store: st, RunnerImage: "runner:1", Now: func() time.Time { return f.now }, OnFinish: func(ctx context.Context, r *pipeline.Run) { f.m.OnRunFinished(ctx, r) }})
	if err := f.pl.Start(ctx); err != nil {
		t.Fatal(err)
	}
	f.m = New(Options{Store: st, Pipelines: f.pl, TTL: time.Hour, SleepAfter: 10 * time.Minute, WebhookSecret: f.secret,
		Now: func() time.Time { return f.now }})
	if err := f.m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	return f
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// finishRun records the preview's latest run as finished (what the leader does) and calls the hook.
func (f *fixture) finishRun(t *testing.T, name string, phase string) {
	t.Helper()
	waitFor(t, func() bool { r := f.pl.LatestRun(name, name); return r != nil && !api.Finished(r.Phase) })
	r := f.pl.LatestRun(name, name)
	u, err := f.st.Dyn.Resource(pipeline.RunResource).Namespace(f.st.Namespace).Get(f.ctx, pipeline.ID(name, name, r.Number), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_ = unstructuredSet(u.Object, phase, "status", "phase")
	_ = unstructuredSet(u.Object, f.now.Format(time.RFC3339), "status", "finished")
	if _, err := f.st.Dyn.Resource(pipeline.RunResource).Namespace(f.st.Namespace).Update(f.ctx, u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { r := f.pl.LatestRun(name, name); return r != nil && api.Finished(r.Phase) })
	f.m.OnRunFinished(f.ctx, f.pl.LatestRun(name, name))
}

func unstructuredSet(obj map[string]any, v any, path ...string) error {
	m := obj
	for _, p := range path[:len(path)-1] {
		next, ok := m[p].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[p] = next
		}
		m = next
	}
	m[path[len(path)-1]] = v
	return nil
}

func TestPersonalAndGlobalPreviews(t *testing.T) {
	f := newFixture(t)
	p, created, err := f.m.Deploy(f.ctx, f.alice, api.PreviewRequest{Name: "shop-login", Repository: f.repository, Branch: "login"})
	if err != nil || !created || p.Scope != api.PreviewPersonal || p.Run == nil || p.Run.Namespace != "shop-login" || p.Run.User != "alice" {
		t.Fatalf("deploy %+v %v", p, err)
	}
	ns, err := f.kc.CoreV1().Namespaces().Get(f.ctx, "shop-login", metav1.GetOptions{})
	if err != nil || ns.Labels[store.LabelPreview] != "shop-login" || ns.Labels[store.LabelManaged] != "true" {
		t.Fatalf("namespace %+v %v", ns, err)
	}
	if _, err := f.kc.RbacV1().RoleBindings("shop-login").Get(f.ctx, store.PreviewViewers, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a personal preview binds every user: %v", err)
	}
	waitFor(t, func() bool { return f.m.cached("shop-login") != nil })
	if _, err := f.m.Get(f.bob, "shop-login"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("bob sees alice's personal preview: %v", err)
	}
	if l := f.m.List(f.bob); len(l) != 0 {
		t.Fatalf("bob's list: %+v", l)
	}
	if _, _, err := f.m.Deploy(f.ctx, f.bob, api.PreviewRequest{Name: "shop-login", Repository: f.repository}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("bob takes alice's preview name: %v", err)
	}
	if _, err := f.m.Destroy(f.ctx, f.bob, "shop-login"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("bob destroys alice's preview: %v", err)
	}
	f.finishRun(t, "shop-login", api.PhaseSucceeded)
	waitFor(t, func() bool { p := f.m.cached("shop-login"); return p != nil && p.Status == api.PreviewReady })

	// global: admins only; every user sees it and is bound as viewer
	if _, _, err := f.m.Deploy(f.ctx, f.bob, api.PreviewRequest{Name: "staging", Repository: f.repository, Scope: api.PreviewGlobal}); !errors.Is(err, store.ErrForbidden) {
		t.Fatalf("bob deploys a global preview: %v", err)
	}
	if _, _, err := f.m.Deploy(f.ctx, f.admin, api.PreviewRequest{Name: "staging", Repository: f.repository, Branch: "main", Scope: api.PreviewGlobal}); err != nil {
		t.Fatal(err)
	}
	rb, err := f.kc.RbacV1().RoleBindings("staging").Get(f.ctx, store.PreviewViewers, metav1.GetOptions{})
	if err != nil || rb.RoleRef.Name != "devtool-viewer" || rb.Subjects[0].Name != "system:serviceaccounts:"+store.DefaultNamespace {
		t.Fatalf("viewers of the global preview: %+v %v", rb, err)
	}
	waitFor(t, func() bool { return len(f.m.List(f.bob)) == 1 })
	if l := f.m.List(f.alice); len(l) != 2 || l[0].Name != "shop-login" || l[1].Name != "staging" {
		t.Fatalf("alice's list %+v", l)
	}
	if _, err := f.m.Destroy(f.ctx, f.bob, "staging"); !errors.Is(err, store.ErrForbidden) {
		t.Fatalf("bob destroys the global preview: %v", err)
	}

	// destroy: a destroy run, then (when it ended) the namespace and the record go
	f.finishRun(t, "staging", api.PhaseSucceeded)
	d, err := f.m.Destroy(f.ctx, f.admin, "staging")
	if err != nil || d.Status != api.PreviewDestroying || d.Run == nil || d.Run.Action != api.ActionDestroy {
		t.Fatalf("destroy %+v %v", d, err)
	}
	f.finishRun(t, "staging", api.PhaseFailed) // removed whatever the destroy's result
	if _, err := f.kc.CoreV1().Namespaces().Get(f.ctx, "staging", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the namespace outlived the preview: %v", err)
	}
	waitFor(t, func() bool { return f.m.cached("staging") == nil })
	// its runs are kept a minute (the CLI following the destroy reads its result), then forgotten
	if r := f.pl.LatestRun("staging", "staging"); r == nil || r.Phase != api.PhaseFailed || r.Action != api.ActionDestroy {
		t.Fatalf("the destroy run was forgotten at once: %+v", r)
	}
	f.m.Sweep(f.ctx)
	if f.pl.LatestRun("staging", "staging") == nil {
		t.Fatal("the destroy run was forgotten before its minute")
	}
	f.now = f.now.Add(2 * time.Minute)
	f.m.Sweep(f.ctx)
	waitFor(t, func() bool { return f.pl.LatestRun("staging", "staging") == nil })
}

func sign(secret, body []byte) string {
	mac := hmac.New(sha256.New, secret)
	mac.Write(body)
	return hex.EncodeToString(mac.Sum(nil))
}

func TestWebhooks(t *testing.T) {
	f := newFixture(t)
	deploy := func(name, branch, source string) {
		if _, _, err := f.m.Deploy(f.ctx, f.alice, api.PreviewRequest{Name: name, Repository: f.repository, Branch: branch, SourceURL: source}); err != nil {
			t.Fatal(err)
		}
		f.finishRun(t, name, api.PhaseSucceeded)
		// the last check reads the informer's cache: it must have seen Ready first (CI saw
		// "other" still Deploying there once)
		waitFor(t, func() bool { p := f.m.cached(name); return p != nil && p.Status == api.PreviewReady })
	}
	deploy("pr-7", "feature", f.pullURL)
	deploy("by-branch", "fix", "")
	deploy("other", "main", "")
	github := []byte(`{"action":"closed","pull_request":{"html_url":"` + f.pullURL + `","merged":true,"head":{"ref":"feature"}},"repository":{"clone_url":"https://git.example.com/acme/shop.git"}}`)
	h := http.Header{"X-Github-Event": {"pull_request"}, "X-Hub-Signature-256": {"sha256=" + sign([]byte("wrong"), github)}}
	if _, err := f.m.Webhook(f.ctx, "github", h, github); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("a payload signed with another secret: %v", err)
	}
	h.Set("X-Hub-Signature-256", "sha256="+sign(f.secret, github))
	res, err := f.m.Webhook(f.ctx, "github", h, github)
	if err != nil || strings.Join(res.Destroying, ",") != "pr-7" {
		t.Fatalf("github: %+v %v", res, err)
	}
	gitea := []byte(`{"action":"closed","pull_request":{"html_url":"https://git.example.com/acme/shop/pulls/9","head":{"ref":"fix"}},"repository":{"clone_url":"https://git.example.com/acme/shop.git","html_url":"https://git.example.com/acme/shop"}}`)
	res, err = f.m.Webhook(f.ctx, "gitea", http.Header{"X-Gitea-Event": {"pull_request"}, "X-Gitea-Signature": {sign(f.secret, gitea)}}, gitea)
	if err != nil || strings.Join(res.Destroying, ",") != "by-branch" {
		t.Fatalf("gitea (matched by repository and branch): %+v %v", res, err)
	}
	gitlab := []byte(`{"object_kind":"merge_request","object_attributes":{"action":"open","url":"https://git.example.com/acme/shop/-/merge_requests/3","source_branch":"main"},"project":{"git_http_url":"https://git.example.com/acme/shop.git"}}`)
	if _, err := f.m.Webhook(f.ctx, "gitlab", http.Header{"X-Gitlab-Event": {"Merge Request Hook"}, "X-Gitlab-Token": {"nope"}}, gitlab); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("gitlab with a wrong token: %v", err)
	}
	res, err = f.m.Webhook(f.ctx, "gitlab", http.Header{"X-Gitlab-Event": {"Merge Request Hook"}, "X-Gitlab-Token": {string(f.secret)}}, gitlab)
	if err != nil || len(res.Destroying) != 0 || res.Ignored == "" {
		t.Fatalf("an opened merge request destroys nothing: %+v %v", res, err)
	}
	push := []byte(`{"ref":"refs/heads/main"}`)
	res, err = f.m.Webhook(f.ctx, "github", http.Header{"X-Github-Event": {"push"}, "X-Hub-Signature-256": {"sha256=" + sign(f.secret, push)}}, push)
	if err != nil || len(res.Destroying) != 0 || !strings.Contains(res.Ignored, "push") {
		t.Fatalf("push: %+v %v", res, err)
	}
	if p := f.m.cached("other"); p == nil || p.Status != api.PreviewReady {
		t.Fatalf("an unrelated preview was touched: %+v", p)
	}
}

func replicas(n int32) *int32 { return &n }

func TestSleepWakeAndTTL(t *testing.T) {
	f := newFixture(t)
	if _, _, err := f.m.Deploy(f.ctx, f.alice, api.PreviewRequest{Name: "web-pr", Repository: f.repository, Branch: "main"}); err != nil {
		t.Fatal(err)
	}
	f.finishRun(t, "web-pr", api.PhaseSucceeded)
	waitFor(t, func() bool { p := f.m.cached("web-pr"); return p != nil && p.Status == api.PreviewReady })
	for _, d := range []*appsv1.Deployment{
		{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "web-pr"}, Spec: appsv1.DeploymentSpec{Replicas: replicas(2)}},
		{ObjectMeta: metav1.ObjectMeta{Name: "keep", Namespace: "web-pr", Labels: map[string]string{LabelPersistent: "true"}}, Spec: appsv1.DeploymentSpec{Replicas: replicas(1)}},
	} {
		if _, err := f.kc.AppsV1().Deployments("web-pr").Create(f.ctx, d, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	f.kc.AppsV1().StatefulSets("web-pr").Create(f.ctx, &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "web-pr"},
		Spec: appsv1.StatefulSetSpec{Replicas: replicas(1)}}, metav1.CreateOptions{})
	f.kc.NetworkingV1().Ingresses("web-pr").Create(f.ctx, &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "web-pr"},
		Spec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{Host: "web-web-pr.devtool.localhost",
			IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{Path: "/"}}}}}}}},
		metav1.CreateOptions{})

	f.now = f.now.Add(11 * time.Minute) // idle beyond SleepAfter
	f.m.Sweep(f.ctx)
	web, _ := f.kc.AppsV1().Deployments("web-pr").Get(f.ctx, "web", metav1.GetOptions{})
	keep, _ := f.kc.AppsV1().Deployments("web-pr").Get(f.ctx, "keep", metav1.GetOptions{})
	db, _ := f.kc.AppsV1().StatefulSets("web-pr").Get(f.ctx, "db", metav1.GetOptions{})
	if *web.Spec.Replicas != 0 || web.Annotations[AnnotationReplicas] != "2" || *db.Spec.Replicas != 0 || *keep.Spec.Replicas != 1 {
		t.Fatalf("asleep: web %d (%q), db %d, keep %d", *web.Spec.Replicas, web.Annotations[AnnotationReplicas], *db.Spec.Replicas, *keep.Spec.Replicas)
	}
	waitFor(t, func() bool { p := f.m.cached("web-pr"); return p != nil && p.Sleeping })
	if p, _ := f.m.Get(f.alice, "web-pr"); p.Status != api.PreviewSleeping {
		t.Fatalf("status %s", p.Status)
	}
	// a CLI command on it wakes it
	eps, woke, err := f.m.Endpoints(f.ctx, f.alice, "web-pr")
	if err != nil || !woke || len(eps) != 1 || eps[0].URL != "https://web-web-pr.devtool.localhost/" {
		t.Fatalf("endpoints %+v woke %v %v", eps, woke, err)
	}
	web, _ = f.kc.AppsV1().Deployments("web-pr").Get(f.ctx, "web", metav1.GetOptions{})
	if *web.Spec.Replicas != 2 {
		t.Fatalf("woken web has %d replicas", *web.Spec.Replicas)
	}
	if _, ok := web.Annotations[AnnotationReplicas]; ok {
		t.Fatal("the sleep annotation stayed")
	}
	waitFor(t, func() bool { p := f.m.cached("web-pr"); return p != nil && !p.Sleeping })

	f.now = f.now.Add(2 * time.Hour) // idle beyond TTL
	f.m.Sweep(f.ctx)
	waitFor(t, func() bool { p := f.m.cached("web-pr"); return p != nil && p.Status == api.PreviewDestroying })
	if p := f.m.cached("web-pr"); !strings.Contains(p.DestroyReason, "idle for more than 1h0m0s") {
		t.Fatalf("reason %q", p.DestroyReason)
	}
	if r := f.pl.LatestRun("web-pr", "web-pr"); r == nil || r.Action != api.ActionDestroy {
		t.Fatalf("no destroy run: %+v", r)
	}
	// Wake of a namespace that is no preview's is nothing
	if err := f.m.Wake(f.ctx, "alice"); err != nil {
		t.Fatal(err)
	}
}

func TestSameURLAndMatches(t *testing.T) {
	if !sameURL("https://GitHub.com/acme/shop.git", "https://github.com/acme/shop/") || sameURL("https://github.com/acme/shop", "https://github.com/acme/shop2") {
		t.Fatal("sameURL")
	}
	p := &Preview{Preview: api.Preview{Repository: "https://github.com/acme/shop", Branch: "x", SourceURL: "https://github.com/acme/shop/pull/1"}}
	if matches(p, &pullRequest{url: "https://github.com/acme/shop/pull/2", branch: "x", repositories: []string{"https://github.com/acme/shop.git"}}) {
		t.Fatal("a preview of pull request 1 matched pull request 2")
	}
}

func TestWakeSignature(t *testing.T) {
	key, now := []byte("wake-key-0123456789"), time.Unix(1_800_000_000, 0)
	ts := "1800000000"
	good := ts + "." + wakeMAC(key, "pr-1", ts)
	if err := CheckWake(key, good, "pr-1", now.Add(30*time.Second)); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		header, ns string
		at         time.Time
		key        []byte
	}{
		"another namespace": {good, "pr-2", now, key},
		"too old":           {good, "pr-1", now.Add(2 * time.Minute), key},
		"another key":       {good, "pr-1", now, []byte("other")},
		"no key":            {good, "pr-1", now, nil},
		"garbage":           {"x.y", "pr-1", now, key},
	} {
		if err := CheckWake(c.key, c.header, c.ns, c.at); !errors.Is(err, ErrBadWake) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

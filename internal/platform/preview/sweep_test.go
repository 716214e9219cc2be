package preview

import (
	"errors"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/devtool/devtool/internal/platform/api"
	"github.com/devtool/devtool/internal/platform/store"
)

// setStatus writes fields of a preview's record's status directly (as another version of the
// platform, a hand edit, or a destroy whose run the pipelines' cache has not seen yet leaves it).
func (f *fixture) setStatus(t *testing.T, name string, fields map[string]any) {
	t.Helper()
	res := f.st.Dyn.Resource(Resource).Namespace(f.st.Namespace)
	u, err := res.Get(f.ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range fields {
		_ = unstructuredSet(u.Object, v, "status", k)
	}
	if _, err := res.Update(f.ctx, u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		o, err := f.m.lister.ByNamespace(f.st.Namespace).Get(name)
		if err != nil {
			return false
		}
		status, _ := o.(*unstructured.Unstructured).Object["status"].(map[string]any)
		for k, v := range fields {
			if status[k] != v {
				return false
			}
		}
		return true
	})
}

func (f *fixture) namespaceExists(t *testing.T, name string) bool {
	t.Helper()
	_, err := f.kc.CoreV1().Namespaces().Get(f.ctx, name, metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	return err == nil
}

// TestSweepDeletesNothingUnreadable: the sweep destroys or removes a preview only on what it could
// read. A record whose last activity is missing or unparsable is not "idle since year 1": its
// activity is set to now (the TTL counts from there). A preview being destroyed whose destroy run
// the pipelines' cache does not show yet (its latest run is still the finished deploy), or whose
// runs cannot be read at all, keeps its namespace until its own destroy run ended, or
// destroyingFor passed.
func TestSweepDeletesNothingUnreadable(t *testing.T) {
	f := newFixture(t)
	for _, name := range []string{"garbled", "racing"} {
		if _, _, err := f.m.Deploy(f.ctx, f.alice, api.PreviewRequest{Name: name, Repository: f.repository, Branch: "main"}); err != nil {
			t.Fatal(err)
		}
		f.finishRun(t, name, api.PhaseSucceeded)
		waitFor(t, func() bool { p := f.m.cached(name); return p != nil && p.Status == api.PreviewReady })
	}
	f.now = f.now.Add(2 * time.Minute) // the deploy runs ended more than a minute ago

	f.setStatus(t, "garbled", map[string]any{"lastActivity": "last tuesday"})
	f.setStatus(t, "racing", map[string]any{"status": api.PreviewDestroying, "lastActivity": f.now.Format(time.RFC3339)})
	f.m.Sweep(f.ctx)
	if !f.namespaceExists(t, "garbled") || !f.namespaceExists(t, "racing") {
		t.Fatalf("namespaces deleted on what the sweep could not read: garbled %v, racing %v", f.namespaceExists(t, "garbled"), f.namespaceExists(t, "racing"))
	}
	if p := f.m.cached("garbled"); p == nil || p.Status != api.PreviewReady {
		t.Fatalf("garbled: %+v", p)
	}
	waitFor(t, func() bool { p := f.m.cached("garbled"); return p != nil && p.LastActivity.Equal(f.now) })
	if r := f.pl.LatestRun("garbled", "garbled"); r == nil || r.Action != api.ActionDeploy {
		t.Fatalf("a destroy run started for garbled: %+v", r)
	}

	// runs unreadable (none in the cache): still kept
	if err := f.pl.Forget(f.ctx, "racing", "racing"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return f.pl.LatestRun("racing", "racing") == nil })
	f.m.Sweep(f.ctx)
	if !f.namespaceExists(t, "racing") {
		t.Fatal("racing's namespace deleted while its runs could not be read")
	}

	// the fallback: destroyingFor after it started destroying, it goes
	f.now = f.now.Add(destroyingFor + time.Minute)
	f.m.Sweep(f.ctx)
	if f.namespaceExists(t, "racing") {
		t.Fatal("racing's namespace outlived destroyingFor")
	}
	// and the TTL counts from the repaired activity
	if p := f.m.cached("garbled"); p == nil || p.Status == api.PreviewDestroying {
		t.Fatalf("garbled destroyed before its TTL: %+v", p)
	}
}

// TestDestroyWaitsOutUnreadableSecrets: a destroy whose run cannot start because something could
// not be read just now (the preview's secrets: the API server answered 503) deletes nothing: the
// user gets the error, the sweep tries again on its next pass; only a run that can never start
// (the creator is gone) removes the namespace at once, without its destroy commands.
func TestDestroyWaitsOutUnreadableSecrets(t *testing.T) {
	f := newFixture(t)
	for name, u := range map[string]*store.User{"flaky": f.alice, "orphan": f.bob} {
		if _, _, err := f.m.Deploy(f.ctx, u, api.PreviewRequest{Name: name, Repository: f.repository, Branch: "main"}); err != nil {
			t.Fatal(err)
		}
		f.finishRun(t, name, api.PhaseSucceeded)
		waitFor(t, func() bool { p := f.m.cached(name); return p != nil && p.Status == api.PreviewReady })
	}
	broken := true
	f.kc.PrependReactor("get", "secrets", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if broken && a.GetNamespace() == "flaky" {
			return true, nil, apierrors.NewServiceUnavailable("etcd is busy")
		}
		return false, nil, nil
	})
	if _, err := f.m.Destroy(f.ctx, f.alice, "flaky"); err == nil || !strings.Contains(err.Error(), "etcd is busy") {
		t.Fatalf("destroy with unreadable secrets: %v, want the error", err)
	}
	// orphan's creator is removed: no destroy run can ever start for it
	if err := f.st.DeleteUser(f.ctx, "bob"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { _, err := f.st.GetUser("bob"); return err != nil })
	f.now = f.now.Add(2 * time.Hour) // beyond the TTL: the sweep tries too
	f.m.Sweep(f.ctx)
	if !f.namespaceExists(t, "flaky") {
		t.Fatal("the namespace was deleted without its destroy run because the secrets could not be read")
	}
	if f.namespaceExists(t, "orphan") {
		t.Fatal("the preview of a removed user was kept")
	}
	if p := f.m.cached("flaky"); p == nil || p.Status == api.PreviewDestroying {
		t.Fatalf("flaky: %+v", p)
	}
	broken = false
	f.m.Sweep(f.ctx)
	waitFor(t, func() bool { p := f.m.cached("flaky"); return p != nil && p.Status == api.PreviewDestroying })
	if r := f.pl.LatestRun("flaky", "flaky"); r == nil || r.Action != api.ActionDestroy {
		t.Fatalf("no destroy run once the secrets were readable: %+v", r)
	}

}

// TestDeployChecksTheRunFirst: a preview request whose run would be refused (a bad branch, file,
// variable or timeout) is refused before the preview's record or namespace is made.
func TestDeployChecksTheRunFirst(t *testing.T) {
	f := newFixture(t)
	for _, c := range []struct {
		req   api.PreviewRequest
		field string
	}{
		{api.PreviewRequest{Name: "bad-branch", Repository: f.repository, Branch: "a..b"}, "branch"},
		{api.PreviewRequest{Name: "bad-file", Repository: f.repository, File: "../x.yml"}, "file"},
		{api.PreviewRequest{Name: "bad-var", Repository: f.repository, Vars: []api.Var{{Name: "1X"}}}, "vars"},
		{api.PreviewRequest{Name: "bad-timeout", Repository: f.repository, TimeoutSeconds: 86401}, "timeoutSeconds"},
	} {
		var in *store.InputError
		if _, _, err := f.m.Deploy(f.ctx, f.alice, c.req); !errors.As(err, &in) || in.Field != c.field {
			t.Errorf("%s: %v, want a bad %s", c.req.Name, err, c.field)
		}
		if _, err := f.st.Dyn.Resource(Resource).Namespace(f.st.Namespace).Get(f.ctx, c.req.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("%s: its record was made (%v)", c.req.Name, err)
		}
		if f.namespaceExists(t, c.req.Name) {
			t.Errorf("%s: its namespace was made", c.req.Name)
		}
	}
}

// Package preview manages preview environments for the platform server: a Preview custom resource
// (previews.devtool.dev in the platform's namespace, named after the preview) with a namespace of
// the same name the platform owns, deployed and destroyed by pipeline runs with the creator's rights
// and the preview-scoped stored secrets only. Personal previews are seen and managed by their
// creator; global ones (admins only) are seen by every user, who gets the viewer role in them.
//
// Previews clean themselves up: a pull request's closing (Webhook: GitHub, GitLab and Gitea
// payloads, signature or token checked) and an idle time-to-live destroy them; an idle preview is
// scaled to zero (replicas kept in an annotation) and woken by any CLI command on it or by the
// ingress (Wake). The leader sweeps (RunController). The package never prints.
package preview

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	"github.com/devtool/devtool/internal/platform/api"
	"github.com/devtool/devtool/internal/platform/pipeline"
	"github.com/devtool/devtool/internal/platform/runspec"
	"github.com/devtool/devtool/internal/platform/store"
)

// Resource is the Preview custom resource.
var Resource = schema.GroupVersionResource{Group: store.Group, Version: store.Version, Resource: "previews"}

// Defaults of Options.
const (
	DefaultTTL        = 72 * time.Hour
	DefaultSleepAfter = 30 * time.Minute
	// touchEvery bounds how often activity is written to a preview's record (per replica).
	touchEvery = time.Minute
)

// Options configure a Manager.
type Options struct {
	Store     *store.Store
	Pipelines *pipeline.Manager
	// TTL destroys a preview idle that long; SleepAfter scales it to zero (0: never).
	TTL, SleepAfter time.Duration
	// WebhookSecret signs (GitHub, Gitea) or is (GitLab) the pull-request webhooks' secret.
	WebhookSecret []byte
	// EndpointURL makes an endpoint's URL of an Ingress rule's host and path (default https://host/path).
	EndpointURL func(host, path string) string
	Log         *slog.Logger
	Now         func() time.Time
}

// Preview is one preview: the API's view plus its record's version.
type Preview struct {
	api.Preview
	Sleeping        bool
	DestroyReason   string
	File            string
	ResourceVersion string
}

// Manager serves previews.
type Manager struct {
	o      Options
	lister cache.GenericLister
	synced cache.InformerSynced

	mu      sync.Mutex
	touched map[string]time.Time
}

// New makes a Manager; Start runs its informer.
func New(o Options) *Manager {
	if o.TTL == 0 {
		o.TTL = DefaultTTL
	}
	if o.SleepAfter < 0 {
		o.SleepAfter = 0
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.EndpointURL == nil {
		o.EndpointURL = func(host, path string) string { return "https://" + host + path }
	}
	return &Manager{o: o, touched: map[string]time.Time{}}
}

// Start runs the informer of previews until ctx ends and waits until it has synced.
func (m *Manager) Start(ctx context.Context) error {
	f := dynamicinformer.NewFilteredDynamicSharedInformerFactory(m.o.Store.Dyn, 0, m.o.Store.Namespace, nil)
	inf := f.ForResource(Resource)
	m.lister, m.synced = inf.Lister(), inf.Informer().HasSynced
	f.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), m.synced) {
		return fmt.Errorf("the cache of previews did not sync: %w", ctx.Err())
	}
	return nil
}

func (p *Preview) object(ns string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": store.Group + "/" + store.Version, "kind": "Preview",
		"metadata": map[string]any{"name": p.Name, "namespace": ns,
			"labels": map[string]any{"devtool.dev/preview-scope": p.Scope, store.LabelUser: p.Creator}},
		"spec": map[string]any{"namespace": p.Namespace, "scope": p.Scope, "repository": p.Repository, "branch": p.Branch,
			"sourceUrl": p.SourceURL, "file": p.File, "creator": p.Creator, "public": p.Public},
		"status": map[string]any{"status": p.Status, "lastActivity": p.LastActivity.UTC().Format(time.RFC3339),
			"sleeping": p.Sleeping, "destroyReason": p.DestroyReason},
	}}
	if p.ResourceVersion != "" {
		u.SetResourceVersion(p.ResourceVersion)
	}
	return u
}

func previewFrom(u *unstructured.Unstructured) *Preview {
	raw, _, _ := unstructured.NestedMap(u.Object, "spec") // a copy: u may be the informer's
	spec := map[string]string{}
	for k, v := range raw {
		if s, ok := v.(string); ok {
			spec[k] = s
		}
	}
	public, _ := raw["public"].(bool)
	status, _, _ := unstructured.NestedMap(u.Object, "status")
	str := func(k string) string { s, _ := status[k].(string); return s }
	p := &Preview{ResourceVersion: u.GetResourceVersion()}
	p.Public = public
	p.Name, p.Namespace, p.Scope, p.Repository = u.GetName(), spec["namespace"], spec["scope"], spec["repository"]
	p.Branch, p.SourceURL, p.File, p.Creator = spec["branch"], spec["sourceUrl"], spec["file"], spec["creator"]
	p.Status, p.DestroyReason = str("status"), str("destroyReason")
	p.Sleeping, _ = status["sleeping"].(bool)
	p.LastActivity, _ = time.Parse(time.RFC3339, str("lastActivity"))
	p.Created = u.GetCreationTimestamp().UTC()
	return p
}

// all lists every preview from the cache, by name.
func (m *Manager) all() []*Preview {
	objs, err := m.lister.ByNamespace(m.o.Store.Namespace).List(labels.Everything())
	if err != nil {
		return nil
	}
	out := make([]*Preview, 0, len(objs))
	for _, o := range objs {
		out = append(out, previewFrom(o.(*unstructured.Unstructured)))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (m *Manager) cached(name string) *Preview {
	o, err := m.lister.ByNamespace(m.o.Store.Namespace).Get(name)
	if err != nil {
		return nil
	}
	return previewFrom(o.(*unstructured.Unstructured))
}

// visible says whether caller sees p: its creator, or anyone for a global one.
func visible(p *Preview, caller *store.User) bool {
	return p.Scope == api.PreviewGlobal || p.Creator == caller.Name
}

// mayManage says whether caller may redeploy or destroy p: a personal one its creator, a global one
// an admin.
func mayManage(p *Preview, caller *store.User) error {
	switch {
	case p.Scope == api.PreviewGlobal && !caller.Admin:
		return fmt.Errorf("preview %q is global: only an admin may deploy or destroy it: %w", p.Name, store.ErrForbidden)
	case p.Scope != api.PreviewGlobal && p.Creator != caller.Name:
		return fmt.Errorf("preview %q: %w", p.Name, store.ErrNotFound)
	}
	return nil
}

// find is the preview name as caller sees it (ErrNotFound when it does not).
func (m *Manager) find(caller *store.User, name string) (*Preview, error) {
	p := m.cached(name)
	if p == nil || !visible(p, caller) {
		return nil, fmt.Errorf("preview %q: %w", name, store.ErrNotFound)
	}
	return p, nil
}

// API is the preview as the API answers it, with its latest run.
func (m *Manager) API(p *Preview) api.Preview {
	out := p.Preview
	if r := m.o.Pipelines.LatestRun(p.Namespace, p.Name); r != nil {
		run := r.API()
		out.Run = &run
	}
	if p.Sleeping && out.Status == api.PreviewReady {
		out.Status = api.PreviewSleeping
	}
	return out
}

// List answers the previews caller sees: its personal ones and every global one.
func (m *Manager) List(caller *store.User) []api.Preview {
	out := []api.Preview{}
	for _, p := range m.all() {
		if visible(p, caller) {
			out = append(out, m.API(p))
		}
	}
	return out
}

// Get answers one preview caller sees.
func (m *Manager) Get(caller *store.User, name string) (*api.Preview, error) {
	p, err := m.find(caller, name)
	if err != nil {
		return nil, err
	}
	out := m.API(p)
	return &out, nil
}

func checkRequest(req *api.PreviewRequest) error {
	if why := store.ValidNamespaceName(req.Name); why != "" {
		return &store.InputError{Field: "name", Reason: why + " (it names the preview's namespace)"}
	}
	switch req.Scope {
	case "":
		req.Scope = api.PreviewPersonal
	case api.PreviewPersonal, api.PreviewGlobal:
	default:
		return &store.InputError{Field: "scope", Reason: "personal or global"}
	}
	if _, err := runspec.CheckRepository(req.Repository); err != nil {
		return &store.InputError{Field: "repository", Reason: err.Error()}
	}
	if req.SourceURL != "" {
		if err := runspec.CheckSourceURL(req.SourceURL); err != nil {
			return &store.InputError{Field: "sourceUrl", Reason: err.Error()}
		}
	}
	// the run's fields (branch, file, vars, timeout), before the preview's record and namespace
	return pipeline.CheckRequest(runRequest(*req))
}

// runRequest is the deploy run of a preview's request (the preview's namespace and pipeline share
// its name).
func runRequest(req api.PreviewRequest) api.PipelineRequest {
	return api.PipelineRequest{Name: req.Name, Repository: req.Repository, Branch: req.Branch, File: req.File,
		Vars: req.Vars, TimeoutSeconds: req.TimeoutSeconds}
}

// Deploy creates preview req.Name (or redeploys it: its creator, or an admin for a global one) and
// starts the run that deploys it. created says it is new.
func (m *Manager) Deploy(ctx context.Context, caller *store.User, req api.PreviewRequest) (*api.Preview, bool, error) {
	if !m.o.Pipelines.Enabled() {
		return nil, false, pipeline.ErrNotConfigured
	}
	if err := checkRequest(&req); err != nil {
		return nil, false, err
	}
	if req.Scope == api.PreviewGlobal && !caller.Admin {
		return nil, false, fmt.Errorf("only an admin may deploy a global preview: %w", store.ErrForbidden)
	}
	res := m.o.Store.Dyn.Resource(Resource).Namespace(m.o.Store.Namespace)
	now := m.o.Now().UTC()
	created := false
	cur, err := res.Get(ctx, req.Name, metav1.GetOptions{})
	var p *Preview
	switch {
	case apierrors.IsNotFound(err):
		p = &Preview{Preview: api.Preview{Name: req.Name, Namespace: req.Name, Scope: req.Scope, Repository: req.Repository,
			Branch: req.Branch, SourceURL: req.SourceURL, Creator: caller.Name, Status: api.PreviewDeploying, LastActivity: now,
			Public: req.Public}, File: req.File}
		u, err := res.Create(ctx, p.object(m.o.Store.Namespace), metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil, false, fmt.Errorf("preview %q was just created by someone else: %w", req.Name, store.ErrConflict)
		} else if err != nil {
			return nil, false, fmt.Errorf("recording preview %s: %w", req.Name, err)
		}
		p, created = previewFrom(u), true
	case err != nil:
		return nil, false, err
	default:
		p = previewFrom(cur)
		if err := mayManage(p, caller); err != nil {
			if p.Scope != api.PreviewGlobal {
				return nil, false, fmt.Errorf("a preview named %q exists and is not yours: choose another name: %w", req.Name, store.ErrConflict)
			}
			return nil, false, err
		}
		if p.Status == api.PreviewDestroying {
			return nil, false, fmt.Errorf("preview %q is being destroyed: deploy it again once it is gone: %w", req.Name, store.ErrConflict)
		}
		if p.Scope != req.Scope {
			return nil, false, fmt.Errorf("preview %q is %s: its scope cannot change (destroy it first): %w", req.Name, p.Scope, store.ErrConflict)
		}
	}
	if err := m.o.Store.EnsurePreviewNamespace(ctx, p.Namespace, p.Creator, p.Scope == api.PreviewGlobal, req.Public); err != nil {
		if created {
			_ = res.Delete(context.WithoutCancel(ctx), p.Name, metav1.DeleteOptions{})
		}
		return nil, false, err
	}
	if p.Sleeping {
		if err := m.wake(ctx, p); err != nil {
			return nil, false, err
		}
	}
	creator, err := m.o.Store.GetUser(p.Creator)
	if err != nil {
		return nil, false, fmt.Errorf("preview %q: its creator %s: %w", p.Name, p.Creator, err)
	}
	secrets, err := m.o.Store.ResolvePreviewSecrets(ctx, creator, p.Namespace)
	if err != nil {
		return nil, false, err
	}
	run, err := m.o.Pipelines.Submit(ctx, creator, p.Namespace, runRequest(req),
		pipeline.SubmitOptions{Secrets: secrets, Preview: p.Name, Trusted: true})
	if err != nil {
		return nil, false, err
	}
	p, err = m.update(ctx, p.Name, func(x *Preview) {
		x.Repository, x.Branch, x.File, x.Status, x.LastActivity, x.Public = req.Repository, req.Branch, req.File, api.PreviewDeploying, now, req.Public
		if req.SourceURL != "" {
			x.SourceURL = req.SourceURL
		}
	})
	if err != nil {
		return nil, false, err
	}
	out := p.Preview
	a := run.API()
	out.Run = &a
	return &out, created, nil
}

// update changes a preview's record (resourceVersion-guarded, retried on a fresh copy).
func (m *Manager) update(ctx context.Context, name string, change func(*Preview)) (*Preview, error) {
	res := m.o.Store.Dyn.Resource(Resource).Namespace(m.o.Store.Namespace)
	for attempt := 0; ; attempt++ {
		cur, err := res.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("reading preview %s: %w", name, err)
		}
		p := previewFrom(cur)
		change(p)
		u, err := res.Update(ctx, p.object(m.o.Store.Namespace), metav1.UpdateOptions{})
		if err == nil {
			return previewFrom(u), nil
		}
		if !apierrors.IsConflict(err) || attempt >= 5 {
			return nil, fmt.Errorf("recording preview %s: %w", name, err)
		}
	}
}

// Destroy starts the destroy of preview name for caller (its creator; an admin for a global one).
func (m *Manager) Destroy(ctx context.Context, caller *store.User, name string) (*api.Preview, error) {
	p, err := m.find(caller, name)
	if err != nil {
		return nil, err
	}
	if err := mayManage(p, caller); err != nil {
		return nil, err
	}
	return m.destroy(ctx, p, "destroyed by "+caller.Name, true)
}

// destroy runs the destroy of p as its creator (the manifest's destroy commands); when the run
// ends, the leader deletes the namespace and the record (OnRunFinished). When no run can ever start
// (no repository to clone, the creator is gone, a deploy is going on and force), the namespace is
// deleted at once; when one could not start just now (runCannotStart false), nothing changes and
// the error is returned.
func (m *Manager) destroy(ctx context.Context, p *Preview, reason string, userAsked bool) (*api.Preview, error) {
	if p.Status == api.PreviewDestroying {
		out := m.API(p)
		return &out, nil
	}
	var run *pipeline.Run
	creator, err := m.o.Store.GetUser(p.Creator)
	if err == nil {
		secrets, serr := m.o.Store.ResolvePreviewSecrets(ctx, creator, p.Namespace)
		if serr == nil {
			if p.Sleeping {
				_ = m.wake(ctx, p) // destroy commands may need the services up
			}
			run, err = m.o.Pipelines.Submit(ctx, creator, p.Namespace, api.PipelineRequest{Name: p.Name, Action: api.ActionDestroy},
				pipeline.SubmitOptions{Secrets: secrets, Preview: p.Name, Trusted: true})
		} else {
			err = serr
		}
	}
	if err != nil && userAsked && errorsIsConflict(err) {
		return nil, err // a deploy is going on: the user waits for it
	}
	if err != nil && !runCannotStart(err) {
		// something could not be read or written just now (the secrets, the run's token or Job):
		// nothing is deleted without its destroy commands; the user or the next sweep tries again
		return nil, fmt.Errorf("destroying preview %s: its destroy run did not start: %w", p.Name, err)
	}
	now := m.o.Now().UTC()
	up, uerr := m.update(ctx, p.Name, func(x *Preview) { x.Status, x.DestroyReason, x.LastActivity = api.PreviewDestroying, reason, now })
	if uerr != nil {
		return nil, uerr
	}
	if err != nil {
		m.o.Log.Warn("preview destroyed without its destroy commands", "preview", p.Name, "reason", reason, "err", err)
		if derr := m.remove(ctx, up, true); derr != nil {
			return nil, derr
		}
	}
	out := up.Preview
	if run != nil {
		a := run.API()
		out.Run = &a
	}
	return &out, nil
}

// runCannotStart says whether err means that no destroy run can ever start for the preview (its
// creator is gone, it has no repository, the creator lost the right, pipelines are off, a deploy
// runs and the destroy is forced), so it is removed at once without one, rather than a failure to
// read or write that may pass.
func runCannotStart(err error) bool {
	var ie *store.InputError
	return errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrForbidden) || errors.Is(err, store.ErrConflict) ||
		errors.Is(err, pipeline.ErrNotConfigured) || errors.As(err, &ie)
}

// remove deletes the preview's namespace and record.
// Its runs' records are forgotten now when forget says so, else by the sweep a minute after they
// ended (ForgetOrphans), so the `preview destroy` following the destroy run reads its result.
func (m *Manager) remove(ctx context.Context, p *Preview, forget bool) error {
	if err := m.o.Store.DeletePreviewNamespace(ctx, p.Namespace); err != nil {
		return fmt.Errorf("deleting the namespace of preview %s: %w", p.Name, err)
	}
	if forget {
		if err := m.o.Pipelines.Forget(ctx, p.Namespace, p.Name); err != nil {
			m.o.Log.Warn("the runs of a removed preview were not deleted", "preview", p.Name, "err", err)
		}
	}
	err := m.o.Store.Dyn.Resource(Resource).Namespace(m.o.Store.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	m.o.Log.Info("preview removed", "preview", p.Name, "reason", p.DestroyReason)
	return nil
}

// OnRunFinished is the pipelines' OnFinish hook (called by the leader): a preview's deploy run
// sets its status; its destroy run (whatever its result) removes it.
func (m *Manager) OnRunFinished(ctx context.Context, r *pipeline.Run) {
	if r.Preview == "" {
		return
	}
	p := m.cached(r.Preview)
	if p == nil {
		return
	}
	if r.Action == api.ActionDestroy {
		if err := m.remove(ctx, p, false); err != nil {
			m.o.Log.Warn("preview not removed", "preview", p.Name, "err", err)
		}
		return
	}
	status := api.PreviewReady
	if r.Phase != api.PhaseSucceeded {
		status = api.PreviewFailed
	}
	if _, err := m.update(ctx, p.Name, func(x *Preview) {
		if x.Status == api.PreviewDeploying {
			x.Status = status
		}
	}); err != nil {
		m.o.Log.Warn("preview status not recorded", "preview", p.Name, "err", err)
	}
}

// Touch records activity on a preview (at most once a minute per replica).
func (m *Manager) Touch(ctx context.Context, name string) {
	now := m.o.Now()
	m.mu.Lock()
	last := m.touched[name]
	if now.Sub(last) < touchEvery {
		m.mu.Unlock()
		return
	}
	m.touched[name] = now
	for k, t := range m.touched { // forget old entries
		if now.Sub(t) > time.Hour {
			delete(m.touched, k)
		}
	}
	m.mu.Unlock()
	if _, err := m.update(ctx, name, func(x *Preview) { x.LastActivity = now.UTC() }); err != nil && !apierrors.IsNotFound(err) {
		m.o.Log.Warn("preview activity not recorded", "preview", name, "err", err)
	}
}

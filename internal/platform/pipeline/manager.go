package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	"github.com/devtool/devtool/internal/platform/api"
	"github.com/devtool/devtool/internal/platform/pki"
	"github.com/devtool/devtool/internal/platform/store"
)

// Defaults of Options.
const (
	DefaultKeepRuns = 5
	DefaultLogBytes = 512 << 10
	DefaultTimeout  = 5 * time.Minute
	MaxTimeout      = 24 * time.Hour
)

// ErrNotConfigured is the answer when the platform was installed without a runner image.
var ErrNotConfigured = errors.New("pipelines are not set up on this platform: it was installed without a runner image")

// Options configure a Manager.
type Options struct {
	Store *store.Store
	// RunnerImage is the image of the runner (devtool, kubectl, helm, busybox); "" disables runs.
	RunnerImage string
	// KeepRuns is how many runs of each pipeline are kept with their logs (default 5).
	KeepRuns int
	// LogBytes bounds the log of a finished run that is read back: its last LogBytes (default 512 KiB).
	LogBytes int64
	// CA is trusted by the runner for https clones besides the system's roots (PEM; the platform's CA).
	CA []byte
	// Domain, Registry, IngressClass and EndpointPort are the platform's, handed to the runs
	// (endpoints' host names, class and port; images).
	Domain, Registry, IngressClass string
	EndpointPort                   int
	// Builder is the hosted BuildKit (tcp://host:port) and BuilderCA the CA that signs its clients'
	// certificates: each run gets a client certificate for its user, sized to its timeout, and
	// builds there (Registry is then the hosted registry, pushed to with the user's token). Both
	// or neither.
	Builder   string
	BuilderCA *pki.CA
	// Forwards are `devtool-platform forward` rules (LISTEN=TO) for the addresses that mean
	// something else in a pod than on the node (the local cluster's loopback node ports of the
	// builder and registry: install.LoopbackForwards); ForwardImage (the platform's image) runs
	// them as the Job's sidecar. None: no sidecar.
	Forwards     []string
	ForwardImage string
	Log          *slog.Logger
	Now          func() time.Time
	// OnFinish is called by the leader once a run finished and was recorded (previews hook here).
	OnFinish func(context.Context, *Run)
}

// Manager starts runs, answers about them and (on the leader) finishes them.
type Manager struct {
	o      Options
	runs   cache.GenericLister
	synced cache.InformerSynced

	mu      sync.Mutex
	changed chan struct{} // closed and replaced whenever a run changes
}

// New makes a Manager; Start runs its informer.
func New(o Options) *Manager {
	if o.KeepRuns <= 0 {
		o.KeepRuns = DefaultKeepRuns
	}
	if o.LogBytes <= 0 {
		o.LogBytes = DefaultLogBytes
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Manager{o: o, changed: make(chan struct{})}
}

// Enabled says whether runs can be started (a runner image is configured).
func (m *Manager) Enabled() bool { return m.o.RunnerImage != "" }

// Start runs the informer of the runs until ctx ends and waits until it has synced.
func (m *Manager) Start(ctx context.Context) error {
	f := dynamicinformer.NewFilteredDynamicSharedInformerFactory(m.o.Store.Dyn, 0, m.o.Store.Namespace, nil)
	inf := f.ForResource(RunResource)
	m.runs = inf.Lister()
	m.synced = inf.Informer().HasSynced
	notify := func(any) { m.notify() }
	if _, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: notify, UpdateFunc: func(_, o any) { notify(o) }, DeleteFunc: notify,
	}); err != nil {
		return err
	}
	f.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), m.synced) {
		return fmt.Errorf("the cache of pipeline runs did not sync: %w", ctx.Err())
	}
	return nil
}

// Synced says whether the informer has synced.
func (m *Manager) Synced() bool { return m.synced != nil && m.synced() }

func (m *Manager) notify() {
	m.mu.Lock()
	close(m.changed)
	m.changed = make(chan struct{})
	m.mu.Unlock()
}

func (m *Manager) changes() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.changed
}

// cachedRuns lists the runs of pipeline name in ns from the cache ("" name: every pipeline of ns).
func (m *Manager) cachedRuns(ns, name string) ([]*Run, error) {
	set := labels.Set{LabelNamespace: ns}
	if name != "" {
		set[LabelPipeline] = name
	}
	objs, err := m.runs.ByNamespace(m.o.Store.Namespace).List(labels.SelectorFromSet(set))
	if err != nil {
		return nil, err
	}
	out := make([]*Run, 0, len(objs))
	for _, o := range objs {
		out = append(out, runFrom(o.(*unstructured.Unstructured)))
	}
	newestFirst(out)
	return out, nil
}

// liveRuns lists the runs of pipeline name in ns from the API server (for decisions that must not
// act on a stale cache: the one-run-at-a-time check).
func (m *Manager) liveRuns(ctx context.Context, ns, name string) ([]*Run, error) {
	sel := labels.SelectorFromSet(labels.Set{LabelNamespace: ns, LabelPipeline: name}).String()
	l, err := m.o.Store.Dyn.Resource(RunResource).Namespace(m.o.Store.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, fmt.Errorf("listing the runs of pipeline %s: %w", name, err)
	}
	out := make([]*Run, 0, len(l.Items))
	for i := range l.Items {
		out = append(out, runFrom(&l.Items[i]))
	}
	newestFirst(out)
	return out, nil
}

// memberRole is the caller's role in ns; not a member (or not a namespace of the platform) is
// store.ErrNotFound, so names never leak.
func (m *Manager) memberRole(caller *store.User, ns string) (string, error) {
	role := m.o.Store.RoleIn(caller.Name, ns)
	if role == "" || m.o.Store.ManagedNamespace(ns) == nil {
		return "", fmt.Errorf("namespace %q: %w", ns, store.ErrNotFound)
	}
	return role, nil
}

// find returns run ("latest" or a number) of pipeline name in ns, from the cache, for a member.
func (m *Manager) find(caller *store.User, ns, name, run string) (*Run, error) {
	if _, err := m.memberRole(caller, ns); err != nil {
		return nil, err
	}
	rs, err := m.cachedRuns(ns, name)
	if err != nil {
		return nil, err
	}
	if len(rs) == 0 {
		return nil, fmt.Errorf("pipeline %q in namespace %q: %w", name, ns, store.ErrNotFound)
	}
	if run == "" || run == "latest" {
		return rs[0], nil
	}
	n, err := strconv.Atoi(run)
	if err != nil || n < 1 {
		return nil, &store.InputError{Field: "run", Reason: "a run number (1, 2, ...) or latest"}
	}
	for _, r := range rs {
		if r.Number == n {
			return r, nil
		}
	}
	return nil, fmt.Errorf("run %d of pipeline %q: %w (the platform keeps the last %d runs of a pipeline)", n, name, store.ErrNotFound, m.o.KeepRuns)
}

// Get answers one run for a member of its namespace.
func (m *Manager) Get(caller *store.User, ns, name, run string) (*Run, error) {
	return m.find(caller, ns, name, run)
}

// Wait answers the run once it has finished, or after d (at most a minute), whichever is first.
func (m *Manager) Wait(ctx context.Context, caller *store.User, ns, name, run string, d time.Duration) (*Run, error) {
	d = min(max(d, 0), time.Minute)
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		ch := m.changes()
		r, err := m.find(caller, ns, name, run)
		if err != nil || api.Finished(r.Phase) || d == 0 {
			return r, err
		}
		run = strconv.Itoa(r.Number) // "latest" stays the run it was
		select {
		case <-ch:
		case <-timer.C:
			return r, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Pipeline is the state of one pipeline with its kept runs.
func (m *Manager) Pipeline(caller *store.User, ns, name string) (*api.Pipeline, error) {
	if _, err := m.memberRole(caller, ns); err != nil {
		return nil, err
	}
	rs, err := m.cachedRuns(ns, name)
	if err != nil {
		return nil, err
	}
	if len(rs) == 0 {
		return nil, fmt.Errorf("pipeline %q in namespace %q: %w", name, ns, store.ErrNotFound)
	}
	p := summary(rs[0])
	for _, r := range rs {
		p.Runs = append(p.Runs, r.API())
	}
	return &p, nil
}

func summary(latest *Run) api.Pipeline {
	return api.Pipeline{Namespace: latest.Namespace, Name: latest.Name, Repository: latest.Repository,
		Branch: latest.Branch, Commit: latest.Commit, Status: latest.Phase}
}

// Pipelines lists the pipelines of ns (their latest runs) for a member.
func (m *Manager) Pipelines(caller *store.User, ns string) ([]api.Pipeline, error) {
	if _, err := m.memberRole(caller, ns); err != nil {
		return nil, err
	}
	rs, err := m.cachedRuns(ns, "")
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	out := []api.Pipeline{}
	for _, r := range rs {
		if seen[r.Name] {
			continue
		}
		seen[r.Name] = true
		out = append(out, summary(m.latestCached(ns, r.Name, r)))
	}
	return out, nil
}

func (m *Manager) latestCached(ns, name string, fallback *Run) *Run {
	if rs, err := m.cachedRuns(ns, name); err == nil && len(rs) > 0 {
		return rs[0]
	}
	return fallback
}

// cached is run n of pipeline name in ns from the cache (nil when it is not there).
func (m *Manager) cached(ns, name string, n int) *Run {
	o, err := m.runs.ByNamespace(m.o.Store.Namespace).Get(ID(ns, name, n))
	if err != nil {
		return nil
	}
	return runFrom(o.(*unstructured.Unstructured))
}

// LatestRun is the newest run of a pipeline from the cache (nil when none), for the platform's own
// use (previews).
func (m *Manager) LatestRun(ns, name string) *Run {
	rs, err := m.cachedRuns(ns, name)
	if err != nil || len(rs) == 0 {
		return nil
	}
	return rs[0]
}

// Forget deletes the records of every run of pipeline name in ns (their token anchors go with
// them): for a namespace that is gone, as a removed preview's.
func (m *Manager) Forget(ctx context.Context, ns, name string) error {
	runs, err := m.liveRuns(ctx, ns, name) // (a few: KeepRuns; one by one, as the leader prunes)
	if err != nil {
		return err
	}
	res := m.o.Store.Dyn.Resource(RunResource).Namespace(m.o.Store.Namespace)
	for _, r := range runs {
		if err := res.Delete(ctx, ID(r.Namespace, r.Name, r.Number), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting the runs of pipeline %s in %s: %w", name, ns, err)
		}
	}
	return nil
}

// ForgetOrphans deletes the records of the preview runs whose preview is gone (exists says no)
// and which finished more than after ago: a removed preview's runs are kept that long, so the
// `preview destroy` that follows its destroy run reads the run's result. Called by the leader's
// preview sweep.
func (m *Manager) ForgetOrphans(ctx context.Context, exists func(preview string) bool, after time.Duration) {
	objs, err := m.runs.ByNamespace(m.o.Store.Namespace).List(labels.Everything())
	if err != nil {
		return
	}
	now := m.o.Now()
	done := map[[2]string]bool{}
	for _, o := range objs {
		r := runFrom(o.(*unstructured.Unstructured))
		key := [2]string{r.Namespace, r.Name}
		if r.Preview == "" || done[key] || exists(r.Preview) || !api.Finished(r.Phase) || r.Finished == nil || now.Sub(*r.Finished) < after {
			continue
		}
		done[key] = true
		if err := m.Forget(ctx, r.Namespace, r.Name); err != nil {
			m.o.Log.Warn("the runs of a removed preview were not deleted", "preview", r.Preview, "err", err)
		}
	}
}

// update writes r back (resourceVersion-guarded), retrying a conflict on a fresh copy with change
// applied again.
func (m *Manager) update(ctx context.Context, r *Run, change func(*Run)) (*Run, error) {
	res := m.o.Store.Dyn.Resource(RunResource).Namespace(m.o.Store.Namespace)
	id := ID(r.Namespace, r.Name, r.Number)
	for attempt := 0; ; attempt++ {
		change(r)
		u, err := res.Update(ctx, r.object(m.o.Store.Namespace), metav1.UpdateOptions{})
		if err == nil {
			return runFrom(u), nil
		}
		if !apierrors.IsConflict(err) || attempt >= 5 {
			return nil, fmt.Errorf("recording run %s: %w", id, err)
		}
		fresh, gerr := res.Get(ctx, id, metav1.GetOptions{})
		if gerr != nil {
			return nil, fmt.Errorf("recording run %s: %w", id, gerr)
		}
		r = runFrom(fresh)
	}
}

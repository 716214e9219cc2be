package preview

import (
	"context"
	"fmt"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devtool/devtool/internal/platform/api"
	"github.com/devtool/devtool/internal/platform/store"
)

// sweepEvery is how often the leader looks for idle previews.
const sweepEvery = 30 * time.Second

// destroyingFor is how long a preview may stay Destroying before the sweep removes it without
// waiting any longer for its destroy run.
const destroyingFor = 30 * time.Minute

// RunController sweeps previews until ctx ends; run it on the leader only. A preview idle longer
// than TTL is destroyed; one idle longer than SleepAfter is put to sleep.
func (m *Manager) RunController(ctx context.Context) {
	t := time.NewTicker(sweepEvery)
	defer t.Stop()
	for {
		m.Sweep(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Sweep is one pass of RunController. It destroys, removes or puts to sleep only on what it read:
// a record without a readable last activity gets now as its activity (the TTL counts from there),
// and a preview being destroyed is removed once its own destroy run ended, never because its runs
// cannot be read or the cache does not show its destroy run yet (after destroyingFor it is).
func (m *Manager) Sweep(ctx context.Context) {
	now := m.o.Now()
	for _, p := range m.all() {
		if p.LastActivity.IsZero() {
			m.o.Log.Warn("preview without a readable last activity: counting its idle time from now", "preview", p.Name)
			if _, err := m.update(ctx, p.Name, func(x *Preview) {
				if x.LastActivity.IsZero() {
					x.LastActivity = now.UTC()
				}
			}); err != nil {
				m.o.Log.Warn("preview activity not recorded", "preview", p.Name, "err", err)
			}
			continue
		}
		idle := now.Sub(p.LastActivity)
		switch {
		case p.Status == api.PreviewDestroying:
			r := m.o.Pipelines.LatestRun(p.Namespace, p.Name)
			runOver := r != nil && r.Action == api.ActionDestroy && api.Finished(r.Phase) && (r.Finished == nil || now.Sub(*r.Finished) > time.Minute)
			if runOver || idle > destroyingFor { // OnRunFinished missed it, or the destroy hangs
				if err := m.remove(ctx, p, true); err != nil {
					m.o.Log.Warn("preview not removed", "preview", p.Name, "err", err)
				}
			}
		case idle > m.o.TTL:
			if _, err := m.destroy(ctx, p, fmt.Sprintf("idle for more than %s", m.o.TTL), false); err != nil {
				m.o.Log.Warn("idle preview not destroyed", "preview", p.Name, "err", err)
			}
		case m.o.SleepAfter > 0 && idle > m.o.SleepAfter && !p.Sleeping && p.Status == api.PreviewReady:
			if err := m.sleep(ctx, p); err != nil {
				m.o.Log.Warn("idle preview not put to sleep", "preview", p.Name, "err", err)
			} else {
				m.o.Log.Info("preview put to sleep", "preview", p.Name, "idle", idle.Round(time.Second).String())
			}
		}
	}
	m.o.Pipelines.ForgetOrphans(ctx, func(name string) bool { return m.cached(name) != nil }, forgetRunsAfter)
}

// forgetRunsAfter is how long a removed preview's finished runs are kept (for the CLI following
// its destroy run).
const forgetRunsAfter = time.Minute

// Endpoints lists the URLs of preview name's Ingresses, read as caller (a member: its creator, or
// any user for a global one). A sleeping preview is woken (woke says so: its pods are starting).
func (m *Manager) Endpoints(ctx context.Context, caller *store.User, name string) (eps []api.Endpoint, woke bool, err error) {
	p, err := m.find(caller, name)
	if err != nil {
		return nil, false, err
	}
	if p.Sleeping && p.Status != api.PreviewDestroying {
		if err := m.wake(ctx, p); err != nil {
			return nil, false, err
		}
		woke = true
	} else {
		m.Touch(ctx, name)
	}
	kc, err := m.o.Store.AsUser(caller.Name)
	if err != nil {
		return nil, false, err
	}
	l, err := kc.NetworkingV1().Ingresses(p.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, false, fmt.Errorf("listing the Ingresses of preview %s: %w", name, err)
	}
	return endpoints(l.Items, m.o.EndpointURL), woke, nil
}

func endpoints(ings []networkingv1.Ingress, makeURL func(host, path string) string) []api.Endpoint {
	out := []api.Endpoint{}
	seen := map[string]bool{}
	for _, ing := range ings {
		for _, r := range ing.Spec.Rules {
			if r.Host == "" || r.HTTP == nil {
				continue
			}
			for _, p := range r.HTTP.Paths {
				path := p.Path
				if path == "" {
					path = "/"
				}
				u := makeURL(r.Host, path)
				if !seen[u] {
					seen[u] = true
					out = append(out, api.Endpoint{Name: ing.Name, URL: u})
				}
			}
		}
	}
	return out
}

// WakeByName wakes preview name for caller (a CLI command on it).
func (m *Manager) WakeByName(ctx context.Context, caller *store.User, name string) (*api.Preview, error) {
	p, err := m.find(caller, name)
	if err != nil {
		return nil, err
	}
	if p.Sleeping {
		if err := m.wake(ctx, p); err != nil {
			return nil, err
		}
	} else {
		m.Touch(ctx, name)
	}
	return m.Get(caller, name)
}

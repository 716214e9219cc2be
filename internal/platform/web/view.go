package web

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/devtool/devtool/internal/deploy"
	"github.com/devtool/devtool/internal/dev"
	"github.com/devtool/devtool/internal/kube"
	"github.com/devtool/devtool/internal/logs"
	"github.com/devtool/devtool/internal/platform/store"
)

// The cluster reads behind the pages, shared by the platform's UI and `devtool ui`: what devtool
// itself writes (the state ConfigMaps of deployed environments, the dev containers' Leases) and the
// environments' pods, Services and Ingresses. Each read is one list call made with the caller's
// client (the signed-in user's, impersonated, or the kubeconfig's), so a page shows only what that
// account may read: a section the account may not read says so instead of failing the page.

// EnvSummary is one environment in a namespace's list.
type EnvSummary struct {
	Name       string
	Status     string
	Updated    time.Time
	Error      string
	Repository string
	Branch     string
	Pods       int
	Ready      int
	Endpoints  []deploy.PublicEndpoint
	Devs       []string
}

// PodView is one pod.
type PodView struct {
	Name     string
	Service  string
	Phase    string // Running, Pending, ... or the waiting/terminated reason of a container
	Ready    string // "1/2"
	AllReady bool
	Restarts int32
	Created  time.Time
	Dev      string // the dev container it runs, if any
	Env      string
}

// ServiceView is one Service.
type ServiceView struct {
	Name, Type, Ports string
}

// DevView is one dev container active in a namespace: its Lease (who runs `up`) and its pods.
type DevView struct {
	Name     string
	Env      string
	Holder   string // user@host in folder (pid N)
	Live     bool   // the lease is renewed: an `up` runs
	HasLease bool
	Since    time.Time
	Renewed  time.Time
	Pods     []PodView
	Local    *LocalDev // devtool ui only: the local `up`'s sync state
}

// QuotaLine is one resource of a namespace's quota.
type QuotaLine struct {
	Resource, Used, Hard string
}

// NamespaceView is what a namespace's page shows.
type NamespaceView struct {
	Envs  []EnvSummary
	Devs  []DevView
	Quota []QuotaLine
	// Problems name sections the account could not read, by section.
	Problems map[string]string
}

// EnvDetail is what an environment's page shows.
type EnvDetail struct {
	Name      string
	State     *deploy.State // nil: no record (never deployed with devtool, or destroyed)
	Services  []ServiceView
	Pods      []PodView
	Endpoints []deploy.PublicEndpoint
	Devs      []DevView
	Problems  map[string]string
}

// sections collect the problems of a page's reads: a refusal becomes a problem of its section
// (apierrors sees through the libraries' wrapping), a missing object is no problem, other errors
// fail the page.
type sections struct {
	problems map[string]string
}

func (s *sections) note(name string, err error) error {
	if err == nil {
		return nil
	}
	switch {
	case apierrors.IsForbidden(err):
		s.problems[name] = "your role in this namespace may not read this"
		return nil
	case apierrors.IsNotFound(err):
		return nil
	}
	return fmt.Errorf("reading %s: %w", name, err)
}

// ReadNamespace reads a namespace's environments, dev containers and quota. port is the HTTPS port
// endpoints answer on (0: 443), as deploy.Endpoints takes it.
func ReadNamespace(ctx context.Context, kc kubernetes.Interface, ns string, port int, now time.Time) (*NamespaceView, error) {
	v := &NamespaceView{Problems: map[string]string{}}
	sec := &sections{problems: map[string]string{}}
	var (
		states  []*deploy.State
		pods    *corev1.PodList
		ings    map[string][]deploy.PublicEndpoint
		leases  *coordinationv1.LeaseList
		quota   *corev1.ResourceQuota
		errPods error
	)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		var err error
		states, err = (&deploy.StateStore{Clientset: kc, Namespace: ns}).List(gctx)
		return sec.note("environments", err)
	})
	g.Go(func() error {
		pods, errPods = kc.CoreV1().Pods(ns).List(gctx, metav1.ListOptions{})
		return nil
	})
	g.Go(func() error {
		var err error
		ings, err = endpointsByEnv(gctx, kc, ns, "", port)
		return sec.note("endpoints", err)
	})
	g.Go(func() error {
		var err error
		leases, err = kc.CoordinationV1().Leases(ns).List(gctx, metav1.ListOptions{LabelSelector: dev.LabelDev})
		return sec.note("dev containers", err)
	})
	g.Go(func() error {
		var err error
		quota, err = kc.CoreV1().ResourceQuotas(ns).Get(gctx, store.QuotaName, metav1.GetOptions{})
		return sec.note("quota", err)
	})
	if err := g.Wait(); err != nil {
		return nil, err
	}
	if err := sec.note("pods", errPods); err != nil {
		return nil, err
	}
	v.Problems = sec.problems
	podViews := podsOf(pods, now)
	byEnv := map[string][]PodView{}
	for _, p := range podViews {
		if p.Env != "" {
			byEnv[p.Env] = append(byEnv[p.Env], p)
		}
	}
	v.Devs = devsOf(leases, podViews, now, "")
	devsByEnv := map[string][]string{}
	for _, d := range v.Devs {
		if d.Env != "" {
			devsByEnv[d.Env] = append(devsByEnv[d.Env], d.Name)
		}
	}
	for _, st := range states {
		e := EnvSummary{Name: st.Name, Status: st.Status, Updated: st.Updated, Error: st.Error,
			Repository: st.Repository, Branch: st.Branch, Endpoints: ings[st.Name], Devs: devsByEnv[st.Name]}
		for _, p := range byEnv[st.Name] {
			e.Pods++
			if p.AllReady {
				e.Ready++
			}
		}
		v.Envs = append(v.Envs, e)
	}
	if quota != nil {
		v.Quota = quotaLines(quota)
	}
	return v, nil
}

// ReadEnvironment reads one environment: its record, Services, pods, endpoints and dev containers.
func ReadEnvironment(ctx context.Context, kc kubernetes.Interface, ns, env string, port int, now time.Time) (*EnvDetail, error) {
	d := &EnvDetail{Name: env}
	sec := &sections{problems: map[string]string{}}
	sel := logs.Selector(env)
	var (
		pods   *corev1.PodList
		svcs   *corev1.ServiceList
		leases *coordinationv1.LeaseList
		ings   map[string][]deploy.PublicEndpoint
	)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		var err error
		d.State, err = (&deploy.StateStore{Clientset: kc, Namespace: ns}).Get(gctx, env)
		return sec.note("status", err)
	})
	g.Go(func() error {
		var err error
		pods, err = kc.CoreV1().Pods(ns).List(gctx, metav1.ListOptions{LabelSelector: sel})
		return sec.note("pods", err)
	})
	g.Go(func() error {
		var err error
		svcs, err = kc.CoreV1().Services(ns).List(gctx, metav1.ListOptions{LabelSelector: sel})
		return sec.note("services", err)
	})
	g.Go(func() error {
		var err error
		ings, err = endpointsByEnv(gctx, kc, ns, env, port)
		return sec.note("endpoints", err)
	})
	g.Go(func() error {
		var err error
		leases, err = kc.CoordinationV1().Leases(ns).List(gctx, metav1.ListOptions{LabelSelector: dev.LabelDev})
		return sec.note("dev containers", err)
	})
	if err := g.Wait(); err != nil {
		return nil, err
	}
	d.Problems = sec.problems
	d.Pods = podsOf(pods, now)
	d.Endpoints = ings[env]
	if svcs != nil {
		for _, s := range svcs.Items {
			var ports []string
			for _, p := range s.Spec.Ports {
				ports = append(ports, fmt.Sprintf("%d/%s", p.Port, p.Protocol))
			}
			d.Services = append(d.Services, ServiceView{Name: s.Name, Type: string(s.Spec.Type), Ports: strings.Join(ports, ", ")})
		}
		sort.Slice(d.Services, func(i, j int) bool { return d.Services[i].Name < d.Services[j].Name })
	}
	d.Devs = devsOf(leases, d.Pods, now, env)
	return d, nil
}

// endpointsByEnv reads the namespace's Ingresses labelled with an environment (env "" : every
// environment) and groups their URLs by environment, as `devtool endpoints` lists them.
func endpointsByEnv(ctx context.Context, kc kubernetes.Interface, ns, env string, port int) (map[string][]deploy.PublicEndpoint, error) {
	out := map[string][]deploy.PublicEndpoint{}
	if env != "" {
		eps, err := deploy.Endpoints(ctx, kc, ns, env, port)
		if err != nil {
			return nil, err
		}
		out[env] = withURL(eps)
		return out, nil
	}
	l, err := kc.NetworkingV1().Ingresses(ns).List(ctx, metav1.ListOptions{LabelSelector: kube.LabelDeployedBy})
	if err != nil {
		return nil, err
	}
	envs := map[string]bool{}
	for _, ing := range l.Items {
		envs[ing.Labels[kube.LabelDeployedBy]] = true
	}
	for e := range envs {
		eps, err := deploy.Endpoints(ctx, kc, ns, e, port)
		if err != nil {
			return nil, err
		}
		out[e] = withURL(eps)
	}
	return out, nil
}

func withURL(eps []deploy.PublicEndpoint) []deploy.PublicEndpoint {
	var out []deploy.PublicEndpoint
	for _, e := range eps {
		if e.URL != "" {
			out = append(out, e)
		}
	}
	return out
}

func podsOf(l *corev1.PodList, now time.Time) []PodView {
	if l == nil {
		return nil
	}
	out := make([]PodView, 0, len(l.Items))
	for i := range l.Items {
		p := &l.Items[i]
		v := PodView{Name: p.Name, Service: logs.ServiceName(p), Phase: string(p.Status.Phase), Created: p.CreationTimestamp.Time,
			Dev: p.Labels[dev.LabelDev], Env: p.Labels[kube.LabelDeployedBy]}
		if p.DeletionTimestamp != nil {
			v.Phase = "Terminating"
		}
		ready := 0
		for _, cs := range p.Status.ContainerStatuses {
			if cs.Ready {
				ready++
			}
			v.Restarts += cs.RestartCount
			if w := cs.State.Waiting; w != nil && w.Reason != "" && p.DeletionTimestamp == nil {
				v.Phase = w.Reason
			} else if t := cs.State.Terminated; t != nil && t.Reason != "" && p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
				v.Phase = t.Reason
			}
		}
		n := len(p.Spec.Containers)
		v.Ready = fmt.Sprintf("%d/%d", ready, n)
		v.AllReady = n > 0 && ready == n
		out = append(out, v)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Service != out[j].Service {
			return out[i].Service < out[j].Service
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// devsOf joins the dev containers' Leases with their pods (env "" : every environment's).
func devsOf(leases *coordinationv1.LeaseList, pods []PodView, now time.Time, env string) []DevView {
	byName := map[string]*DevView{}
	var order []string
	get := func(name string) *DevView {
		if d := byName[name]; d != nil {
			return d
		}
		d := &DevView{Name: name}
		byName[name] = d
		order = append(order, name)
		return d
	}
	for _, p := range pods {
		if p.Dev == "" {
			continue
		}
		d := get(p.Dev)
		d.Pods = append(d.Pods, p)
		if d.Env == "" {
			d.Env = p.Env
		}
	}
	if leases != nil {
		for i := range leases.Items {
			l := &leases.Items[i]
			if !strings.HasPrefix(l.Name, dev.LeaseName("")) {
				continue
			}
			st := dev.ReadLeaseStatus(l, now)
			if env != "" && byName[st.Dev] == nil {
				continue // a dev container of another environment (its pods say which)
			}
			d := get(st.Dev)
			d.HasLease, d.Live, d.Holder, d.Since, d.Renewed = true, st.Live, st.Holder.String(), st.Since, st.Renewed
		}
	}
	out := make([]DevView, 0, len(order))
	for _, n := range order {
		d := byName[n]
		if env != "" && d.Env != "" && d.Env != env {
			continue
		}
		out = append(out, *d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func quotaLines(q *corev1.ResourceQuota) []QuotaLine {
	var names []string
	for r := range q.Spec.Hard {
		names = append(names, string(r))
	}
	sort.Strings(names)
	var out []QuotaLine
	for _, n := range names {
		r := corev1.ResourceName(n)
		hard := q.Spec.Hard[r]
		l := QuotaLine{Resource: n, Hard: hard.String(), Used: "0"}
		if u, ok := q.Status.Used[r]; ok {
			l.Used = u.String()
		}
		out = append(out, l)
	}
	return out
}

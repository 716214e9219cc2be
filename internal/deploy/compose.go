package deploy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/devtool/devtool/internal/kube"
	"github.com/devtool/devtool/internal/translate"
)

// ComposeDeploy is one deploy of a translated Compose project.
type ComposeDeploy struct {
	Client    *kube.Client
	Namespace string
	Name      string // environment name
	Result    *translate.Result
	// Manifest and ManifestFile are recorded in the state ConfigMap.
	Manifest     string
	ManifestFile string
	// Wait for every workload to be ready (Jobs: completed), not only for depends_on conditions.
	Wait bool
	// Progress receives one line per step; never nil after Run starts.
	Progress func(string)
	// NoState leaves the state record to the caller (a manifest deploy records its own).
	NoState bool
}

// NotReadyError is a deploy that timed out or failed while waiting; Details says why per service.
type NotReadyError struct {
	Cause    error
	Services []string
	Details  string
}

func (e *NotReadyError) Error() string {
	msg := fmt.Sprintf("%v: not ready: %s", e.Cause, strings.Join(e.Services, ", "))
	if e.Details != "" {
		msg += "\n" + e.Details
	}
	return msg
}

func (e *NotReadyError) Unwrap() error { return e.Cause }

// Run applies the objects, honouring depends_on, prunes what left the file and records the state.
// ctx carries the --timeout deadline.
func (d *ComposeDeploy) Run(ctx context.Context) (err error) {
	if d.Progress == nil {
		d.Progress = func(string) {}
	}
	cs := d.Client.Clientset
	if _, err := cs.CoreV1().Namespaces().Get(ctx, d.Namespace, metav1.GetOptions{}); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("namespace %q does not exist", d.Namespace)
		}
		if !apierrors.IsForbidden(err) { // a user may deploy into a namespace they cannot read
			return fmt.Errorf("checking namespace %q: %w", d.Namespace, err)
		}
	}
	states := &StateStore{Clientset: cs, Namespace: d.Namespace}
	st := &State{Name: d.Name, Status: StatusProgressing, Manifest: d.Manifest, ManifestFile: d.ManifestFile, ComposeObjects: true}
	if !d.NoState {
		if err := states.Save(ctx, st); err != nil {
			return err
		}
	}
	defer func() {
		if d.NoState {
			return
		}
		// Record the outcome even when ctx expired or was cancelled.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		st.Status = StatusDeployed
		if err != nil {
			st.Status, st.Error = StatusError, err.Error()
		}
		if serr := states.Save(sctx, st); serr != nil && err == nil {
			err = serr
		}
	}()

	objs, err := d.Client.Objects()
	if err != nil {
		return err
	}
	plan, err := d.split()
	if err != nil {
		return err
	}
	applied := map[string]bool{}
	apply := func(ctx context.Context, u *unstructured.Unstructured) error {
		if _, err := d.applyOne(ctx, objs, u); err != nil {
			return err
		}
		applied[key(u)] = true
		return nil
	}
	for _, u := range plan.before {
		if err := apply(ctx, u); err != nil {
			return err
		}
	}

	tr := newTracker(cs, d.Namespace, d.Name)
	tctx, stopTracker := context.WithCancel(ctx)
	defer stopTracker()
	if err := tr.start(tctx); err != nil {
		return err
	}
	if err := d.applyWorkloads(ctx, tr, objs, plan, applied); err != nil {
		return d.notReady(ctx, tr, err)
	}
	for _, u := range plan.after {
		if err := apply(ctx, u); err != nil {
			return err
		}
	}
	if err := d.prune(ctx, objs, applied); err != nil {
		return err
	}
	if d.Wait {
		d.Progress("waiting for every service to be ready")
		for _, s := range d.Result.Services {
			s := s
			// The periodic wake re-checks pods that are Ready but not yet settled.
			if err := tr.waitFor(ctx, settle/2, func() (bool, error) { return tr.ready(d.Namespace, s) }); err != nil {
				return d.notReady(ctx, tr, err)
			}
		}
	}
	return nil
}

type plan struct {
	before    []*unstructured.Unstructured          // PVCs, Services, everything but workloads and Ingresses
	workloads map[string]*unstructured.Unstructured // by service name
	after     []*unstructured.Unstructured          // Ingresses
}

func (d *ComposeDeploy) split() (*plan, error) {
	p := &plan{workloads: map[string]*unstructured.Unstructured{}}
	services := map[string]bool{}
	for _, s := range d.Result.Services {
		services[s.Name] = true
	}
	for _, o := range d.Result.Objects {
		u, err := kube.ToUnstructured(o)
		if err != nil {
			return nil, err
		}
		if u.GetNamespace() == "" {
			u.SetNamespace(d.Namespace)
		}
		switch u.GetKind() {
		case translate.KindDeployment, translate.KindStatefulSet, translate.KindJob:
			if !services[u.GetName()] {
				return nil, fmt.Errorf("internal error: workload %s has no service entry", u.GetName())
			}
			p.workloads[u.GetName()] = u
		case "Ingress":
			p.after = append(p.after, u)
		default:
			p.before = append(p.before, u)
		}
	}
	return p, nil
}

// applyWorkloads applies each service's workload as soon as its dependencies meet their
// conditions; independent services go in parallel.
func (d *ComposeDeploy) applyWorkloads(ctx context.Context, tr *tracker, objs *kube.Objects, p *plan, applied map[string]bool) error {
	byName := map[string]translate.Service{}
	for _, s := range d.Result.Services {
		byName[s.Name] = s
	}
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx) // the first failure stops the other services' waits
	for _, s := range d.Result.Services {
		g.Go(func() error {
			if err := d.applyService(gctx, tr, objs, p, byName, s); err != nil {
				return err
			}
			mu.Lock()
			applied[key(p.workloads[s.Name])] = true
			mu.Unlock()
			return nil
		})
	}
	return g.Wait()
}

// applyService waits for a service's dependencies, then applies its workload.
func (d *ComposeDeploy) applyService(ctx context.Context, tr *tracker, objs *kube.Objects, p *plan, byName map[string]translate.Service, s translate.Service) error {
	for _, dep := range s.DependsOn {
		target, ok := byName[dep.Service]
		if !ok {
			return fmt.Errorf("service %s depends on unknown service %s", s.Name, dep.Service)
		}
		d.Progress(fmt.Sprintf("%s: waiting for %s (%s)", s.Name, dep.Service, dep.Condition))
		if err := d.waitCondition(ctx, tr, target, dep.Condition); err != nil {
			return fmt.Errorf("service %s: waiting for %s to be %s: %w", s.Name, dep.Service, strings.TrimPrefix(dep.Condition, "service_"), err)
		}
	}
	u := p.workloads[s.Name]
	if u == nil {
		return fmt.Errorf("internal error: no workload for service %s", s.Name)
	}
	d.Progress(fmt.Sprintf("%s: applying %s", s.Name, strings.ToLower(u.GetKind())))
	_, err := d.applyOne(ctx, objs, u)
	return err
}

func (d *ComposeDeploy) waitCondition(ctx context.Context, tr *tracker, s translate.Service, cond string) error {
	switch cond {
	case translate.ConditionCompleted:
		return tr.waitFor(ctx, 0, func() (bool, error) { return tr.completed(d.Namespace, s) })
	case translate.ConditionHealthy:
		if s.HasHealthcheck || len(s.Ports) == 0 {
			return tr.waitFor(ctx, 0, func() (bool, error) {
				pods, err := tr.readyPods(s)
				return len(pods) > 0, err
			})
		}
		// No healthcheck: healthy means one of its ports accepts connections. No watch reports
		// that, so the dial is retried every second, within ctx's deadline.
		return tr.waitFor(ctx, time.Second, func() (bool, error) {
			pods, err := tr.readyPods(s)
			if err != nil || len(pods) == 0 {
				return false, err
			}
			return d.portOpen(ctx, pods[0].Name, s.Ports), nil
		})
	default: // service_started
		return tr.waitFor(ctx, 0, func() (bool, error) { return tr.started(d.Namespace, s) })
	}
}

// portOpen dials each port of a pod through a port-forward. A refused remote port makes the
// forwarder close the local connection at once, so a read that times out means "open".
func (d *ComposeDeploy) portOpen(ctx context.Context, pod string, ports []int32) bool {
	fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	spec := make([]string, len(ports))
	for i, p := range ports {
		spec[i] = fmt.Sprintf(":%d", p)
	}
	fw, _, err := d.Client.PortForward(fctx, d.Namespace, pod, spec)
	if err != nil {
		return false
	}
	for _, p := range fw {
		conn, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", p.Local), time.Second)
		if err != nil {
			continue
		}
		_ = conn.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		_, rerr := conn.Read(make([]byte, 1))
		conn.Close()
		var ne net.Error
		if rerr == nil || (errors.As(rerr, &ne) && ne.Timeout()) {
			return true
		}
	}
	return false
}

// applyOne applies an object. Jobs and StatefulSets have immutable fields: when the API server
// rejects a change to them, the old object is deleted (and waited for) and the new one created.
func (d *ComposeDeploy) applyOne(ctx context.Context, objs *kube.Objects, u *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	out, err := objs.Apply(ctx, u, d.Name, false)
	if err == nil || !apierrors.IsInvalid(errors.Unwrap(err)) || (u.GetKind() != translate.KindJob && u.GetKind() != translate.KindStatefulSet) {
		return out, err
	}
	d.Progress(fmt.Sprintf("%s: immutable fields changed, recreating %s", u.GetName(), strings.ToLower(u.GetKind())))
	if err := objs.DeleteAndWait(ctx, u); err != nil {
		return nil, err
	}
	return objs.Apply(ctx, u, d.Name, false)
}

// managedKinds are the kinds translation creates: prune looks only at these.
// Secret and ConfigMap come from Compose secrets and configs. The state ConfigMap is never
// selected: it has no deployed-by label.
var managedKinds = map[string]bool{"Deployment": true, "StatefulSet": true, "Job": true, "Service": true,
	"PersistentVolumeClaim": true, "Ingress": true, "Secret": true, "ConfigMap": true}

// prune deletes objects of this environment that translation created before and no longer does.
// Only objects with both devtool labels qualify, so objects created by the user's own deploy
// commands (labelled deployed-by only) are never pruned. PVCs are kept: their data goes only
// with destroy --volumes.
func (d *ComposeDeploy) prune(ctx context.Context, objs *kube.Objects, applied map[string]bool) error {
	sel := fmt.Sprintf("%s=%s,%s=%s", kube.LabelDeployedBy, d.Name, kube.LabelManagedBy, kube.ManagedByValue)
	items, err := objs.ListLabelled(ctx, d.Namespace, sel)
	if err != nil {
		return err
	}
	sort.Slice(items, func(i, j int) bool { return key(&items[i]) < key(&items[j]) })
	for i := range items {
		u := &items[i]
		switch pruneVerdict(u, applied) {
		case pruneSkip:
		case pruneKeepVolume:
			d.Progress(fmt.Sprintf("volume %s is no longer used; kept (destroy --volumes removes it)", u.GetName()))
		case pruneDelete:
			d.Progress(fmt.Sprintf("removing %s %s (no longer in the manifest)", strings.ToLower(u.GetKind()), u.GetName()))
			if err := objs.Delete(ctx, u); err != nil {
				return err
			}
		}
	}
	return nil
}

// PruneAll removes every object an earlier translation made for the environment (a devtool.yml
// that dropped its compose and endpoints sections), keeping PVCs as prune does. Nothing is
// applied and nothing is waited for.
func (d *ComposeDeploy) PruneAll(ctx context.Context) error {
	if d.Progress == nil {
		d.Progress = func(string) {}
	}
	objs, err := d.Client.Objects()
	if err != nil {
		return err
	}
	return d.prune(ctx, objs, nil)
}

type pruneAction int

const (
	pruneSkip       pruneAction = iota // not ours to remove, or still applied
	pruneKeepVolume                    // a PVC no longer used: kept
	pruneDelete
)

// pruneVerdict decides what prune does with a labelled object found in the namespace, given the
// objects this deploy applied (by key).
func pruneVerdict(u *unstructured.Unstructured, applied map[string]bool) pruneAction {
	switch {
	case !managedKinds[u.GetKind()] || applied[key(u)] || kube.IsKept(u) || len(u.GetOwnerReferences()) > 0:
		return pruneSkip
	case u.GetKind() == "PersistentVolumeClaim":
		return pruneKeepVolume
	}
	return pruneDelete
}

// notReady turns a wait failure into a NotReadyError naming the services not ready and why.
func (d *ComposeDeploy) notReady(ctx context.Context, tr *tracker, cause error) error {
	var nre *NotReadyError
	if errors.As(cause, &nre) {
		return cause
	}
	if errors.Is(cause, context.Canceled) {
		return cause
	}
	if errors.Is(cause, context.DeadlineExceeded) {
		cause = fmt.Errorf("timed out")
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	var names []string
	var details strings.Builder
	for _, s := range d.Result.Services {
		if ok, _ := tr.ready(d.Namespace, s); ok {
			continue
		}
		names = append(names, s.Name)
		fmt.Fprintf(&details, "  %s (%s):\n%s\n", s.Name, strings.ToLower(s.Kind), explain(dctx, d.Client.Clientset, d.Namespace, tr.podsOf(s.PodSelector)))
	}
	if len(names) == 0 {
		return cause
	}
	return &NotReadyError{Cause: cause, Services: names, Details: strings.TrimRight(details.String(), "\n")}
}

func key(u *unstructured.Unstructured) string {
	return u.GroupVersionKind().GroupKind().String() + "/" + u.GetName()
}

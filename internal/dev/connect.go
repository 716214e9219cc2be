package dev

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/devtool/devtool/internal/kube"
	"github.com/devtool/devtool/internal/manifest"
)

// PodDialer opens connections to the agent of a dev container's current pod: it finds the
// mirror's pod whose dev container runs (waiting by watch when there is none, as after a pod
// deletion), makes sure the agent and the key are installed in a pod it has not seen yet, and
// opens a port-forward stream to the agent's port. Safe for concurrent use.
type PodDialer struct {
	Kube      *kube.Client
	Namespace string
	// Install prepares a pod the dialer sees for the first time (agent upload and key).
	Install func(ctx context.Context, pod, container string) error
	// OnPod is told when the dialer moves to another pod; may be nil.
	OnPod func(pod string)
	// Logger gets each step of a dial with its time (debug); may be nil.
	Logger *slog.Logger
	// WarmVolume says the dev volume is persistent and Install has already placed the agent
	// and the keys on it (in this process): a new pod of the dev container mounts the same
	// volume, so its first dial goes straight to the agent, skipping Install (an exec, most of
	// a reconnection's time). Should that dial fail (the volume was emptied, the agent is not
	// listening), the next dial to that pod installs first.
	WarmVolume bool

	mu        sync.Mutex
	active    *Active
	installed map[types.UID]bool // by UID: a StatefulSet's new pod has the old one's name
	tried     map[types.UID]bool // pods dialed once without Install
	current   string
	skipped   bool // the last dial that returned a connection skipped Install
}

// InstallSkipped reports whether the last connection came from a dial that skipped Install:
// the agent's version on the volume is then unchecked (Up.CheckAgent checks it over SSH).
func (p *PodDialer) InstallSkipped() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.skipped
}

// NewPodDialer returns a dialer for an active dev container.
func NewPodDialer(c *kube.Client, ns string, a *Active, install func(ctx context.Context, pod, container string) error) *PodDialer {
	return &PodDialer{Kube: c, Namespace: ns, Install: install, active: a, installed: map[types.UID]bool{a.PodUID: true}, tried: map[types.UID]bool{}, current: a.Pod}
}

// SetActive switches to a rebuilt mirror (after the original was redeployed).
func (p *PodDialer) SetActive(a *Active) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.active = a
	p.installed[a.PodUID] = false
}

// Active is the dev container the dialer connects to.
func (p *PodDialer) Active() *Active {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.active
}

// Pod is the pod of the last connection.
func (p *PodDialer) Pod() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.current
}

// Dial connects to the agent of the current pod.
func (p *PodDialer) Dial(ctx context.Context) (net.Conn, error) {
	a := p.Active()
	start := time.Now()
	pod, uid, err := p.runningPod(ctx, a)
	if err != nil {
		return nil, err
	}
	p.debug("dial: pod running", "pod", pod, "took", time.Since(start))
	p.mu.Lock()
	done := p.installed[uid]
	moved := p.current != pod
	p.current = pod
	optimistic := !done && p.WarmVolume && !p.tried[uid]
	if optimistic {
		p.tried[uid] = true
	}
	p.mu.Unlock()
	if moved && p.OnPod != nil {
		p.OnPod(pod)
	}
	if optimistic {
		conn, err := p.Kube.DialPod(ctx, p.Namespace, pod, AgentPort)
		if err == nil {
			p.debug("dial: port-forward open (warm volume: install skipped)", "pod", pod, "took", time.Since(start))
			p.mu.Lock()
			p.skipped = true
			p.mu.Unlock()
			return conn, nil
		}
		p.debug("dial: warm dial failed; installing", "pod", pod, "err", err)
	}
	if !done && p.Install != nil {
		if err := p.Install(ctx, pod, a.Container); err != nil {
			return nil, err
		}
		p.mu.Lock()
		p.installed[uid] = true
		p.mu.Unlock()
		p.debug("dial: agent and key installed", "pod", pod, "took", time.Since(start))
	}
	conn, err := p.Kube.DialPod(ctx, p.Namespace, pod, AgentPort)
	if err == nil {
		p.debug("dial: port-forward open", "pod", pod, "took", time.Since(start))
		p.mu.Lock()
		p.skipped = false
		p.mu.Unlock()
	}
	return conn, err
}

func (p *PodDialer) debug(msg string, args ...any) {
	if p.Logger != nil {
		p.Logger.Debug(msg, args...)
	}
}

// runningPod waits for a mirror pod, not being deleted, whose dev container runs.
func (p *PodDialer) runningPod(ctx context.Context, a *Active) (string, types.UID, error) {
	sel := labels.SelectorFromSet(a.Mirror.Template().Labels).String()
	var name string
	var uid types.UID
	_, err := kube.WaitForPods(ctx, p.Kube.Clientset, p.Namespace, sel, func(pods []corev1.Pod) bool {
		for i := range pods {
			if pod := &pods[i]; pod.DeletionTimestamp == nil && containerRunning(pod, a.Container) {
				if name == "" || pod.Name == p.Pod() {
					name, uid = pod.Name, pod.UID
				}
			}
		}
		return name != ""
	})
	if err != nil {
		return "", "", fmt.Errorf("finding the dev container's pod: %w", err)
	}
	return name, uid, nil
}

func containerRunning(p *corev1.Pod, container string) bool {
	for _, c := range p.Status.ContainerStatuses {
		if c.Name == container {
			return c.State.Running != nil
		}
	}
	return false
}

// RunningPod finds the running pod of an active dev container (for exec): an error that says
// so when the dev container is not active. A dev container whose mirror exists but whose pod is
// being replaced (a rebuild after a redeploy, a deleted pod) is still active: RunningPod waits
// for its next running pod, up to ActivePodWait, instead of saying it is gone.
func RunningPod(ctx context.Context, cs kubernetes.Interface, ns string, d *manifest.Dev) (pod, container string, err error) {
	sel := labels.SelectorFromSet(map[string]string{LabelDev: d.Name}).String()
	list, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return "", "", fmt.Errorf("finding dev container %s: %w", d.Name, err)
	}
	if pod, container = runningDevPod(list.Items, d); pod != "" {
		return pod, container, nil
	}
	active, err := mirrorExists(ctx, cs, ns, sel)
	if err != nil {
		return "", "", fmt.Errorf("finding dev container %s: %w", d.Name, err)
	}
	if !active {
		return "", "", fmt.Errorf("no active dev container %s for this folder in namespace %s", d.Name, ns)
	}
	wctx, cancel := context.WithTimeout(ctx, ActivePodWait)
	defer cancel()
	_, err = kube.WaitForPods(wctx, cs, ns, sel, func(pods []corev1.Pod) bool {
		pod, container = runningDevPod(pods, d)
		return pod != ""
	})
	if err != nil {
		if ctx.Err() != nil {
			return "", "", ctx.Err()
		}
		return "", "", fmt.Errorf("dev container %s is active in namespace %s, but no pod of it was running within %s: %w",
			d.Name, ns, ActivePodWait, err)
	}
	return pod, container, nil
}

// ActivePodWait bounds how long exec waits for the pod of an active dev container to run again.
const ActivePodWait = 2 * time.Minute

func runningDevPod(pods []corev1.Pod, d *manifest.Dev) (pod, container string) {
	for i := range pods {
		p := &pods[i]
		if p.DeletionTimestamp != nil {
			continue
		}
		idx, err := DevContainer(&p.Spec, d, p.Name)
		if err != nil {
			continue
		}
		if name := p.Spec.Containers[idx].Name; containerRunning(p, name) {
			return p.Name, name
		}
	}
	return "", ""
}

// mirrorExists reports whether a mirror Deployment or StatefulSet of the dev container exists.
func mirrorExists(ctx context.Context, cs kubernetes.Interface, ns, sel string) (bool, error) {
	deps, err := cs.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return false, err
	}
	if len(deps.Items) > 0 {
		return true, nil
	}
	stss, err := cs.AppsV1().StatefulSets(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return false, err
	}
	return len(stss.Items) > 0, nil
}

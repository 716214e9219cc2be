package initcmd

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/devtool/devtool/internal/cli/context/prompt"
	"github.com/devtool/devtool/internal/cmdutil"
	"github.com/devtool/devtool/internal/deploy"
)

// workload is a Deployment or StatefulSet that a dev container can replace.
type workload struct {
	Kind     string // Deployment or StatefulSet
	Name     string
	Selector map[string]string
	Pod      corev1.PodSpec
}

// listWorkloads lists the namespace's Deployments and StatefulSets, by kind then name.
func listWorkloads(ctx context.Context, cs kubernetes.Interface, ns string) ([]workload, error) {
	var out []workload
	deps, err := cs.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing deployments in %s: %w", ns, err)
	}
	for _, d := range deps.Items {
		out = append(out, fromObject("Deployment", d.ObjectMeta, d.Spec.Selector, d.Spec.Template.Spec))
	}
	sts, err := cs.AppsV1().StatefulSets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing statefulsets in %s: %w", ns, err)
	}
	for _, s := range sts.Items {
		out = append(out, fromObject("StatefulSet", s.ObjectMeta, s.Spec.Selector, s.Spec.Template.Spec))
	}
	slices.SortStableFunc(out, func(a, b workload) int {
		if a.Kind != b.Kind {
			if a.Kind == "Deployment" {
				return -1
			}
			return 1
		}
		if a.Name < b.Name {
			return -1
		}
		if a.Name > b.Name {
			return 1
		}
		return 0
	})
	return out, nil
}

func fromObject(kind string, meta metav1.ObjectMeta, sel *metav1.LabelSelector, pod corev1.PodSpec) workload {
	w := workload{Kind: kind, Name: meta.Name, Pod: pod}
	if sel != nil {
		w.Selector = sel.MatchLabels
	}
	return w
}

// devFlow is init -v1: pick one running workload and write a dev entry for it.
func devFlow(ctx context.Context, opts *Options) (*out, error) {
	t, err := opts.Target(opts.Kube)
	if err != nil {
		return nil, err
	}
	ws, err := listWorkloads(ctx, t.Kube.Clientset, t.Namespace)
	if err != nil {
		return nil, err
	}
	if len(ws) == 0 {
		return nil, cmdutil.WithHint(fmt.Errorf("no Deployment or StatefulSet in namespace %s", t.Namespace),
			"deploy the application first (devtool deploy), or pick another namespace with --namespace")
	}
	var w *workload
	switch {
	case opts.Workload != "":
		for i := range ws {
			if ws[i].Name == opts.Workload {
				w = &ws[i]
				break
			}
		}
		if w == nil {
			return nil, cmdutil.FlagErrorf("--workload %q: no Deployment or StatefulSet of that name in namespace %s (found %s)", opts.Workload, t.Namespace, names(ws))
		}
	case len(ws) == 1:
		w = &ws[0]
	case opts.IO.CanPrompt():
		labels := make([]string, len(ws))
		for i, x := range ws {
			labels[i] = fmt.Sprintf("%s (%s)", x.Name, x.Kind)
		}
		i, err := prompt.Select(ctx, opts.IO.In, opts.IO.ErrOut, "Which workload do you want to develop?", labels, 0)
		if err != nil {
			return nil, err
		}
		w = &ws[i]
	default:
		return nil, cmdutil.FlagErrorf("--workload is required without a terminal: namespace %s has %s", t.Namespace, names(ws))
	}
	name, entry := devEntry(*w)
	return &out{Dev: map[string]outDev{name: entry}}, nil
}

func names(ws []workload) string {
	s := ""
	for i, w := range ws {
		if i > 0 {
			s += ", "
		}
		s += w.Name
	}
	return s
}

// devEntry is the guessed dev section for a workload: the first container's image, workdir
// /app, sync .:/app and a forward per container port.
func devEntry(w workload) (string, outDev) {
	d := outDev{Workdir: "/app", Sync: []string{".:/app"}}
	if len(w.Pod.Containers) > 0 {
		c := w.Pod.Containers[0]
		d.Image = c.Image
		if len(w.Pod.Containers) > 1 {
			d.Container = c.Name
		}
		seen := map[int32]bool{}
		for _, p := range c.Ports {
			if p.Protocol != "" && p.Protocol != corev1.ProtocolTCP || seen[p.ContainerPort] {
				continue
			}
			seen[p.ContainerPort] = true
			port := strconv.Itoa(int(p.ContainerPort))
			d.Forward = append(d.Forward, port+":"+port)
		}
	}
	name := deploy.SanitizeName(w.Name)
	if name != w.Name {
		// A workload name that is not a DNS label (dots) is found by its labels instead.
		d.Selector = w.Selector
	}
	return name, d
}

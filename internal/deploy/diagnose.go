package deploy

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

const logLinesOnFailure = 10

// explain says why a service is not ready: pod phases, waiting and termination reasons, warning
// events, and the last log lines of a container that crashed. Best effort: it never fails.
func explain(ctx context.Context, cs kubernetes.Interface, ns string, pods []*corev1.Pod) string {
	if len(pods) == 0 {
		return "    no pod was created (check the workload's events: kubectl describe)"
	}
	var b strings.Builder
	sort.Slice(pods, func(i, j int) bool { return pods[i].Name < pods[j].Name })
	for _, p := range pods {
		fmt.Fprintf(&b, "    pod %s: %s", p.Name, p.Status.Phase)
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status != corev1.ConditionTrue && c.Message != "" {
				fmt.Fprintf(&b, " (not scheduled: %s)", c.Message)
			}
		}
		b.WriteString("\n")
		for _, st := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
			describeContainer(ctx, &b, cs, ns, p.Name, st)
		}
		if ev := warningEvents(ctx, cs, ns, p.Name); ev != "" {
			b.WriteString(ev)
		}
	}
	return strings.TrimRight(b.String(), "\n")
}

func describeContainer(ctx context.Context, b *strings.Builder, cs kubernetes.Interface, ns, pod string, st corev1.ContainerStatus) {
	switch {
	case st.State.Waiting != nil:
		fmt.Fprintf(b, "      container %s waiting: %s %s\n", st.Name, st.State.Waiting.Reason, st.State.Waiting.Message)
	case st.State.Terminated != nil:
		t := st.State.Terminated
		fmt.Fprintf(b, "      container %s terminated: %s (exit code %d)\n", st.Name, t.Reason, t.ExitCode)
	case st.State.Running != nil && !st.Ready:
		fmt.Fprintf(b, "      container %s running but not ready (readiness probe failing)\n", st.Name)
	}
	crashed := st.RestartCount > 0 || (st.State.Terminated != nil && st.State.Terminated.ExitCode != 0)
	if !crashed {
		return
	}
	if t := st.LastTerminationState.Terminated; t != nil {
		fmt.Fprintf(b, "      container %s last exited: %s (exit code %d), restarted %d times\n", st.Name, t.Reason, t.ExitCode, st.RestartCount)
	}
	opts := &corev1.PodLogOptions{Container: st.Name, TailLines: ptr.To[int64](logLinesOnFailure), Previous: st.RestartCount > 0 && st.State.Terminated == nil}
	raw, err := cs.CoreV1().Pods(ns).GetLogs(pod, opts).DoRaw(ctx)
	if err != nil || len(strings.TrimSpace(string(raw))) == 0 {
		return
	}
	fmt.Fprintf(b, "      last log lines of %s:\n", st.Name)
	for _, l := range strings.Split(strings.TrimRight(string(raw), "\n"), "\n") {
		fmt.Fprintf(b, "        | %s\n", l)
	}
}

func warningEvents(ctx context.Context, cs kubernetes.Interface, ns, pod string) string {
	sel := fields.AndSelectors(fields.OneTermEqualSelector("involvedObject.name", pod), fields.OneTermEqualSelector("type", corev1.EventTypeWarning))
	l, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: sel.String()})
	if err != nil || len(l.Items) == 0 {
		return ""
	}
	sort.Slice(l.Items, func(i, j int) bool { return l.Items[i].LastTimestamp.Before(&l.Items[j].LastTimestamp) })
	if len(l.Items) > 3 {
		l.Items = l.Items[len(l.Items)-3:]
	}
	var b strings.Builder
	for _, e := range l.Items {
		fmt.Fprintf(&b, "      event %s: %s\n", e.Reason, strings.TrimSpace(e.Message))
	}
	return b.String()
}

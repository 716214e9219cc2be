package dev

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"

	"github.com/devtool/devtool/internal/manifest"
)

// Restart restarts the pods of the named services (a rollout restart: a new pod-template
// annotation, as kubectl does) and returns Kind/name of each workload restarted. A service
// replaced by an active dev container restarts its mirror instead.
func Restart(ctx context.Context, cs kubernetes.Interface, ns string, services []string, now time.Time) ([]string, error) {
	var done []string
	for _, s := range services {
		w, err := FindWorkload(ctx, cs, ns, &manifest.Dev{Name: s})
		if err != nil {
			return done, fmt.Errorf("restarting %s: no Deployment or StatefulSet named %s in namespace %s", s, s, ns)
		}
		if w.Meta().Annotations[AnnotationActive] != "" {
			if m, ok, err := getWorkload(ctx, cs, ns, w.Kind(), MirrorName(w.Name())); err == nil && ok {
				w = m
			}
		}
		patch := map[string]any{"spec": map[string]any{"template": map[string]any{"metadata": map[string]any{
			"annotations": map[string]any{"kubectl.kubernetes.io/restartedAt": now.UTC().Format(time.RFC3339)}}}}}
		if err := patchWorkload(ctx, cs, ns, w.Kind(), w.Name(), patch); err != nil {
			if apierrors.IsNotFound(err) {
				return done, fmt.Errorf("restarting %s: %s was deleted", s, w)
			}
			return done, fmt.Errorf("restarting %s: %w", w, err)
		}
		done = append(done, w.String())
	}
	return done, nil
}

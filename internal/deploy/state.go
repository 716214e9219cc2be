// Package deploy is the deploy/destroy engine: it applies translated objects in depends_on order,
// waits by watch, prunes what left the manifest, destroys by label, and records each environment
// in one state ConfigMap, so any machine can see or destroy what another deployed.
package deploy

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/devtool/devtool/internal/kube"
)

// Environment statuses recorded in the state ConfigMap.
const (
	StatusProgressing = "progressing"
	StatusDeployed    = "deployed"
	StatusError       = "error"
	StatusDestroying  = "destroying"
)

const (
	// LabelState marks state ConfigMaps; its value is the environment name. It is deliberately not
	// dev.devtool/deployed-by, so prune and the destroy sweep never touch the record itself.
	LabelState     = "dev.devtool/environment"
	statePrefix    = "devtool-env-"
	maxOutputBytes = 256 << 10 // ConfigMaps hold 1 MiB; keep the tail of long outputs
)

// State is the record of one deployed environment.
type State struct {
	Name         string
	Status       string
	ManifestFile string
	Manifest     string
	Output       string
	Error        string
	Repository   string
	Branch       string
	// ComposeObjects records that the deploy applied Compose or endpoints objects of its own
	// (a Compose deploy, or a devtool.yml with a compose or endpoints part): the next deploy of a
	// devtool.yml without those parts prunes them (see PruneAfterManifest). Records written
	// before it existed read as false.
	ComposeObjects bool
	Updated        time.Time
}

// StateStore reads and writes state ConfigMaps in one namespace.
type StateStore struct {
	Clientset kubernetes.Interface
	Namespace string
}

// StateName is the ConfigMap name for an environment.
func StateName(env string) string { return statePrefix + env }

// Save creates or replaces the record.
func (s *StateStore) Save(ctx context.Context, st *State) error {
	st.Updated = time.Now().UTC()
	if len(st.Output) > maxOutputBytes {
		st.Output = "[…output truncated…]\n" + st.Output[len(st.Output)-maxOutputBytes:]
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name:      StateName(st.Name),
			Namespace: s.Namespace,
			Labels:    map[string]string{LabelState: st.Name, kube.LabelManagedBy: kube.ManagedByValue},
		},
		Data: map[string]string{
			"name": st.Name, "status": st.Status, "filename": st.ManifestFile, "manifest": st.Manifest,
			"output": st.Output, "error": st.Error, "repository": st.Repository, "branch": st.Branch,
			"updated": st.Updated.Format(time.RFC3339), "compose-objects": strconv.FormatBool(st.ComposeObjects),
		},
	}
	cms := s.Clientset.CoreV1().ConfigMaps(s.Namespace)
	_, err := cms.Update(ctx, cm, metav1.UpdateOptions{FieldManager: kube.FieldManager})
	if apierrors.IsNotFound(err) {
		_, err = cms.Create(ctx, cm, metav1.CreateOptions{FieldManager: kube.FieldManager})
	}
	if err != nil {
		return fmt.Errorf("recording the state of environment %q: %w", st.Name, err)
	}
	return nil
}

// Get reads one record; (nil, nil) when the environment was never deployed.
func (s *StateStore) Get(ctx context.Context, env string) (*State, error) {
	cm, err := s.Clientset.CoreV1().ConfigMaps(s.Namespace).Get(ctx, StateName(env), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the state of environment %q: %w", env, err)
	}
	return fromConfigMap(cm), nil
}

// List returns every environment recorded in the namespace, by name.
func (s *StateStore) List(ctx context.Context) ([]*State, error) {
	l, err := s.Clientset.CoreV1().ConfigMaps(s.Namespace).List(ctx, metav1.ListOptions{LabelSelector: LabelState})
	if err != nil {
		return nil, fmt.Errorf("listing environments in namespace %s: %w", s.Namespace, err)
	}
	out := make([]*State, 0, len(l.Items))
	for i := range l.Items {
		out = append(out, fromConfigMap(&l.Items[i]))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Delete removes the record.
func (s *StateStore) Delete(ctx context.Context, env string) error {
	err := s.Clientset.CoreV1().ConfigMaps(s.Namespace).Delete(ctx, StateName(env), metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting the state of environment %q: %w", env, err)
	}
	return nil
}

func fromConfigMap(cm *corev1.ConfigMap) *State {
	d := cm.Data
	t, _ := time.Parse(time.RFC3339, d["updated"])
	composeObjects, _ := strconv.ParseBool(d["compose-objects"])
	name := d["name"]
	if name == "" {
		name = cm.Labels[LabelState]
	}
	return &State{
		Name: name, Status: d["status"], ManifestFile: d["filename"], Manifest: d["manifest"],
		Output: d["output"], Error: d["error"], Repository: d["repository"], Branch: d["branch"], Updated: t,
		ComposeObjects: composeObjects,
	}
}

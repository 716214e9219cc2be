package deploy

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/devtool/devtool/internal/kube"
)

// Destroy deletes everything labelled for one environment, then its state record.
type Destroy struct {
	Client    *kube.Client
	Namespace string
	Name      string
	Volumes   bool // also delete PersistentVolumeClaims
	Wait      bool // return once the deleted objects are gone
	Progress  func(string)
	// Logger receives debug logs (cluster-scoped kinds the user may not list); nil discards.
	Logger *slog.Logger
}

// clusterSelector selects the cluster-scoped objects of environment env of namespace ns.
func clusterSelector(ns, env string) string {
	return kube.LabelDeployedBy + "=" + env + "," + kube.LabelDeployedNamespace + "=" + ns
}

// Run deletes the environment's objects: those labelled for it in its namespace, then the
// cluster-scoped ones its commands created (labelled for it and its namespace; Namespaces never).
// Objects annotated dev.devtool/policy: keep stay, and so do PVCs unless Volumes is set. Objects
// owned by another object (pods of a Deployment) are left to the garbage collector, so nothing is
// recreated while the owner is still being deleted. Cluster-scoped kinds the user may not list are
// skipped (a debug log says which).
func (d *Destroy) Run(ctx context.Context) error {
	if d.Progress == nil {
		d.Progress = func(string) {}
	}
	if d.Logger == nil {
		d.Logger = slog.New(slog.DiscardHandler)
	}
	states := &StateStore{Clientset: d.Client.Clientset, Namespace: d.Namespace}
	st, err := states.Get(ctx, d.Name)
	if err != nil {
		return err
	}
	if st != nil {
		st.Status = StatusDestroying
		if err := states.Save(ctx, st); err != nil {
			return err
		}
	}
	objs, err := d.Client.Objects()
	if err != nil {
		return err
	}
	items, err := objs.ListLabelled(ctx, d.Namespace, kube.LabelDeployedBy+"="+d.Name)
	if err != nil {
		return err
	}
	sort.Slice(items, func(i, j int) bool { return destroyOrder(&items[i]) < destroyOrder(&items[j]) })
	cluster, err := objs.ListClusterLabelled(ctx, clusterSelector(d.Namespace, d.Name), func(gvr schema.GroupVersionResource, err error) {
		d.Logger.Debug("destroy: skipping a cluster-scoped kind", "resource", gvr.GroupResource().String(), "err", err)
	})
	if err != nil {
		return err
	}
	sort.Slice(cluster, func(i, j int) bool { return destroyOrder(&cluster[i]) < destroyOrder(&cluster[j]) })
	items = append(items, cluster...)
	var deleted, kept []*unstructured.Unstructured
	for i := range items {
		u := &items[i]
		if hasController(u) {
			continue
		}
		if kube.IsKept(u) || (u.GetKind() == "PersistentVolumeClaim" && !d.Volumes) {
			kept = append(kept, u)
			continue
		}
		d.Progress(fmt.Sprintf("deleting %s %s", strings.ToLower(u.GetKind()), u.GetName()))
		propagation := metav1.DeletePropagationBackground
		if d.Wait {
			propagation = metav1.DeletePropagationForeground // gone means its pods are gone too
		}
		if err := objs.DeleteWith(ctx, u, propagation); err != nil {
			return err
		}
		deleted = append(deleted, u)
	}
	for _, u := range kept {
		why := "policy keep"
		if !kube.IsKept(u) {
			why = "volumes are kept without --volumes"
		}
		d.Progress(fmt.Sprintf("kept %s %s (%s)", strings.ToLower(u.GetKind()), u.GetName(), why))
	}
	if d.Wait {
		for _, u := range deleted {
			if err := objs.WaitGone(ctx, u); err != nil {
				return err
			}
		}
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	return states.Delete(dctx, d.Name)
}

func hasController(u *unstructured.Unstructured) bool {
	for _, r := range u.GetOwnerReferences() {
		if r.Controller != nil && *r.Controller {
			return true
		}
	}
	return false
}

// destroyOrder deletes entry points first (Ingresses, Services), then workloads, then storage.
func destroyOrder(u *unstructured.Unstructured) string {
	rank := map[string]string{"Ingress": "0", "Service": "1", "Deployment": "2", "StatefulSet": "2", "Job": "2", "PersistentVolumeClaim": "9"}
	r, ok := rank[u.GetKind()]
	if !ok {
		r = "5"
	}
	return r + u.GetKind() + "/" + u.GetName()
}

// Exists reports whether anything of environment env of namespace ns is left: its state record,
// an object labelled for it in ns, or a cluster-scoped object labelled for it and ns.
func Exists(ctx context.Context, c *kube.Client, ns, env string) (bool, error) {
	st, err := (&StateStore{Clientset: c.Clientset, Namespace: ns}).Get(ctx, env)
	if err != nil {
		return false, err
	}
	if st != nil {
		return true, nil
	}
	objs, err := c.Objects()
	if err != nil {
		return false, err
	}
	items, err := objs.ListLabelled(ctx, ns, kube.LabelDeployedBy+"="+env)
	if err != nil {
		return false, err
	}
	if len(items) > 0 {
		return true, nil
	}
	items, err = objs.ListClusterLabelled(ctx, clusterSelector(ns, env), nil)
	if err != nil {
		return false, err
	}
	return len(items) > 0, nil
}

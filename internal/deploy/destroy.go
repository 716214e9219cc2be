package deploy

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

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
}

// Run deletes the environment's objects. Objects annotated dev.devtool/policy: keep stay, and so
// do PVCs unless Volumes is set. Objects owned by another object (pods of a Deployment) are left
// to the garbage collector, so nothing is recreated while the owner is still being deleted.
func (d *Destroy) Run(ctx context.Context) error {
	if d.Progress == nil {
		d.Progress = func(string) {}
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

// Exists reports whether anything of environment env is in namespace ns: its state record or
// an object labelled for it.
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
	return len(items) > 0, nil
}

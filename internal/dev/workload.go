package dev

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/devtool/devtool/internal/manifest"
)

// FieldManager is the field manager of every change the dev lifecycle makes.
const FieldManager = "devtool-dev"

// ErrNoWorkload is wrapped by the error of FindWorkload when nothing matches.
var ErrNoWorkload = fmt.Errorf("no workload")

// FindWorkload finds the Deployment or StatefulSet a dev entry replaces: the one its selector
// matches, else the one named like the entry. Mirrors are never candidates.
func FindWorkload(ctx context.Context, cs kubernetes.Interface, ns string, d *manifest.Dev) (Workload, error) {
	if len(d.Selector) == 0 {
		if dep, err := cs.AppsV1().Deployments(ns).Get(ctx, d.Name, metav1.GetOptions{}); err == nil {
			return Workload{Deployment: dep}, nil
		} else if !apierrors.IsNotFound(err) {
			return Workload{}, fmt.Errorf("dev %s: reading Deployment %s: %w", d.Name, d.Name, err)
		}
		if sts, err := cs.AppsV1().StatefulSets(ns).Get(ctx, d.Name, metav1.GetOptions{}); err == nil {
			return Workload{StatefulSet: sts}, nil
		} else if !apierrors.IsNotFound(err) {
			return Workload{}, fmt.Errorf("dev %s: reading StatefulSet %s: %w", d.Name, d.Name, err)
		}
		return Workload{}, fmt.Errorf("dev %s: %w: no Deployment or StatefulSet named %s in namespace %s; deploy the environment first (devtool deploy, or devtool up --deploy) or set dev.%s.selector",
			d.Name, ErrNoWorkload, d.Name, ns, d.Name)
	}
	sel := labels.SelectorFromSet(d.Selector).String()
	var found []Workload
	deps, err := cs.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return Workload{}, fmt.Errorf("dev %s: listing Deployments: %w", d.Name, err)
	}
	for i := range deps.Items {
		if _, mirror := deps.Items[i].Labels[LabelDev]; !mirror {
			found = append(found, Workload{Deployment: &deps.Items[i]})
		}
	}
	stss, err := cs.AppsV1().StatefulSets(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return Workload{}, fmt.Errorf("dev %s: listing StatefulSets: %w", d.Name, err)
	}
	for i := range stss.Items {
		if _, mirror := stss.Items[i].Labels[LabelDev]; !mirror {
			found = append(found, Workload{StatefulSet: &stss.Items[i]})
		}
	}
	switch len(found) {
	case 0:
		return Workload{}, fmt.Errorf("dev %s: %w: no Deployment or StatefulSet in namespace %s has the labels %s of dev.%s.selector; deploy first or fix the selector",
			d.Name, ErrNoWorkload, ns, sel, d.Name)
	case 1:
		return found[0], nil
	}
	var names []string
	for _, w := range found {
		names = append(names, w.String())
	}
	sort.Strings(names)
	return Workload{}, fmt.Errorf("dev %s: dev.%s.selector %s matches %d workloads (%s); make it match one", d.Name, d.Name, sel, len(found), strings.Join(names, ", "))
}

// getWorkload reads a workload by kind and name; nil workload (no error) when it does not exist.
func getWorkload(ctx context.Context, cs kubernetes.Interface, ns, kind, name string) (Workload, bool, error) {
	var w Workload
	var err error
	if kind == KindStatefulSet {
		w.StatefulSet, err = cs.AppsV1().StatefulSets(ns).Get(ctx, name, metav1.GetOptions{})
	} else {
		w.Deployment, err = cs.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	}
	if apierrors.IsNotFound(err) {
		return Workload{}, false, nil
	}
	if err != nil {
		return Workload{}, false, fmt.Errorf("reading %s %s: %w", kind, name, err)
	}
	return w, true, nil
}

// activeWorkloads lists the originals whose dev-active annotation names devName.
func activeWorkloads(ctx context.Context, cs kubernetes.Interface, ns, devName string) ([]Workload, error) {
	var out []Workload
	deps, err := cs.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing Deployments: %w", err)
	}
	for i := range deps.Items {
		if deps.Items[i].Annotations[AnnotationActive] == devName {
			out = append(out, Workload{Deployment: &deps.Items[i]})
		}
	}
	stss, err := cs.AppsV1().StatefulSets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing StatefulSets: %w", err)
	}
	for i := range stss.Items {
		if stss.Items[i].Annotations[AnnotationActive] == devName {
			out = append(out, Workload{StatefulSet: &stss.Items[i]})
		}
	}
	return out, nil
}

// patchWorkload applies a JSON merge patch to a workload.
func patchWorkload(ctx context.Context, cs kubernetes.Interface, ns, kind, name string, patch any) error {
	b, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	opts := metav1.PatchOptions{FieldManager: FieldManager}
	if kind == KindStatefulSet {
		_, err = cs.AppsV1().StatefulSets(ns).Patch(ctx, name, types.MergePatchType, b, opts)
	} else {
		_, err = cs.AppsV1().Deployments(ns).Patch(ctx, name, types.MergePatchType, b, opts)
	}
	return err
}

// applyMirror creates or replaces the mirror with a server-side apply; a selector that can no
// longer change (the original was redeployed with other labels) deletes and recreates it.
func applyMirror(ctx context.Context, cs kubernetes.Interface, m Workload) error {
	var obj runtime.Object = m.Deployment
	if m.StatefulSet != nil {
		obj = m.StatefulSet
	}
	body, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	force := true
	opts := metav1.PatchOptions{FieldManager: FieldManager, Force: &force}
	ns, name := m.Meta().Namespace, m.Name()
	apply := func() error {
		if m.StatefulSet != nil {
			_, err = cs.AppsV1().StatefulSets(ns).Patch(ctx, name, types.ApplyPatchType, body, opts)
		} else {
			_, err = cs.AppsV1().Deployments(ns).Patch(ctx, name, types.ApplyPatchType, body, opts)
		}
		return err
	}
	err = apply()
	if apierrors.IsInvalid(err) {
		if derr := deleteMirror(ctx, cs, ns, m.Kind(), name); derr != nil {
			return derr
		}
		err = apply()
	}
	if err != nil {
		return fmt.Errorf("creating %s %s: %w", m.Kind(), name, err)
	}
	return nil
}

func deleteMirror(ctx context.Context, cs kubernetes.Interface, ns, kind, name string) error {
	prop := metav1.DeletePropagationBackground
	opts := metav1.DeleteOptions{PropagationPolicy: &prop}
	var err error
	if kind == KindStatefulSet {
		err = cs.AppsV1().StatefulSets(ns).Delete(ctx, name, opts)
	} else {
		err = cs.AppsV1().Deployments(ns).Delete(ctx, name, opts)
	}
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting %s %s: %w", kind, name, err)
	}
	return nil
}

// watchWorkload lists and watches one workload by name for UntilNamed.
func watchWorkload(cs kubernetes.Interface, ns, kind string) (runtime.Object,
	func(context.Context, metav1.ListOptions) (runtime.Object, error),
	func(context.Context, metav1.ListOptions) (watch.Interface, error)) {
	if kind == KindStatefulSet {
		c := cs.AppsV1().StatefulSets(ns)
		return &appsv1.StatefulSet{}, func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return c.List(ctx, o) }, c.Watch
	}
	c := cs.AppsV1().Deployments(ns)
	return &appsv1.Deployment{}, func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return c.List(ctx, o) }, c.Watch
}

func asWorkload(obj runtime.Object) (Workload, bool) {
	switch o := obj.(type) {
	case *appsv1.Deployment:
		return Workload{Deployment: o}, true
	case *appsv1.StatefulSet:
		return Workload{StatefulSet: o}, true
	}
	return Workload{}, false
}

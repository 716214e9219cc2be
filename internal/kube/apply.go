package kube

import (
	"context"
	"fmt"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"

	"github.com/devtool/devtool/internal/labels"
)

// FieldManager is the server-side apply field manager of every object devtool writes.
const FieldManager = "devtool"

// Labels that mark what devtool owns (defined once, in internal/labels).
const (
	LabelDeployedBy = labels.DeployedBy
	// LabelDeployedNamespace is on cluster-scoped objects only (see labels.DeployedNamespace).
	LabelDeployedNamespace = labels.DeployedNamespace
	LabelManagedBy         = labels.ManagedBy
	ManagedByValue         = labels.ManagedByValue
	AnnotationPolicy       = labels.Policy
	PolicyKeep             = labels.PolicyKeep
)

// Objects is the dynamic side of a Client: apply, list and delete any kind by GroupVersionKind.
type Objects struct {
	Dynamic   dynamic.Interface
	Mapper    meta.RESTMapper
	Discovery discovery.DiscoveryInterface
}

// Objects returns the dynamic client layer, created on first use.
func (c *Client) Objects() (*Objects, error) {
	if c.objects != nil {
		return c.objects, nil
	}
	dyn, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		return nil, err
	}
	disc := memory.NewMemCacheClient(c.Clientset.Discovery())
	c.objects = &Objects{Dynamic: dyn, Mapper: restmapper.NewDeferredDiscoveryRESTMapper(disc), Discovery: disc}
	return c.objects, nil
}

// ToUnstructured converts a typed object (with TypeMeta set) to its unstructured form.
func ToUnstructured(obj runtime.Object) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: m}
	if u.GetKind() == "" {
		return nil, fmt.Errorf("object %q has no kind set", u.GetName())
	}
	// Drop the zero creationTimestamp and empty status the converter emits: server-side apply
	// would otherwise claim ownership of them.
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	unstructured.RemoveNestedField(u.Object, "status")
	if tmpl, ok, _ := unstructured.NestedMap(u.Object, "spec", "template", "metadata"); ok {
		delete(tmpl, "creationTimestamp")
		_ = unstructured.SetNestedMap(u.Object, tmpl, "spec", "template", "metadata")
	}
	return u, nil
}

// Resource maps an object's kind to its REST resource.
func (o *Objects) Resource(gvk schema.GroupVersionKind, ns string) (dynamic.ResourceInterface, *meta.RESTMapping, error) {
	m, err := o.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, nil, fmt.Errorf("the cluster does not know kind %s: %w", gvk.Kind, err)
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		return o.Dynamic.Resource(m.Resource).Namespace(ns), m, nil
	}
	return o.Dynamic.Resource(m.Resource), m, nil
}

// OwnershipError says an object exists that the environment did not create.
type OwnershipError struct {
	Kind, Name, Namespace, Environment, Owner string
}

func (e *OwnershipError) Error() string {
	who := "was not created by devtool"
	if e.Owner != "" {
		who = fmt.Sprintf("belongs to the devtool environment %q", e.Owner)
	}
	return fmt.Sprintf("%s %q already exists in namespace %s and %s; refusing to take it over for environment %q (delete it, or deploy under another --name or --namespace)",
		strings.ToLower(e.Kind), e.Name, e.Namespace, who, e.Environment)
}

// Apply writes obj with server-side apply, after checking that an existing object of the same
// name belongs to the same environment (env is the value of dev.devtool/deployed-by).
// dryRun asks the API server to validate without persisting.
func (o *Objects) Apply(ctx context.Context, obj *unstructured.Unstructured, env string, dryRun bool) (*unstructured.Unstructured, error) {
	ri, _, err := o.Resource(obj.GroupVersionKind(), obj.GetNamespace())
	if err != nil {
		return nil, err
	}
	existing, err := ri.Get(ctx, obj.GetName(), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return nil, fmt.Errorf("reading %s %s: %w", strings.ToLower(obj.GetKind()), obj.GetName(), err)
	default:
		if owner := existing.GetLabels()[LabelDeployedBy]; owner != env {
			return nil, &OwnershipError{Kind: obj.GetKind(), Name: obj.GetName(), Namespace: obj.GetNamespace(), Environment: env, Owner: owner}
		}
	}
	opts := metav1.ApplyOptions{FieldManager: FieldManager, Force: true}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	out, err := ri.Apply(ctx, obj.GetName(), obj, opts)
	if err != nil {
		return nil, fmt.Errorf("applying %s %s: %w", strings.ToLower(obj.GetKind()), obj.GetName(), err)
	}
	return out, nil
}

// NamespacedKinds lists the namespaced resources of the cluster that can be listed and deleted,
// the set destroy and prune walk through. Subresources and events are left out.
func (o *Objects) NamespacedKinds() ([]schema.GroupVersionResource, error) {
	lists, err := o.Discovery.ServerPreferredNamespacedResources()
	if err != nil && len(lists) == 0 {
		return nil, fmt.Errorf("discovering the cluster's resource kinds: %w", err)
	}
	var out []schema.GroupVersionResource
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			continue
		}
		for _, r := range l.APIResources {
			if strings.Contains(r.Name, "/") || !hasVerbs(r.Verbs, "list", "delete") {
				continue
			}
			if r.Name == "events" || (gv.Group == "events.k8s.io") || r.Name == "endpoints" || gv.Group == "discovery.k8s.io" {
				continue // owned by controllers; deleting them is noise
			}
			out = append(out, gv.WithResource(r.Name))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out, nil
}

// ClusterKinds lists the cluster-scoped resources of the cluster that can be listed and deleted,
// Namespaces excepted (destroy never deletes a namespace by its labels).
func (o *Objects) ClusterKinds() ([]schema.GroupVersionResource, error) {
	lists, err := o.Discovery.ServerPreferredResources()
	if err != nil && len(lists) == 0 {
		return nil, fmt.Errorf("discovering the cluster's resource kinds: %w", err)
	}
	var out []schema.GroupVersionResource
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			continue
		}
		for _, r := range l.APIResources {
			if r.Namespaced || strings.Contains(r.Name, "/") || !hasVerbs(r.Verbs, "list", "delete") {
				continue
			}
			if gv.Group == "" && r.Name == "namespaces" {
				continue
			}
			out = append(out, gv.WithResource(r.Name))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out, nil
}

// ListClusterLabelled lists every cluster-scoped object (ClusterKinds) matching selector. Kinds
// the caller may not list (a user with rights in their namespaces only) are skipped, each told to
// skipped (nil: silently).
func (o *Objects) ListClusterLabelled(ctx context.Context, selector string, skipped func(gvr schema.GroupVersionResource, err error)) ([]unstructured.Unstructured, error) {
	kinds, err := o.ClusterKinds()
	if err != nil {
		return nil, err
	}
	var out []unstructured.Unstructured
	for _, gvr := range kinds {
		l, err := o.Dynamic.Resource(gvr).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			if apierrors.IsNotFound(err) || apierrors.IsMethodNotSupported(err) || apierrors.IsForbidden(err) {
				if skipped != nil {
					skipped(gvr, err)
				}
				continue
			}
			return nil, fmt.Errorf("listing %s: %w", gvr.GroupResource(), err)
		}
		out = append(out, l.Items...)
	}
	return out, nil
}

func hasVerbs(have metav1.Verbs, want ...string) bool {
	for _, w := range want {
		found := false
		for _, h := range have {
			if h == w {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// ListLabelled lists every object in ns, of every listable kind, matching selector.
func (o *Objects) ListLabelled(ctx context.Context, ns, selector string) ([]unstructured.Unstructured, error) {
	kinds, err := o.NamespacedKinds()
	if err != nil {
		return nil, err
	}
	var out []unstructured.Unstructured
	for _, gvr := range kinds {
		l, err := o.Dynamic.Resource(gvr).Namespace(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			if apierrors.IsNotFound(err) || apierrors.IsMethodNotSupported(err) || apierrors.IsForbidden(err) {
				continue
			}
			return nil, fmt.Errorf("listing %s: %w", gvr.Resource, err)
		}
		out = append(out, l.Items...)
	}
	return out, nil
}

// Delete removes one object; its dependents (pods of a Deployment) are removed in the background.
func (o *Objects) Delete(ctx context.Context, u *unstructured.Unstructured) error {
	return o.DeleteWith(ctx, u, metav1.DeletePropagationBackground)
}

// DeleteWith removes one object with the given propagation. With Foreground the object stays
// (with a deletionTimestamp) until its dependents are gone, so waiting for it waits for them too.
func (o *Objects) DeleteWith(ctx context.Context, u *unstructured.Unstructured, propagation metav1.DeletionPropagation) error {
	ri, _, err := o.Resource(u.GroupVersionKind(), u.GetNamespace())
	if err != nil {
		return err
	}
	err = ri.Delete(ctx, u.GetName(), metav1.DeleteOptions{PropagationPolicy: &propagation})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting %s %s: %w", strings.ToLower(u.GetKind()), u.GetName(), err)
	}
	return nil
}

// IsKept reports whether an object carries dev.devtool/policy: keep.
func IsKept(u *unstructured.Unstructured) bool {
	return u.GetAnnotations()[AnnotationPolicy] == PolicyKeep
}

// DeleteAndWait deletes an object and returns once it is gone (foreground: its pods first).
func (o *Objects) DeleteAndWait(ctx context.Context, u *unstructured.Unstructured) error {
	ri, _, err := o.Resource(u.GroupVersionKind(), u.GetNamespace())
	if err != nil {
		return err
	}
	fg := metav1.DeletePropagationForeground
	if err := ri.Delete(ctx, u.GetName(), metav1.DeleteOptions{PropagationPolicy: &fg}); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("deleting %s %s: %w", strings.ToLower(u.GetKind()), u.GetName(), err)
	}
	return o.WaitGone(ctx, u)
}

// WaitGone watches one object until it no longer exists.
func (o *Objects) WaitGone(ctx context.Context, u *unstructured.Unstructured) error {
	ri, _, err := o.Resource(u.GroupVersionKind(), u.GetNamespace())
	if err != nil {
		return err
	}
	err = UntilNamed(ctx, u.GetName(), &unstructured.Unstructured{},
		func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return ri.List(ctx, o) },
		ri.Watch,
		func(obj runtime.Object) bool { return obj == nil })
	if err != nil {
		return fmt.Errorf("waiting for %s %s to be deleted: %w", strings.ToLower(u.GetKind()), u.GetName(), err)
	}
	return nil
}

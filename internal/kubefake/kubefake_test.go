package kubefake

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestDeleteCollection: DeleteCollection deletes what its selector matches in its namespace, and
// only that.
func TestDeleteCollection(t *testing.T) {
	gvr := schema.GroupVersionResource{Group: "example.dev", Version: "v1", Resource: "widgets"}
	obj := func(ns, name, owner string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("example.dev/v1")
		u.SetKind("Widget")
		u.SetNamespace(ns)
		u.SetName(name)
		u.SetLabels(map[string]string{"owner": owner})
		return u
	}
	dc := Dynamic(map[schema.GroupVersionResource]string{gvr: "WidgetList"},
		obj("a", "w1", "bob"), obj("a", "w2", "alice"), obj("a", "w3", "bob"), obj("b", "w4", "bob"))
	ctx := context.Background()
	if err := dc.Resource(gvr).Namespace("a").DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "owner=bob"}); err != nil {
		t.Fatal(err)
	}
	left := map[string]bool{}
	for _, ns := range []string{"a", "b"} {
		l, err := dc.Resource(gvr).Namespace(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range l.Items {
			left[it.GetName()] = true
		}
	}
	if len(left) != 2 || !left["w2"] || !left["w4"] {
		t.Fatalf("left after deleting bob's widgets in a: %v, want w2 and w4", left)
	}
}

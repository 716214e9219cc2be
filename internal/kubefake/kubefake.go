// Package kubefake builds client-go's fake dynamic client for tests, with the one behaviour of
// the API server the platform relies on that the fake lacks: DeleteCollection. client-go's fake
// answers it with success and deletes nothing, so a test of "removing a user revokes its tokens"
// would pass or fail on informer timing instead of on what the product does.
package kubefake

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"
)

// Dynamic is dynfake.NewSimpleDynamicClientWithCustomListKinds over an empty scheme, whose
// DeleteCollection deletes the objects its label selector matches, each with its watch event.
func Dynamic(listKinds map[schema.GroupVersionResource]string, objs ...runtime.Object) *dynfake.FakeDynamicClient {
	dc := dynfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), listKinds, objs...)
	tracker := dc.Tracker()
	dc.PrependReactor("delete-collection", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		dca, ok := a.(k8stesting.DeleteCollectionAction)
		if !ok {
			return false, nil, nil
		}
		gvr := dca.GetResource()
		kind, ok := listKinds[gvr]
		if !ok {
			return true, nil, fmt.Errorf("kubefake: no list kind given for %s", gvr)
		}
		// The tracker appends "List" to the kind it is given.
		list, err := tracker.List(gvr, gvr.GroupVersion().WithKind(strings.TrimSuffix(kind, "List")), dca.GetNamespace())
		if err != nil {
			return true, nil, err
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			return true, nil, err
		}
		sel := dca.GetListRestrictions().Labels
		if sel == nil {
			sel = labels.Everything()
		}
		for _, o := range items {
			m, err := meta.Accessor(o)
			if err != nil {
				return true, nil, err
			}
			if !sel.Matches(labels.Set(m.GetLabels())) {
				continue
			}
			if err := tracker.Delete(gvr, m.GetNamespace(), m.GetName()); err != nil {
				return true, nil, err
			}
		}
		return true, nil, nil
	})
	return dc
}

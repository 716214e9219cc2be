package translate

import (
	"bytes"
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

// ToYAML writes objects as one multi-document YAML stream, in the given order, for
// `deploy --dry-run` and golden files. Keys are sorted, so the output is deterministic. Fields
// no one wrote (status, creationTimestamp: null) are left out: they are noise in a manifest.
func ToYAML(objs []runtime.Object) ([]byte, error) {
	return ToYAMLContext(context.Background(), objs)
}

// ToYAMLContext is ToYAML that stops with ctx's error when ctx ends (between objects).
func ToYAMLContext(ctx context.Context, objs []runtime.Object) ([]byte, error) {
	var buf bytes.Buffer
	for i, o := range objs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
		if err != nil {
			return nil, fmt.Errorf("object %d (%T): %w", i, o, err)
		}
		// Translation never sets a status; a typed object still carries zero values there
		// (a StatefulSet's replicas: 0), which would read like an observed state.
		delete(m, "status")
		pruneEmpty(m)
		b, err := yaml.Marshal(m)
		if err != nil {
			return nil, fmt.Errorf("object %d (%T): %w", i, o, err)
		}
		if i > 0 {
			buf.WriteString("---\n")
		}
		buf.Write(b)
	}
	return buf.Bytes(), nil
}

// pruneEmpty removes, at any depth, "creationTimestamp" keys whose value is null and "status"
// keys that hold nothing but empty maps: what typed objects carry when nothing was set. Only
// those shapes go, so an annotation or env entry of the same name (always a string) stays.
func pruneEmpty(v any) {
	switch x := v.(type) {
	case map[string]any:
		for k, val := range x {
			switch {
			case k == "creationTimestamp" && val == nil:
				delete(x, k)
			case k == "status" && deeplyEmpty(val):
				delete(x, k)
			default:
				pruneEmpty(val)
			}
		}
	case []any:
		for _, e := range x {
			pruneEmpty(e)
		}
	}
}

// deeplyEmpty: a map whose values are all empty maps, recursively (status: {loadBalancer: {}}).
func deeplyEmpty(v any) bool {
	m, ok := v.(map[string]any)
	if !ok {
		return false
	}
	for _, val := range m {
		if !deeplyEmpty(val) {
			return false
		}
	}
	return true
}

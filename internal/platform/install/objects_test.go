package install

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devtool/devtool/internal/labels"
)

// TestSharedClusterObjectsAreKept: destroying one install (devtool destroy of its environment)
// deletes its own cluster-scoped objects, which carry its namespace in their names, but never what
// every install of the cluster shares: the CRDs (deleting them would delete every install's users)
// and the membership roles.
func TestSharedClusterObjectsAreKept(t *testing.T) {
	for _, c := range CRDs() {
		md := c["metadata"].(map[string]any)
		ann, _ := md["annotations"].(map[string]any)
		if ann[labels.Policy] != labels.PolicyKeep {
			t.Errorf("CRD %v: annotations %v, want %s: %s", md["name"], ann, labels.Policy, labels.PolicyKeep)
		}
	}
	for _, r := range membershipRoles() {
		if r.Annotations[labels.Policy] != labels.PolicyKeep {
			t.Errorf("membership role %s: annotations %v, want policy keep", r.Name, r.Annotations)
		}
	}
	own := append(platformRBAC("ns1"), ingressObjects("ns1", "devtool-ns1")...)
	for _, o := range own {
		m, ok := o.(metav1.Object)
		if !ok {
			t.Fatalf("%T is not an object", o)
		}
		if m.GetAnnotations()[labels.Policy] == labels.PolicyKeep {
			t.Errorf("%T %s is the install's own and must go with it, but is annotated policy keep", o, m.GetName())
		}
	}
}

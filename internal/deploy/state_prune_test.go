package deploy

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// TestPruneAfterManifest: a devtool.yml deploy without compose/endpoints parts prunes only when
// the previous deploy recorded objects of its own.
func TestPruneAfterManifest(t *testing.T) {
	for _, c := range []struct {
		name       string
		prev       *State
		hasObjects bool
		want       bool
	}{
		{"first deploy", nil, false, false},
		{"previous had compose objects, this has none", &State{ComposeObjects: true}, false, true},
		{"previous had none (commands' own objects)", &State{ComposeObjects: false}, false, false},
		{"this deploy applies objects", &State{ComposeObjects: true}, true, false},
		{"first deploy with objects", nil, true, false},
	} {
		if got := PruneAfterManifest(c.prev, c.hasObjects); got != c.want {
			t.Errorf("%s: PruneAfterManifest = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestStateComposeObjects: the flag survives the state ConfigMap, and a record written before it
// existed reads as false.
func TestStateComposeObjects(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewClientset(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: StateName("old"), Namespace: "dev"},
		Data: map[string]string{"name": "old", "status": StatusDeployed}})
	s := &StateStore{Clientset: cs, Namespace: "dev"}
	for _, want := range []bool{true, false} {
		if err := s.Save(ctx, &State{Name: "shop", Status: StatusDeployed, ComposeObjects: want}); err != nil {
			t.Fatal(err)
		}
		got, err := s.Get(ctx, "shop")
		if err != nil || got == nil || got.ComposeObjects != want {
			t.Fatalf("saved ComposeObjects=%v, read %+v, %v", want, got, err)
		}
	}
	old, err := s.Get(ctx, "old")
	if err != nil || old == nil || old.ComposeObjects {
		t.Fatalf("old record: %+v, %v", old, err)
	}
}

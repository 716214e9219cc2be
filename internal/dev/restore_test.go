package dev

import (
	"context"
	"strconv"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/devtool/devtool/internal/manifest"
)

// TestMarkAndRestoreEqual: the patch that scales the original to zero and the one that
// restores it give back the exact spec, labels and annotations, for both kinds; a second mark
// (up again) keeps the first recorded replica count.
func TestMarkAndRestoreEqual(t *testing.T) {
	ctx := context.Background()
	for _, w := range []Workload{{Deployment: sampleDeployment()}, {StatefulSet: sampleStatefulSet()}} {
		t.Run(w.Kind(), func(t *testing.T) {
			w.Meta().Annotations = map[string]string{"keep": "me"}
			cs := fake.NewSimpleClientset()
			var err error
			if w.StatefulSet != nil {
				_, err = cs.AppsV1().StatefulSets("ns").Create(ctx, w.StatefulSet, metav1.CreateOptions{})
			} else {
				_, err = cs.AppsV1().Deployments("ns").Create(ctx, w.Deployment, metav1.CreateOptions{})
			}
			if err != nil {
				t.Fatal(err)
			}
			read := func() Workload {
				got, ok, err := getWorkload(ctx, cs, "ns", w.Kind(), w.Name())
				if err != nil || !ok {
					t.Fatalf("read: %v %v", ok, err)
				}
				return got
			}
			before := read()
			if err := markOriginal(ctx, cs, "ns", before, "web", SpecDigest(before)); err != nil {
				t.Fatal(err)
			}
			marked := read()
			if marked.Replicas() != 0 || marked.Meta().Annotations[AnnotationReplicas] != strconv.Itoa(int(before.Replicas())) {
				t.Fatalf("marked: %d %v", marked.Replicas(), marked.Meta().Annotations)
			}
			want := marked.Meta().Annotations[AnnotationReplicas]
			if err := markOriginal(ctx, cs, "ns", marked, "web", SpecDigest(marked)); err != nil {
				t.Fatal(err)
			}
			if got := read().Meta().Annotations[AnnotationReplicas]; got != want {
				t.Errorf("second mark recorded %s, want %s", got, want)
			}
			res, err := Down(ctx, DownOptions{Client: cs, Namespace: "ns", Dev: &manifest.Dev{Name: "web"}})
			if err != nil || len(res.Restored) != 1 {
				t.Fatalf("down: %+v %v", res, err)
			}
			after := read()
			if !Cleaned(after.Meta().Annotations) || after.Meta().Annotations["keep"] != "me" {
				t.Errorf("annotations after down: %v", after.Meta().Annotations)
			}
			if !equality.Semantic.DeepEqual(specOf(before), specOf(after)) || !equality.Semantic.DeepEqual(before.Meta().Labels, after.Meta().Labels) {
				t.Errorf("not restored exactly:\n%+v\n%+v", specOf(before), specOf(after))
			}
		})
	}
}

func specOf(w Workload) any {
	if w.StatefulSet != nil {
		return w.StatefulSet.Spec
	}
	return w.Deployment.Spec
}

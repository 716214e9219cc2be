package deploy

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/devtool/devtool/internal/kube"
	"github.com/devtool/devtool/internal/translate"
)

func obj(apiVersion, kind, name string, edit func(*unstructured.Unstructured)) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	u.SetName(name)
	if edit != nil {
		edit(u)
	}
	return u
}

// TestPruneVerdict: what a deploy does with each labelled object it finds. With no applied set
// (a devtool.yml that dropped its compose and endpoints sections) everything translation made
// goes but volumes, kept objects and objects owned by others.
func TestPruneVerdict(t *testing.T) {
	web := obj("apps/v1", "Deployment", "web", nil)
	applied := map[string]bool{key(web): true}
	for _, c := range []struct {
		name    string
		u       *unstructured.Unstructured
		applied map[string]bool
		want    pruneAction
	}{
		{"applied now", web, applied, pruneSkip},
		{"left the file", obj("apps/v1", "Deployment", "old", nil), applied, pruneDelete},
		{"section dropped: deployment", web, nil, pruneDelete},
		{"section dropped: ingress", obj("networking.k8s.io/v1", "Ingress", "shop", nil), nil, pruneDelete},
		{"section dropped: secret", obj("v1", "Secret", "db-password", nil), nil, pruneDelete},
		{"section dropped: volume kept", obj("v1", "PersistentVolumeClaim", "data", nil), nil, pruneKeepVolume},
		{"policy keep", obj("v1", "Service", "db", func(u *unstructured.Unstructured) {
			u.SetAnnotations(map[string]string{kube.AnnotationPolicy: kube.PolicyKeep})
		}), nil, pruneSkip},
		{"owned by another object", obj("v1", "ConfigMap", "x", func(u *unstructured.Unstructured) {
			u.SetOwnerReferences([]metav1.OwnerReference{{Kind: "Job", Name: "j"}})
		}), nil, pruneSkip},
		{"kind translation never makes", obj("v1", "ServiceAccount", "sa", nil), nil, pruneSkip},
	} {
		if got := pruneVerdict(c.u, c.applied); got != c.want {
			t.Errorf("%s: verdict %d, want %d", c.name, got, c.want)
		}
	}
}

// TestManifestDeployPrunesWithoutSections: a translation with nothing to apply prunes instead.
func TestManifestDeployPrunesWithoutSections(t *testing.T) {
	for _, c := range []struct {
		r    *translate.Result
		want bool
	}{
		{nil, false},
		{&translate.Result{}, false},
		{&translate.Result{Objects: []runtime.Object{web()}}, true},
	} {
		if got := hasObjects(c.r); got != c.want {
			t.Errorf("hasObjects(%+v) = %v", c.r, got)
		}
	}
}

func web() runtime.Object { return obj("apps/v1", "Deployment", "web", nil) }

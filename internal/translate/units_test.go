package translate

import (
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/devtool/devtool/internal/compose"
)

// TestNeverPublicPorts pins the table to the spec's Limits section, port for port.
func TestNeverPublicPorts(t *testing.T) {
	want := []int32{
		3306,       // MySQL
		1521, 1830, // OracleDB
		5432,       // PostgreSQL
		1433, 1434, // SQL Server
		7210,             // MaxDB
		7473,             // Neo4j
		8529,             // ArangoDB
		7000, 7001, 9042, // Cassandra
		8086,       // InfluxDB
		9200, 9300, // Elasticsearch
		5984,                       // CouchDB
		27017, 27018, 27019, 28017, // MongoDB
		6379,       // Redis
		8087, 8088, // Riak
		28015, 29015, // RethinkDB ("the separate ports are 28015 and 29015")
		7574, 8983, // Solr
		2345,       // Go debugger
		5858, 9229, // Node debugger
		5005,       // Java debugger
		1234,       // Ruby debugger
		4444, 5678, // Python debugger
	}
	slices.Sort(want)
	if got := neverPublicList(); !slices.Equal(got, want) {
		t.Errorf("never-public ports\n got %v\nwant %v", got, want)
	}
	for _, p := range []int32{80, 443, 8080, 3000, 8280, 15} {
		if IsNeverPublic(p) {
			t.Errorf("port %d should be allowed public", p)
		}
	}
}

func TestKindOf(t *testing.T) {
	named := []compose.VolumeMount{{Kind: compose.VolumeNamed, Source: "d", Target: "/d"}}
	anon := []compose.VolumeMount{{Kind: compose.VolumeAnonymous, Target: "/d"}}
	host := []compose.VolumeMount{{Kind: compose.VolumeHost, Source: "/src", Target: "/d"}}
	tests := []struct {
		restart string
		volumes []compose.VolumeMount
		want    string
	}{
		{"", nil, KindDeployment},
		{compose.RestartAlways, nil, KindDeployment},
		{compose.RestartAlways, host, KindDeployment},
		{compose.RestartAlways, named, KindStatefulSet},
		{compose.RestartAlways, anon, KindStatefulSet},
		{compose.RestartNever, nil, KindJob},
		{compose.RestartNever, named, KindJob},
		{compose.RestartOnFailure, anon, KindJob},
	}
	for _, tc := range tests {
		s := &compose.Service{Restart: compose.Restart{Policy: tc.restart}, Volumes: tc.volumes}
		if got := kindOf(s); got != tc.want {
			t.Errorf("restart %q volumes %v: got %s, want %s", tc.restart, tc.volumes, got, tc.want)
		}
	}
}

func TestProbeSeconds(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want int32
	}{{0, 0}, {time.Millisecond, 1}, {time.Second, 1}, {1500 * time.Millisecond, 2}, {30 * time.Second, 30}}
	for _, tc := range tests {
		if got := probeSeconds(tc.d); got != tc.want {
			t.Errorf("probeSeconds(%v) = %d, want %d", tc.d, got, tc.want)
		}
	}
}

func TestAnonymousName(t *testing.T) {
	taken := map[string]bool{}
	for _, tc := range []struct{ target, want string }{
		{"/var/lib/data", "anon-var-lib-data"},
		{"/Var/Lib_Data", "anon-var-lib-data-2"}, // same slug: numbered
		{"/", "anon"},
		{"/" + strings.Repeat("x", 80), "anon-" + strings.Repeat("x", 45)},
	} {
		got := anonymousName(tc.target, taken)
		taken[got] = true
		if got != tc.want {
			t.Errorf("anonymousName(%q) = %q, want %q", tc.target, got, tc.want)
		}
	}
}

// TestEveryObjectLabelled: destroy and prune find objects by these labels, so none may lack them.
func TestEveryObjectLabelled(t *testing.T) {
	for _, tc := range goldenCases {
		res, err := Translate(tc.project(), tc.opts)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range res.Objects {
			m, err := meta.Accessor(o)
			if err != nil {
				t.Fatal(err)
			}
			gvk := o.GetObjectKind().GroupVersionKind()
			if gvk.Kind == "" || gvk.Version == "" {
				t.Errorf("%s/%s: no apiVersion/kind", tc.name, m.GetName())
			}
			if m.GetNamespace() != tc.opts.Namespace {
				t.Errorf("%s: %s %s: namespace %q", tc.name, gvk.Kind, m.GetName(), m.GetNamespace())
			}
			l := m.GetLabels()
			if l[LabelDeployedBy] != tc.opts.Name || l[LabelManagedBy] != ManagedByValue {
				t.Errorf("%s: %s %s: labels %v", tc.name, gvk.Kind, m.GetName(), l)
			}
		}
	}
}

// TestObjectOrder: PVCs, Services, workloads, Ingresses.
func TestObjectOrder(t *testing.T) {
	rank := map[string]int{"PersistentVolumeClaim": 0, "Service": 1, "Deployment": 2, "StatefulSet": 2, "Job": 2, "Ingress": 3}
	for _, tc := range goldenCases {
		res, err := Translate(tc.project(), tc.opts)
		if err != nil {
			t.Fatal(err)
		}
		last := 0
		for _, o := range res.Objects {
			r := rank[o.GetObjectKind().GroupVersionKind().Kind]
			if r < last {
				t.Errorf("%s: %s out of order", tc.name, o.GetObjectKind().GroupVersionKind().Kind)
			}
			last = r
		}
	}
}

// TestSelectorStable: the selector depends only on the service and environment names, so
// changing anything else about a service keeps it (selectors are immutable).
func TestSelectorStable(t *testing.T) {
	base := &compose.Project{Services: []*compose.Service{{Name: "web", Image: "a:1", Scale: 1}}}
	changed := &compose.Project{Services: []*compose.Service{{Name: "web", Image: "b:2", Scale: 3,
		Labels: map[string]string{"x": "y"}, Ports: []compose.Port{{ContainerPort: 80}}}}}
	sel := func(p *compose.Project) *metav1.LabelSelector {
		res, err := Translate(p, defaultOpts)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range res.Objects {
			if d, ok := o.(*appsv1.Deployment); ok {
				return d.Spec.Selector
			}
		}
		t.Fatal("no Deployment")
		return nil
	}
	a, b := sel(base), sel(changed)
	if !slices.Equal(mapKeys(a.MatchLabels), mapKeys(b.MatchLabels)) || a.MatchLabels[LabelName] != b.MatchLabels[LabelName] {
		t.Errorf("selector changed: %v -> %v", a, b)
	}
}

func mapKeys(m map[string]string) []string {
	var k []string
	for x := range m {
		k = append(k, x+"="+m[x])
	}
	slices.Sort(k)
	return k
}

func TestToYAML(t *testing.T) {
	objs := []runtime.Object{
		&corev1.ConfigMap{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
			ObjectMeta: metav1.ObjectMeta{Name: "a", Annotations: map[string]string{"status": "", "creationTimestamp": "x"}},
			Data:       map[string]string{"b": "2", "a": "1"},
		},
		&corev1.Service{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"}, ObjectMeta: metav1.ObjectMeta{Name: "s"}},
	}
	got, err := ToYAML(objs)
	if err != nil {
		t.Fatal(err)
	}
	want := `apiVersion: v1
data:
  a: "1"
  b: "2"
kind: ConfigMap
metadata:
  annotations:
    creationTimestamp: x
    status: ""
  name: a
---
apiVersion: v1
kind: Service
metadata:
  name: s
spec: {}
`
	if string(got) != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if out, err := ToYAML(nil); err != nil || len(out) != 0 {
		t.Errorf("ToYAML(nil) = %q, %v", out, err)
	}
}

func TestDefaultImage(t *testing.T) {
	if got := DefaultImage("shop", "api"); got != "shop-api:devtool" {
		t.Errorf("DefaultImage = %q", got)
	}
}

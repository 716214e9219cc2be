package ingress

import (
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

type pathSpec struct {
	path, typ, svc string
}

// ing builds an Ingress: rules maps a host to its paths.
func ing(ns, name string, age int, hosts []string, paths [][]pathSpec, def string) *networkingv1.Ingress {
	in := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, CreationTimestamp: metav1.NewTime(t0.Add(time.Duration(age) * time.Minute))}}
	for i, h := range hosts {
		var ps []networkingv1.HTTPIngressPath
		for _, p := range paths[i] {
			pt := networkingv1.PathType(p.typ)
			ps = append(ps, networkingv1.HTTPIngressPath{Path: p.path, PathType: &pt, Backend: svcBackend(p.svc)})
		}
		in.Spec.Rules = append(in.Spec.Rules, networkingv1.IngressRule{Host: h, IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: ps}}})
	}
	if def != "" {
		b := svcBackend(def)
		in.Spec.DefaultBackend = &b
	}
	return in
}

func svcBackend(svc string) networkingv1.IngressBackend {
	return networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: svc, Port: networkingv1.ServiceBackendPort{Number: 80}}}
}

func TestTableMatch(t *testing.T) {
	const P, E, I = "Prefix", "Exact", "ImplementationSpecific"
	sources := []*networkingv1.Ingress{
		// a: foo.example.com with several paths
		ing("a", "main", 10, []string{"foo.example.com"}, [][]pathSpec{{
			{"/", P, "root"}, {"/api", P, "api"}, {"/api/v2/", P, "v2"}, {"/exact", E, "exact"}, {"/impl", I, "impl"},
		}}, "adefault"),
		// b: the same host and path /api, newer: a keeps it; and a longer exact path
		ing("b", "later", 20, []string{"foo.example.com"}, [][]pathSpec{{{"/api", P, "b-api"}, {"/api/users", E, "b-users"}}}, ""),
		// c: an equally old tie on /tie, decided by namespace/name
		ing("c", "x", 30, []string{"tie.example.com"}, [][]pathSpec{{{"/tie", P, "c-tie"}}}, ""),
		ing("d", "x", 30, []string{"tie.example.com"}, [][]pathSpec{{{"/tie", P, "d-tie"}}}, ""),
		// Exact beats Prefix at the same length, whatever the age
		ing("e", "old", 1, []string{"ex.example.com"}, [][]pathSpec{{{"/same", P, "prefix"}}}, ""),
		ing("e", "new", 50, []string{"ex.example.com"}, [][]pathSpec{{{"/same", E, "exact"}}}, ""),
		// wildcard and catch-all
		ing("w", "wild", 5, []string{"*.example.com"}, [][]pathSpec{{{"/", P, "wild"}}}, ""),
		ing("z", "any", 5, []string{""}, [][]pathSpec{{{"/any", P, "any"}}}, ""),
		// a global default backend (no rules)
		ing("z", "default", 0, nil, nil, "global"), // older than a's default
		// exact host with only /only: other paths do not fall through to the wildcard
		ing("n", "narrow", 5, []string{"narrow.example.com"}, [][]pathSpec{{{"/only", P, "narrow"}}}, ""),
	}
	var src []Source
	for _, s := range sources {
		src = append(src, Source{Ingress: s, Private: s.Namespace == "b"})
	}
	tab, skipped := NewTable(src, TableOptions{})
	if len(skipped) != 0 {
		t.Fatalf("skipped %v", skipped)
	}
	cases := []struct {
		host, path, want string
		private          bool
	}{
		{"foo.example.com", "/", "root", false},
		{"foo.example.com", "/index.html", "root", false},
		{"FOO.Example.com.", "/", "root", false},        // case and trailing dot
		{"foo.example.com:31443", "/api", "api", false}, // the port is ignored
		{"foo.example.com", "/api", "api", false},       // oldest of a and b wins the tie
		{"foo.example.com", "/api/", "api", false},
		{"foo.example.com", "/apix", "root", false}, // element-wise prefix
		{"foo.example.com", "/api/v2", "v2", false}, // rule's trailing slash ignored
		{"foo.example.com", "/api/v2/x", "v2", false},
		{"foo.example.com", "/api/users", "b-users", true}, // longest wins over the older
		{"foo.example.com", "/api/users/1", "api", false},  // exact does not match below
		{"foo.example.com", "/exact", "exact", false},
		{"foo.example.com", "/exact/", "root", false},
		{"foo.example.com", "/impl/x", "impl", false},
		{"tie.example.com", "/tie/1", "c-tie", false},
		{"tie.example.com", "/other", "global", false}, // no path, no default of the host's Ingresses: the global one
		{"ex.example.com", "/same", "exact", false},
		{"ex.example.com", "/same/x", "prefix", false},
		{"bar.example.com", "/x", "wild", false},
		{"a.bar.example.com", "/any", "any", false}, // * is one label
		{"example.com", "/any", "any", false},
		{"example.com", "/nothing", "global", false},
		{"narrow.example.com", "/only/1", "narrow", false},
		{"narrow.example.com", "/", "global", false}, // no falling through to the wildcard
		{"[::1]:8443", "/any", "any", false},
	}
	for _, c := range cases {
		r, ok := tab.Match(c.host, c.path)
		if !ok || r.Backend.Service != c.want || r.Private != c.private {
			t.Errorf("Match(%q, %q) = %s private=%v ok=%v, want %s private=%v", c.host, c.path, r.Backend.Service, r.Private, ok, c.want, c.private)
		}
	}
	// the host's own Ingress default backend comes before the global one
	if r, _ := tab.Match("foo.example.com", "/"); r.Backend.Service != "root" {
		t.Errorf("root: %v", r)
	}
	tab2, _ := NewTable([]Source{{Ingress: ing("a", "main", 10, []string{"h.example.com"}, [][]pathSpec{{{"/x", P, "x"}}}, "hdefault")}, {Ingress: sources[8]}}, TableOptions{})
	if r, _ := tab2.Match("h.example.com", "/y"); r.Backend.Service != "hdefault" {
		t.Errorf("host default: %v", r)
	}
	empty, _ := NewTable(nil, TableOptions{})
	if _, ok := empty.Match("foo", "/"); ok {
		t.Error("an empty table matched")
	}
}

func TestTableStrict(t *testing.T) {
	const P = "Prefix"
	o := TableOptions{Strict: true, Domain: "devtool.localhost", PlatformNamespace: "devtool-system"}
	src := []Source{
		{Ingress: ing("alice", "web", 1, []string{"web-alice.devtool.localhost"}, [][]pathSpec{{{"/", P, "alice-web"}}}, "")},
		// bob tries alice's name, a wildcard, every host, and a global default
		{Ingress: ing("bob", "steal", 0, []string{"web-alice.devtool.localhost", "*.devtool.localhost", "", "devtool.localhost"},
			[][]pathSpec{{{"/", P, "bob"}}, {{"/", P, "bob"}}, {{"/", P, "bob"}}, {{"/", P, "bob"}}}, "bob-default")},
		{Ingress: ing("bob", "own", 2, []string{"web-bob.devtool.localhost", "bob.example.com"}, [][]pathSpec{{{"/", P, "bob-web"}}, {{"/", P, "bob-custom"}}}, "")},
		{Ingress: ing("devtool-system", "fallback", 3, nil, nil, "platform-404")},
	}
	tab, skipped := NewTable(src, o)
	if len(skipped) != 4 {
		t.Errorf("skipped %d rules, want 4: %v", len(skipped), skipped)
	}
	for _, c := range []struct{ host, want string }{
		{"web-alice.devtool.localhost", "alice-web"},
		{"web-bob.devtool.localhost", "bob-web"},
		{"bob.example.com", "bob-custom"},
		{"other-carol.devtool.localhost", "platform-404"},
		{"devtool.localhost", "platform-404"},
	} {
		if r, _ := tab.Match(c.host, "/"); r.Backend.Service != c.want {
			t.Errorf("%s: %s, want %s", c.host, r.Backend.Service, c.want)
		}
	}
}

func TestCleanPath(t *testing.T) {
	for in, want := range map[string]string{
		"":                   "/",
		"/":                  "/",
		"/a/b":               "/a/b",
		"/a/b/":              "/a/b/",
		"/public/../private": "/private",
		"//x//y/":            "/x/y/",
		"/a/./b":             "/a/b",
		"/../..":             "/",
		"/.well-known/x":     "/.well-known/x",
	} {
		if got := CleanPath(in); got != want {
			t.Errorf("CleanPath(%q) = %q, want %q", in, got, want)
		}
	}
}

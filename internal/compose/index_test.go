package compose

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestLookupsLinear: 20,000 services (names converted for Kubernetes), each with a port, a
// depends_on edge, a named volume and an endpoint route, load with O(N) index work, and looking
// every service up by its converted and its written name costs no more; filtering the slice (as
// a deploy subset does) costs one rebuild. Before, each lookup was a linear search: 20,000 routes
// and checks made 4·10^8 comparisons.
func TestLookupsLinear(t *testing.T) {
	const n = 20000
	var b strings.Builder
	b.WriteString("services:\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "  s_%d:\n    image: x\n    ports: [\"80\"]\n    volumes: [\"v_%d:/data\"]\n", i, i)
		if i > 0 {
			fmt.Fprintf(&b, "    depends_on: [s_%d]\n", i-1)
		}
	}
	b.WriteString("volumes:\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "  v_%d: {}\n", i)
	}
	b.WriteString("endpoints:\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "  - {path: /s%d, service: s_%d, port: 80}\n", i, i)
	}
	done := make(chan struct{})
	var p *Project
	var err error
	indexMu.Lock()
	indexScans = 0
	indexMu.Unlock()
	start := time.Now()
	go func() {
		defer close(done)
		p, err = loadYAML(t, b.String(), nil, nil)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Minute): // a generous guard: a hang fails instead of stalling CI
		t.Fatal("loading 20,000 services did not end")
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("loaded %d services, %d volumes, %d endpoint rules in %v", len(p.Services), len(p.Volumes), len(p.Endpoints[0].Rules), time.Since(start).Round(time.Millisecond))
	scans := func() int {
		indexMu.Lock()
		defer indexMu.Unlock()
		return indexScans
	}
	loadScans := scans()
	if loadScans > 10*2*n {
		t.Fatalf("loading visited %d entries building indexes: not linear in %d services and volumes", loadScans, 2*n)
	}
	lookupAll := func() {
		for i := 0; i < n; i++ {
			s := p.Service(fmt.Sprintf("s-%d", i))
			if s == nil || p.ServiceNamed(fmt.Sprintf("s_%d", i)) != s || p.Volume(fmt.Sprintf("v-%d", i)) == nil {
				t.Fatalf("service %d not found", i)
			}
			if p.Service(fmt.Sprintf("missing-%d", i)) != nil {
				t.Fatal("found a missing service")
			}
		}
	}
	lookupAll() // the loader invalidated the index after converting names: one build of each
	if got := scans() - loadScans; got > 2*n {
		t.Fatalf("%d lookups visited %d entries, want at most one build of each index (%d)", 4*n, got, 2*n)
	}
	loadScans = scans()
	lookupAll()
	if got := scans(); got != loadScans {
		t.Fatalf("%d more lookups rebuilt an index (%d entries visited)", 4*n, got-loadScans)
	}
	// A deploy subset: the slice filtered, then every kept service looked up.
	p.Services = p.Services[n/2:]
	for i := n / 2; i < n; i++ {
		if p.Service(fmt.Sprintf("s-%d", i)) == nil {
			t.Fatalf("service %d lost", i)
		}
	}
	if p.Service("s-0") != nil {
		t.Fatal("a filtered-out service is still found")
	}
	if got := scans() - loadScans; got != n/2 {
		t.Fatalf("after filtering: %d entries visited, want one rebuild (%d)", got, n/2)
	}
	t.Logf("index entries visited: %d while loading, %d after filtering", loadScans, scans()-loadScans)
}

// TestIndexFollowsChanges: the index never returns an entry that no longer has the name asked
// for, and sees appended, replaced and renamed (with InvalidateIndex) services.
func TestIndexFollowsChanges(t *testing.T) {
	p := &Project{Services: []*Service{{Name: "a"}, {Name: "b"}}}
	if p.Service("b") != p.Services[1] || p.Service("c") != nil {
		t.Fatal("lookup")
	}
	p.Services = append(p.Services, &Service{Name: "c"})
	if p.Service("c") != p.Services[2] {
		t.Fatal("appended service not found")
	}
	p.Services[0], p.Services[1] = p.Services[1], p.Services[0] // swapped in place
	if p.Service("a").Name != "a" || p.Service("b").Name != "b" {
		t.Fatal("swapped services confused")
	}
	p.Services[2].Name = "d" // renamed in place
	if p.Service("c") != nil {
		t.Fatal("a renamed service is found by its old name")
	}
	p.InvalidateIndex()
	if p.Service("d") == nil {
		t.Fatal("a renamed service is not found by its new name")
	}
	q := *p // a copy shares the index but checks its own slice
	q.Services = q.Services[:1]
	if q.Service("d") != nil || p.Service("d") == nil {
		t.Fatal("copies confused")
	}
}

// TestSecretAndConfigLookupsIndexed: looking up each of n secrets and configs (as every service's
// secrets: and configs: references are checked and translated) builds each index once.
func TestSecretAndConfigLookupsIndexed(t *testing.T) {
	const n = 5000
	p := &Project{}
	for i := 0; i < n; i++ {
		p.Secrets = append(p.Secrets, &FileObject{Name: fmt.Sprintf("s%d", i)})
		p.Configs = append(p.Configs, &FileObject{Name: fmt.Sprintf("c%d", i)})
	}
	p.Secrets = append(p.Secrets, &FileObject{Name: "s0"}) // a duplicate: the first wins, as before
	indexMu.Lock()
	indexScans = 0
	indexMu.Unlock()
	for i := 0; i < n; i++ {
		if s := p.Secret(fmt.Sprintf("s%d", i)); s != p.Secrets[i] {
			t.Fatalf("secret %d: %v", i, s)
		}
		if c := p.Config(fmt.Sprintf("c%d", i)); c != p.Configs[i] {
			t.Fatalf("config %d: %v", i, c)
		}
		if p.Secret(fmt.Sprintf("c%d", i)) != nil || p.Config(fmt.Sprintf("s%d", i)) != nil {
			t.Fatal("found a name of the other kind")
		}
	}
	indexMu.Lock()
	scans := indexScans
	indexMu.Unlock()
	if want := 2*n + 1; scans != want {
		t.Fatalf("%d lookups visited %d entries, want one build of each index (%d)", 4*n, scans, want)
	}
	p.Secrets = append(p.Secrets, &FileObject{Name: "late"})
	if p.Secret("late") == nil {
		t.Fatal("an appended secret is not found")
	}
}

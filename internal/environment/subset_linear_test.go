package environment

import (
	"fmt"
	"testing"
	"time"

	"github.com/devtool/devtool/internal/compose"
)

// TestKeepServicesLinear: a deploy.compose subset naming 20,000 services as written (converted
// for Kubernetes), each depending on the previous one, is planned through the project's index:
// every service kept, in well under the generous guard (each lookup was a linear search).
func TestKeepServicesLinear(t *testing.T) {
	const n = 20000
	p := &compose.Project{Renamed: map[string]string{}}
	names := make([]string, 0, n)
	for i := 0; i < n; i++ {
		s := &compose.Service{Name: fmt.Sprintf("s-%d", i)}
		if i > 0 {
			s.DependsOn = []compose.Dependency{{Service: fmt.Sprintf("s-%d", i-1)}}
		}
		p.Services = append(p.Services, s)
		p.Renamed[fmt.Sprintf("service:s_%d", i)] = s.Name
		if i%2 == 1 { // s_19999 and, through depends_on, every other
			names = append(names, fmt.Sprintf("s_%d", i))
		}
	}
	p.Services = append(p.Services, &compose.Service{Name: "other"})
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- keepServices(p, names) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("keepServices did not end")
	}
	t.Logf("kept %d of %d services in %v", len(p.Services), n+1, time.Since(start).Round(time.Millisecond))
	if len(p.Services) != n || p.Service("other") != nil || p.Service("s-19999") == nil {
		t.Fatalf("kept %d services", len(p.Services))
	}
}

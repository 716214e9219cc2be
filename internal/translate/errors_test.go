package translate

import (
	"strings"
	"testing"

	"github.com/devtool/devtool/internal/compose"
)

func TestErrors(t *testing.T) {
	anon := []compose.VolumeMount{{Kind: compose.VolumeAnonymous, Target: "/data"}}
	svc := func(name string, mod func(*compose.Service)) *compose.Service {
		s := &compose.Service{Name: name, Pos: pos(7), Image: "a:1", Scale: 1}
		if mod != nil {
			mod(s)
		}
		return s
	}
	one := func(mod func(*compose.Service)) *compose.Project {
		return &compose.Project{Services: []*compose.Service{svc("web", mod)}}
	}
	withPorts := func(s *compose.Service) { s.Ports = []compose.Port{{ContainerPort: 80}} }

	tests := []struct {
		name    string
		project *compose.Project
		opts    *Options
		want    []string // substrings of the error
	}{
		// dev.devtool/update against the kind (spec A5), with the service and its position named.
		{"update recreate on a StatefulSet", one(func(s *compose.Service) {
			s.Volumes = anon
			s.Labels = map[string]string{AnnotationUpdate: "recreate"}
		}), nil, []string{"compose.yml:7:3", `service "web"`, "recreate is only for Deployments"}},
		{"update on-delete on a Deployment", one(func(s *compose.Service) {
			s.Labels = map[string]string{AnnotationUpdate: "on-delete"}
		}), nil, []string{"compose.yml:7:3", `service "web"`, "on-delete is only for StatefulSets"}},
		{"update rolling on a Job", one(func(s *compose.Service) {
			s.Restart.Policy = compose.RestartNever
			s.Labels = map[string]string{AnnotationUpdate: "rolling"}
		}), nil, []string{"compose.yml:7:3", `service "web"`, "a Job", "has no update strategy"}},
		{"update unknown value", one(func(s *compose.Service) {
			s.Labels = map[string]string{AnnotationUpdate: "blue-green"}
		}), nil, []string{"compose.yml:7:3", `unknown value "blue-green"`}},

		// depends_on
		{"depends on a missing service", one(func(s *compose.Service) {
			s.DependsOn = []compose.Dependency{{Service: "db", Pos: pos(9)}}
		}), nil, []string{"compose.yml:9:3", `"web" depends on "db"`, "not a service"}},
		{"depends on itself", one(func(s *compose.Service) {
			s.DependsOn = []compose.Dependency{{Service: "web", Pos: pos(9)}}
		}), nil, []string{"depends on itself"}},
		{"depends_on cycle", &compose.Project{Services: []*compose.Service{
			svc("a", func(s *compose.Service) { s.DependsOn = []compose.Dependency{{Service: "b", Pos: pos(3)}} }),
			svc("b", func(s *compose.Service) { s.DependsOn = []compose.Dependency{{Service: "c", Pos: pos(4)}} }),
			svc("c", func(s *compose.Service) { s.DependsOn = []compose.Dependency{{Service: "a", Pos: pos(5)}} }),
		}}, nil, []string{"cycle: a -> b -> c -> a"}},
		{"completed on an explicit restart always", &compose.Project{Services: []*compose.Service{
			svc("web", func(s *compose.Service) {
				s.DependsOn = []compose.Dependency{{Service: "db", Condition: compose.ConditionCompleted, Pos: pos(11)}}
			}),
			svc("db", func(s *compose.Service) { s.Restart = compose.Restart{Policy: compose.RestartAlways, Explicit: true} }),
		}}, nil, []string{"compose.yml:11:3", "never completes"}},
		{"unknown condition", &compose.Project{Services: []*compose.Service{
			svc("web", func(s *compose.Service) {
				s.DependsOn = []compose.Dependency{{Service: "db", Condition: "service_ready"}}
			}),
			svc("db", nil),
		}}, nil, []string{`unknown depends_on condition "service_ready"`}},

		// volumes
		{"undefined named volume", one(func(s *compose.Service) {
			s.Volumes = []compose.VolumeMount{{Kind: compose.VolumeNamed, Source: "data", Target: "/data", Pos: pos(12)}}
		}), nil, []string{"compose.yml:12:3", `mounts volume "data"`, "not defined"}},
		{"invalid volume name", &compose.Project{Volumes: []*compose.Volume{{Name: "my_data", Pos: pos(20)}}},
			nil, []string{"compose.yml:20:3", `volume name "my_data"`}},
		{"bad volume size", &compose.Project{Volumes: []*compose.Volume{{Name: "data", Size: "lots", Pos: pos(20)}}},
			nil, []string{"compose.yml:20:3", `size "lots"`}},
		{"relative mount target", one(func(s *compose.Service) {
			s.Volumes = []compose.VolumeMount{{Kind: compose.VolumeAnonymous, Target: "data"}}
		}),
			nil, []string{"not an absolute path"}},
		{"two mounts on one path", one(func(s *compose.Service) {
			s.Volumes = []compose.VolumeMount{{Kind: compose.VolumeAnonymous, Target: "/data"}, {Kind: compose.VolumeAnonymous, Target: "/data/"}}
		}), nil, []string{"two volumes are mounted at /data"}},

		// endpoints
		{"endpoint to a missing service", &compose.Project{
			Services:  []*compose.Service{svc("web", withPorts)},
			Endpoints: []*compose.Endpoint{{Name: "www", Rules: []compose.Route{{Path: "/", Service: "api", Port: 80, Pos: pos(30)}}}},
		}, nil, []string{"compose.yml:30:3", `endpoint "www"`, `service "api"`, "not a service"}},
		{"endpoint to a service without ports", &compose.Project{
			Services:  []*compose.Service{svc("web", nil)},
			Endpoints: []*compose.Endpoint{{Rules: []compose.Route{{Path: "/", Service: "web", Port: 80}}}},
		}, nil, []string{"has no ports"}},
		{"endpoint to a port the service lacks", &compose.Project{
			Services:  []*compose.Service{svc("web", withPorts)},
			Endpoints: []*compose.Endpoint{{Rules: []compose.Route{{Path: "/", Service: "web", Port: 8080}}}},
		}, nil, []string{"port 8080", "does not expose it"}},
		{"endpoint path without slash", &compose.Project{
			Services:  []*compose.Service{svc("web", withPorts)},
			Endpoints: []*compose.Endpoint{{Rules: []compose.Route{{Path: "api", Service: "web", Port: 80}}}},
		}, nil, []string{`path "api" must start with /`}},
		{"endpoint path twice", &compose.Project{
			Services:  []*compose.Service{svc("web", withPorts)},
			Endpoints: []*compose.Endpoint{{Rules: []compose.Route{{Path: "/", Service: "web", Port: 80}, {Path: "/", Service: "web", Port: 80}}}},
		}, nil, []string{"routes path / twice"}},
		{"endpoint name taken by a public port", &compose.Project{
			Services:  []*compose.Service{svc("web", func(s *compose.Service) { s.Ports = []compose.Port{{ContainerPort: 80, HostPort: 80}} })},
			Endpoints: []*compose.Endpoint{{Name: "web", Rules: []compose.Route{{Path: "/", Service: "web", Port: 80}}}},
		}, nil, []string{`public port 80 of service "web" and endpoint "web" both need an Ingress named "web"`}},
		{"host label too long", &compose.Project{
			Services:  []*compose.Service{svc("web", withPorts)},
			Endpoints: []*compose.Endpoint{{Name: strings.Repeat("e", 60), Rules: []compose.Route{{Path: "/", Service: "web", Port: 80}}}},
		}, nil, []string{"is not a valid DNS label"}},

		// services and options
		{"invalid service name", one(func(s *compose.Service) { s.Name = "My_Web" }), nil, []string{"compose.yml:7:3", `service name "My_Web"`}},
		{"no image and no build", one(func(s *compose.Service) { s.Image = "" }), nil, []string{"neither image nor build"}},
		{"bad cpu", one(func(s *compose.Service) { s.Resources.Limits.CPU = "two" }), nil, []string{`limits cpu "two"`}},
		{"request above limit", one(func(s *compose.Service) {
			s.Resources.Requests.Memory = "1Gi"
			s.Resources.Limits.Memory = "512Mi"
		}), nil, []string{"memory request 1Gi is more than its limit 512Mi"}},
		{"bad port", one(func(s *compose.Service) { s.Ports = []compose.Port{{ContainerPort: 70000}} }), nil, []string{"container port 70000"}},
		{"unknown restart policy", one(func(s *compose.Service) { s.Restart.Policy = "sometimes" }), nil, []string{`unknown restart policy "sometimes"`}},
		{"bad annotation key", one(func(s *compose.Service) { s.Labels = map[string]string{"has space": "x"} }), nil, []string{`label "has space"`}},
		{"empty environment name", one(nil), &Options{Namespace: "ns"}, []string{"environment name is empty"}},
		{"invalid namespace", one(nil), &Options{Name: "shop", Namespace: "Dev_Alice"}, []string{`namespace "Dev_Alice"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			opts := defaultOpts
			if tc.opts != nil {
				opts = *tc.opts
			}
			_, err := Translate(tc.project, opts)
			if err == nil {
				t.Fatalf("no error; want one containing %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

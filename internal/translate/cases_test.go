package translate

import (
	"time"

	"github.com/devtool/devtool/internal/compose"
)

// Test projects, built by hand (the loader is tested on its own). Each case covers a group of
// rules; golden_test.go renders them to testdata/<name>.objects.yaml and <name>.summary.yaml,
// and the integration test sends their objects to a real API server.

func pos(line int) compose.Position {
	return compose.Position{File: "compose.yml", Line: line, Column: 3}
}

func dur(s string) time.Duration {
	d, err := time.ParseDuration(s)
	if err != nil {
		panic(err)
	}
	return d
}

func durp(s string) *time.Duration { d := dur(s); return &d }

func intp(i int) *int { return &i }

type testCase struct {
	name    string
	project func() *compose.Project
	opts    Options
}

var defaultOpts = Options{Name: "shop", Namespace: "dev-alice", ClusterDomain: "apps.example.com"}

var goldenCases = []testCase{
	{
		// Issue 11's Compose fields: user, annotations, a headless Service, expose (private
		// ports), tmpfs, secrets and configs mounted as files (an external one mounted, not
		// created), a service others wait on to complete without a restart policy (a Job, with
		// a warning) whose anonymous volume gets its own claim.
		name: "compat",
		opts: defaultOpts,
		project: func() *compose.Project {
			uid, gid := int64(1000), int64(2000)
			mode := int32(0o440)
			return &compose.Project{
				Secrets: []*compose.FileObject{
					{Name: "db_password", File: "/p/db_password.txt", Data: []byte("s3cret\n"), Pos: pos(30)},
					{Name: "tls", Pos: pos(32)}, // external
				},
				Configs: []*compose.FileObject{{Name: "app.ini", Data: []byte("mode=dev\n"), Pos: pos(34)}},
				Services: []*compose.Service{
					{
						Name: "web", Pos: pos(2), Image: "web:1", Scale: 2,
						RunAsUser: &uid, RunAsGroup: &gid, Headless: true,
						Annotations: map[string]string{"team": "a"}, Labels: map[string]string{"tier": "front"},
						Ports:   []compose.Port{{ContainerPort: 8080}, {ContainerPort: 9090, Protocol: "UDP"}},
						Volumes: []compose.VolumeMount{{Kind: compose.VolumeTmpfs, Target: "/run", Size: "64Mi"}},
						Secrets: []compose.FileMount{
							{Source: "db_password", Target: "/run/secrets/db_password", Mode: &mode},
							{Source: "tls", Target: "/etc/tls/cert.pem"},
						},
						Configs:   []compose.FileMount{{Source: "app.ini", Target: "/etc/app.ini"}},
						DependsOn: []compose.Dependency{{Service: "migrate", Condition: compose.ConditionCompleted, Pos: pos(12)}},
						Restart:   compose.Restart{Policy: compose.RestartAlways},
					},
					{
						Name: "migrate", Pos: pos(20), Image: "web:1", Scale: 1, Command: []string{"migrate"},
						Volumes:   []compose.VolumeMount{{Kind: compose.VolumeAnonymous, Target: "/cache"}},
						Resources: compose.Resources{Requests: compose.ResourceList{Storage: "2Gi"}},
						Restart:   compose.Restart{Policy: compose.RestartAlways},
					},
				},
			}
		},
	},
	{
		// A Deployment with every container field, a Service with a host port that differs, and
		// one public port.
		name: "containers",
		opts: defaultOpts,
		project: func() *compose.Project {
			return &compose.Project{Services: []*compose.Service{{
				Name:        "web",
				Pos:         pos(2),
				Image:       "nginx:1.27",
				CapAdd:      []string{"NET_ADMIN", "SYS_TIME"},
				CapDrop:     []string{"MKNOD"},
				Command:     []string{"nginx", "-g", "daemon off;"},
				Entrypoint:  []string{"/docker-entrypoint.sh"},
				WorkingDir:  "/srv",
				Environment: map[string]string{"ZED": "last", "ALPHA": "first", "EMPTY": ""},
				Labels:      map[string]string{"com.example.team": "shop", "description": "front end"},
				Ports: []compose.Port{
					{ContainerPort: 8080},
					{ContainerPort: 3000, HostPort: 80},
					{ContainerPort: 3000}, // written twice: one container port
					{ContainerPort: 53, Protocol: "UDP"},
				},
				Scale: 2,
				Resources: compose.Resources{
					Requests: compose.ResourceList{CPU: "250m", Memory: "64Mi"},
					Limits:   compose.ResourceList{CPU: "1", Memory: "256Mi"},
				},
				Restart:         compose.Restart{Policy: compose.RestartAlways},
				StopGracePeriod: durp("1500ms"),
				NodeSelector:    map[string]string{"disktype": "ssd", "kubernetes.io/os": "linux"},
			}}}
		},
	},
	{
		// The restart table: always → Deployment, never → Job without retries, on-failure → Job
		// retried in place, max_attempts → backoffLimit. An empty policy is the default, always.
		name: "restart",
		opts: defaultOpts,
		project: func() *compose.Project {
			return &compose.Project{Services: []*compose.Service{
				{Name: "api", Image: "api:1", Scale: 1, Restart: compose.Restart{Policy: compose.RestartAlways}},
				{Name: "default", Image: "api:1", Scale: 1},
				{Name: "seed", Image: "seed:1", Scale: 1, Restart: compose.Restart{Policy: compose.RestartNever}},
				{Name: "migrate", Image: "migrate:1", Scale: 1, Restart: compose.Restart{Policy: compose.RestartOnFailure}},
				{Name: "retry", Image: "migrate:1", Scale: 3, Restart: compose.Restart{Policy: compose.RestartOnFailure, MaxAttempts: intp(4)}},
			}}
		},
	},
	{
		// Volumes: a named volume shared by two long-running services (co-scheduled) and a Job
		// that runs before them, anonymous volumes (claim templates; emptyDir in a Job), a host
		// volume (not mounted), read-only mounts (not seeded), the seeding opt-out, class, size,
		// labels, and a volume no one mounts.
		name: "volumes",
		opts: defaultOpts,
		project: func() *compose.Project {
			return &compose.Project{
				Volumes: []*compose.Volume{
					{Name: "pgdata", Class: "fast", Size: "5Gi", Labels: map[string]string{"backup": "daily"}, Pos: pos(40)},
					{Name: "unused", Pos: pos(44)},
					{Name: "shared", Pos: pos(45)},
				},
				Services: []*compose.Service{
					{
						Name: "init-db", Image: "busybox:1", Scale: 1,
						Restart: compose.Restart{Policy: compose.RestartNever},
						Volumes: []compose.VolumeMount{
							{Kind: compose.VolumeNamed, Source: "pgdata", Target: "/data"},
							{Kind: compose.VolumeAnonymous, Target: "/scratch"},
						},
					},
					{
						Name: "db", Image: "postgres:16", Scale: 1, Ports: []compose.Port{{ContainerPort: 5432}},
						DependsOn: []compose.Dependency{{Service: "init-db", Condition: compose.ConditionCompleted}},
						Volumes: []compose.VolumeMount{
							{Kind: compose.VolumeNamed, Source: "pgdata", Target: "/var/lib/postgresql/data"},
							{Kind: compose.VolumeAnonymous, Target: "/var/run/postgresql/"},
							{Kind: compose.VolumeHost, Source: "/home/alice/shop/initdb", Target: "/docker-entrypoint-initdb.d"},
						},
					},
					{
						Name: "backup", Image: "backup:1", Scale: 2,
						Labels: map[string]string{LabelInitVolumes: "false"},
						Volumes: []compose.VolumeMount{
							{Kind: compose.VolumeNamed, Source: "pgdata", Target: "/backup/pg", ReadOnly: true},
							{Kind: compose.VolumeNamed, Source: "shared", Target: "/shared"},
						},
					},
					{
						Name: "worker", Image: "worker:1", Scale: 3,
						Volumes: []compose.VolumeMount{
							{Kind: compose.VolumeNamed, Source: "shared", Target: "/work/it's here"},
							{Kind: compose.VolumeAnonymous, Target: "/cache"},
						},
					},
				},
			}
		},
	},
	{
		// dev.devtool/update with each valid kind: rolling and recreate on Deployments, rolling
		// and on-delete on StatefulSets, and the defaults.
		name: "update",
		opts: defaultOpts,
		project: func() *compose.Project {
			anon := []compose.VolumeMount{{Kind: compose.VolumeAnonymous, Target: "/data"}}
			return &compose.Project{Services: []*compose.Service{
				{Name: "dep-default", Image: "a:1", Scale: 1},
				{Name: "dep-rolling", Image: "a:1", Scale: 1, Labels: map[string]string{AnnotationUpdate: "rolling"}},
				{Name: "dep-recreate", Image: "a:1", Scale: 1, Labels: map[string]string{AnnotationUpdate: "recreate"}},
				{Name: "sts-default", Image: "a:1", Scale: 1, Volumes: anon},
				{Name: "sts-rolling", Image: "a:1", Scale: 1, Volumes: anon, Labels: map[string]string{AnnotationUpdate: "rolling"}},
				{Name: "sts-on-delete", Image: "a:1", Scale: 1, Volumes: anon, Labels: map[string]string{AnnotationUpdate: "on-delete"}},
			}}
		},
	},
	{
		// Healthchecks: HTTP and exec (CMD-SHELL arrives as sh -c), readiness only (default),
		// liveness only, both, sub-second durations rounded up, unset values left to Kubernetes.
		name: "healthchecks",
		opts: defaultOpts,
		project: func() *compose.Project {
			return &compose.Project{Services: []*compose.Service{
				{Name: "http", Image: "a:1", Scale: 1, Ports: []compose.Port{{ContainerPort: 8080}}, Healthcheck: &compose.Healthcheck{
					HTTP: &compose.HTTPCheck{Path: "/healthz", Port: 8080}, Interval: dur("5s"), Timeout: dur("500ms"),
					StartPeriod: dur("10s"), Retries: 5, Readiness: true,
				}},
				{Name: "shell", Image: "a:1", Scale: 1, Healthcheck: &compose.Healthcheck{
					Exec: []string{"sh", "-c", "pg_isready -U postgres || exit 1"}, Interval: dur("1500ms"), Readiness: true, Liveness: true,
				}},
				{Name: "cmd", Image: "a:1", Scale: 1, Healthcheck: &compose.Healthcheck{
					Exec: []string{"redis-cli", "ping"}, Timeout: dur("1ms"), Liveness: true,
				}},
				{Name: "neither", Image: "a:1", Scale: 1, Healthcheck: &compose.Healthcheck{Exec: []string{"true"}}},
			}}
		},
	},
	{
		// Public ports: several on one service (one Ingress each), never-public ports, UDP, a
		// host port equal to the container port, and a service with one public port.
		name: "public-ports",
		opts: defaultOpts,
		project: func() *compose.Project {
			return &compose.Project{Services: []*compose.Service{
				// dev.devtool/policy: keep reaches the Service and the Ingresses too.
				{Name: "app", Image: "a:1", Scale: 1, Labels: map[string]string{AnnotationPolicy: PolicyKeep}, Ports: []compose.Port{
					{ContainerPort: 8080, HostPort: 8080},
					{ContainerPort: 9000, HostPort: 19000},
					{ContainerPort: 9229, HostPort: 9229}, // Node debugger: never public
					{ContainerPort: 5000, HostPort: 5000, Protocol: "UDP"},
					{ContainerPort: 7070},
				}},
				{Name: "db", Image: "postgres:16", Scale: 1, Ports: []compose.Port{{ContainerPort: 5432, HostPort: 5432}}},
				{Name: "docs", Image: "docs:1", Scale: 1, Ports: []compose.Port{{ContainerPort: 80, HostPort: 8000}}},
			}}
		},
	},
	{
		// Endpoints in the list notation: one Ingress named after the environment, a path per route;
		// the never-public database port is reachable through an endpoint on purpose.
		name: "endpoints-list",
		opts: defaultOpts,
		project: func() *compose.Project {
			return &compose.Project{
				Services: []*compose.Service{
					{Name: "frontend", Image: "fe:1", Scale: 1, Ports: []compose.Port{{ContainerPort: 80}}},
					{Name: "api", Image: "api:1", Scale: 1, Ports: []compose.Port{{ContainerPort: 8080, HostPort: 18080}}},
				},
				Endpoints: []*compose.Endpoint{{Rules: []compose.Route{
					{Path: "/", Service: "frontend", Port: 80},
					{Path: "/api", Service: "api", Port: 18080},
				}}},
			}
		},
	},
	{
		// Endpoints in the map and object notations without a cluster domain: no hosts, no URLs,
		// and a warning that says why; endpoint labels become Ingress annotations.
		name: "endpoints-map-no-domain",
		opts: Options{Name: "shop", Namespace: "dev-alice"},
		project: func() *compose.Project {
			return &compose.Project{
				Services: []*compose.Service{
					{Name: "frontend", Image: "fe:1", Scale: 1, Ports: []compose.Port{{ContainerPort: 80}}},
					{Name: "admin", Image: "admin:1", Scale: 1, Ports: []compose.Port{{ContainerPort: 3000}}},
				},
				Endpoints: []*compose.Endpoint{
					{Name: "www", Rules: []compose.Route{{Path: "/", Service: "frontend", Port: 80}}},
					{Name: "admin-ui", Labels: map[string]string{"nginx.ingress.kubernetes.io/whitelist-source-range": "10.0.0.0/8"},
						Rules: []compose.Route{{Path: "/", Service: "admin", Port: 3000}}},
				},
			}
		},
	},
	{
		// depends_on: the order puts dependencies first and otherwise keeps file order; the three
		// conditions pass through (a list entry's empty condition is service_started).
		name: "depends",
		opts: defaultOpts,
		project: func() *compose.Project {
			return &compose.Project{Services: []*compose.Service{
				{Name: "web", Image: "web:1", Scale: 1, DependsOn: []compose.Dependency{
					{Service: "api"}, {Service: "cache", Condition: compose.ConditionStarted},
				}},
				{Name: "api", Image: "api:1", Scale: 1, Ports: []compose.Port{{ContainerPort: 8080}, {ContainerPort: 9090, Protocol: "UDP"}}, DependsOn: []compose.Dependency{
					{Service: "db", Condition: compose.ConditionHealthy}, {Service: "migrate", Condition: compose.ConditionCompleted},
				}},
				{Name: "cache", Image: "redis:7", Scale: 1},
				{Name: "migrate", Image: "api:1", Scale: 1, Restart: compose.Restart{Policy: compose.RestartOnFailure}, DependsOn: []compose.Dependency{
					{Service: "db", Condition: compose.ConditionHealthy},
				}},
				{Name: "db", Image: "postgres:16", Scale: 1, Ports: []compose.Port{{ContainerPort: 5432}}, Healthcheck: &compose.Healthcheck{
					Exec: []string{"pg_isready"}, Readiness: true,
				}},
			}}
		},
	},
	{
		// A service with build and no image runs DefaultImage, with a warning; scale 0 is kept.
		name: "build-no-image",
		opts: defaultOpts,
		project: func() *compose.Project {
			return &compose.Project{Services: []*compose.Service{
				{Name: "app", Build: &compose.Build{Context: "/src/app", Dockerfile: "Dockerfile"}, Scale: 0},
			}}
		},
	},
}

package compose

import (
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

func TestBuild(t *testing.T) {
	t.Run("string", func(t *testing.T) {
		p := mustLoad(t, "services:\n  web:\n    build: ./app\n")
		b := p.Service("web").Build
		want := &Build{Context: filepath.Join(p.WorkingDir, "app"), Dockerfile: "Dockerfile"}
		if !reflect.DeepEqual(b, want) {
			t.Errorf("build = %+v, want %+v", b, want)
		}
	})
	t.Run("object", func(t *testing.T) {
		p, err := loadYAML(t, `services:
  web:
    image: registry/web
    build:
      context: ../src
      dockerfile: docker/Dockerfile.dev
      target: dev
      args: [VERSION=$VER, "LITERAL=a$$b", FROM_ENV, UNDEFINED]
      export_cache: registry/web:cache
      cache_from: [registry/web:cache, registry/web:latest]
`, map[string]string{"VER": "1.0", "FROM_ENV": "env"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		b := p.Service("web").Build
		want := &Build{
			Context:     filepath.Join(filepath.Dir(p.WorkingDir), "src"),
			Dockerfile:  "docker/Dockerfile.dev",
			Target:      "dev",
			Args:        map[string]string{"VERSION": "1.0", "LITERAL": "a$b", "FROM_ENV": "env"},
			ExportCache: "registry/web:cache",
			CacheFrom:   []string{"registry/web:cache", "registry/web:latest"},
		}
		if !reflect.DeepEqual(b, want) {
			t.Errorf("build = %+v\nwant %+v", b, want)
		}
	})
	t.Run("args map and absolute context", func(t *testing.T) {
		b := mustService(t, "services:\n  web:\n    build:\n      context: /srv/app\n      args:\n        A: 1\n        B:\n").Build
		if b.Context != "/srv/app" || !reflect.DeepEqual(b.Args, map[string]string{"A": "1"}) {
			t.Errorf("build = %+v", b)
		}
	})
}

func TestCommandAndEntrypoint(t *testing.T) {
	tests := []struct {
		yaml string
		want []string
	}{
		{`npm start`, []string{"npm", "start"}},
		{`sh -c 'echo "a b" && sleep 1'`, []string{"sh", "-c", `echo "a b" && sleep 1`}},
		{`["python", "app.py", "--name=a b"]`, []string{"python", "app.py", "--name=a b"}},
		{`[]`, []string{}},
		{`echo "$$HOME"`, []string{"echo", "$HOME"}},
	}
	for _, tt := range tests {
		t.Run(tt.yaml, func(t *testing.T) {
			s := mustService(t, "services:\n  web:\n    image: x\n    command: "+tt.yaml+"\n    entrypoint: "+tt.yaml+"\n")
			if !reflect.DeepEqual(s.Command, tt.want) || !reflect.DeepEqual(s.Entrypoint, tt.want) {
				t.Errorf("command %q entrypoint %q, want %q", s.Command, s.Entrypoint, tt.want)
			}
		})
	}
	s := mustService(t, "services:\n  web:\n    image: x\n")
	if s.Command != nil || s.Entrypoint != nil {
		t.Errorf("unset command must be nil, got %q %q", s.Command, s.Entrypoint)
	}
}

func TestSimpleFields(t *testing.T) {
	s := mustService(t, `services:
  web:
    image: nginx:1.27
    cap_add: [NET_ADMIN, SYS_TIME]
    cap_drop: [ALL]
    working_dir: /app
    x-node-selector: {disk: ssd, zone: a}
    x-anything-else: ignored silently
`)
	if s.Image != "nginx:1.27" || !reflect.DeepEqual(s.CapAdd, []string{"NET_ADMIN", "SYS_TIME"}) ||
		!reflect.DeepEqual(s.CapDrop, []string{"ALL"}) || s.WorkingDir != "/app" ||
		!reflect.DeepEqual(s.NodeSelector, map[string]string{"disk": "ssd", "zone": "a"}) {
		t.Errorf("service = %+v", s)
	}
	if s.Pos.Line != 2 || s.Pos.Column != 3 {
		t.Errorf("service position %s, want line 2 col 3", s.Pos)
	}
}

func TestDependsOn(t *testing.T) {
	p := mustLoad(t, `services:
  db: {image: postgres}
  cache: {image: redis}
  migrate: {image: app}
  web:
    image: app
    depends_on:
      db: {condition: service_healthy}
      cache: {}
      migrate: {condition: service_completed_successfully}
  worker:
    image: app
    depends_on: [db, cache]
`)
	want := []Dependency{{Service: "db", Condition: ConditionHealthy}, {Service: "cache", Condition: ConditionStarted}, {Service: "migrate", Condition: ConditionCompleted}}
	got := p.Service("web").DependsOn
	for i := range got {
		if got[i].Pos.Line == 0 {
			t.Errorf("dependency %d has no position", i)
		}
		got[i].Pos = Position{}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("web depends_on = %+v, want %+v", got, want)
	}
	w := p.Service("worker").DependsOn
	if len(w) != 2 || w[0].Service != "db" || w[1].Condition != ConditionStarted {
		t.Errorf("worker depends_on = %+v", w)
	}
}

func TestOptionalDependencyOnMissingServiceWarns(t *testing.T) {
	p := mustLoad(t, "services:\n  web:\n    image: x\n    depends_on:\n      gone: {required: false}\n")
	if len(p.Service("web").DependsOn) != 0 || len(p.Warnings) != 1 {
		t.Errorf("depends_on %+v warnings %q", p.Service("web").DependsOn, p.Warnings)
	}
}

func TestEnvironment(t *testing.T) {
	files := map[string]string{
		"base.env":       "A=from-file\nB=from-file\nC=from-file\nD=from-file\nQ=\"quoted value\"\n",
		"conf/local.env": "D=local\nE=${SHELLVAR}\n",
	}
	tests := []struct {
		name, yaml string
		want       map[string]string
	}{
		{"map", "environment:\n      X: 1\n      Y: \"\"\n      Z: true", map[string]string{"X": "1", "Y": "", "Z": "true"}},
		{"list", "environment: [X=1, Y=, \"Z=a=b\"]", map[string]string{"X": "1", "Y": "", "Z": "a=b"}},
		{"name only takes the shell value", "environment: [SHELLVAR, NOTSET]", map[string]string{"SHELLVAR": "shell"}},
		{"env_file string", "env_file: base.env", map[string]string{"A": "from-file", "B": "from-file", "C": "from-file", "D": "from-file", "Q": "quoted value"}},
		{"env_file list, later wins, environment overrides even empty or undefined",
			"env_file: [base.env, conf/local.env]\n    environment:\n      A: override\n      B: \"\"\n      C:\n      Q: null",
			map[string]string{"A": "override", "B": "", "D": "local", "E": "shell"}},
		{"env_file long syntax, optional missing file", "env_file:\n      - path: ./missing.env\n        required: false\n      - path: base.env", map[string]string{"A": "from-file", "B": "from-file", "C": "from-file", "D": "from-file", "Q": "quoted value"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := loadYAML(t, "services:\n  web:\n    image: x\n    "+tt.yaml+"\n", map[string]string{"SHELLVAR": "shell"}, files)
			if err != nil {
				t.Fatal(err)
			}
			if got := p.Service("web").Environment; !reflect.DeepEqual(got, tt.want) {
				t.Errorf("environment = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestMissingEnvFileIsAPositionedError(t *testing.T) {
	es := loadErrors(t, "services:\n  web:\n    image: x\n    env_file: [a.env]\n")
	e := findError(t, es, "cannot read env file")
	if e.Pos.Line != 4 || e.Field != "services.web.env_file[0]" {
		t.Errorf("error %v", e)
	}
}

func TestHealthcheck(t *testing.T) {
	tests := []struct {
		name, yaml string
		want       *Healthcheck
	}{
		{"string is CMD-SHELL", `test: pg_isready -U app || exit 1`,
			&Healthcheck{Exec: []string{"sh", "-c", "pg_isready -U app || exit 1"}, Readiness: true}},
		{"CMD list", `test: ["CMD", "pg_isready", "-U", "app"]`,
			&Healthcheck{Exec: []string{"pg_isready", "-U", "app"}, Readiness: true}},
		{"CMD-SHELL list", `test: ["CMD-SHELL", "redis-cli ping | grep PONG"]`,
			&Healthcheck{Exec: []string{"sh", "-c", "redis-cli ping | grep PONG"}, Readiness: true}},
		{"NONE disables", `test: ["NONE"]`, nil},
		{"disable: true", "test: [CMD, x]\n      disable: true", nil},
		{"http and timings", "http: {path: /healthz, port: 8080}\n      interval: 1m30s\n      timeout: 10s\n      start_period: 500ms\n      retries: 3",
			&Healthcheck{HTTP: &HTTPCheck{Path: "/healthz", Port: 8080}, Interval: 90 * time.Second, Timeout: 10 * time.Second, StartPeriod: 500 * time.Millisecond, Retries: 3, Readiness: true}},
		{"probe kinds", "test: [CMD, ok]\n      x-devtool-readiness: false\n      x-devtool-liveness: true",
			&Healthcheck{Exec: []string{"ok"}, Readiness: false, Liveness: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := mustService(t, "services:\n  web:\n    image: x\n    healthcheck:\n      "+tt.yaml+"\n")
			if !reflect.DeepEqual(s.Healthcheck, tt.want) {
				t.Errorf("healthcheck = %+v, want %+v", s.Healthcheck, tt.want)
			}
		})
	}
}

func TestLabels(t *testing.T) {
	for _, y := range []string{"labels: {a: \"1\", dev.devtool/update: recreate}", "labels: [a=1, dev.devtool/update=recreate]"} {
		s := mustService(t, "services:\n  web:\n    image: x\n    "+y+"\n")
		if want := map[string]string{"a": "1", "dev.devtool/update": "recreate"}; !reflect.DeepEqual(s.Labels, want) {
			t.Errorf("%s: labels = %v", y, s.Labels)
		}
	}
}

func TestPortsInService(t *testing.T) {
	p := mustLoad(t, `services:
  web:
    image: x
    ports:
      - 80
      - "8080"
      - "81:8081"
      - "127.0.0.1:82:8082"
      - 53/udp
      - "3000-3001"
      - "9000-9001:4000-4001/udp"
      - target: 7000
        published: "7070"
        protocol: udp
      - target: 7001
`)
	want := []Port{
		{ContainerPort: 80, Protocol: "TCP"},
		{ContainerPort: 8080, Protocol: "TCP"},
		{ContainerPort: 8081, HostPort: 81, Protocol: "TCP"},
		{ContainerPort: 8082, HostPort: 82, Protocol: "TCP"},
		{ContainerPort: 53, Protocol: "UDP"},
		{ContainerPort: 3000, Protocol: "TCP"},
		{ContainerPort: 3001, Protocol: "TCP"},
		{ContainerPort: 4000, HostPort: 9000, Protocol: "UDP"},
		{ContainerPort: 4001, HostPort: 9001, Protocol: "UDP"},
		{ContainerPort: 7000, HostPort: 7070, Protocol: "UDP"},
		{ContainerPort: 7001, Protocol: "TCP"},
	}
	if got := p.Service("web").Ports; !reflect.DeepEqual(got, want) {
		t.Errorf("ports =\n %+v\nwant\n %+v", got, want)
	}
	if len(p.Warnings) != 1 {
		t.Errorf("want one warning about the host IP, got %q", p.Warnings)
	}
}

func TestScaleResourcesRestart(t *testing.T) {
	t.Run("defaults", func(t *testing.T) {
		s := mustService(t, "services:\n  web:\n    image: x\n")
		if s.Scale != 1 || s.Restart.Policy != RestartAlways || s.Restart.MaxAttempts != nil || s.Resources != (Resources{}) || s.StopGracePeriod != nil {
			t.Errorf("defaults: %+v", s)
		}
	})
	v2 := mustService(t, `services:
  web:
    image: x
    scale: 3
    restart: "on-failure:4"
    resources:
      requests: {cpu: "0.25", memory: 256M}
      limits: {cpu: 1, memory: 1g}
`)
	v3 := mustService(t, `services:
  web:
    image: x
    deploy:
      replicas: 3
      restart_policy: {condition: on-failure, max_attempts: 4}
      resources:
        reservations: {cpus: "0.25", memory: 256m}
        limits: {cpus: "1.0", memory: 1024MB}
`)
	want := Resources{Requests: ResourceList{CPU: "250m", Memory: "256Mi"}, Limits: ResourceList{CPU: "1", Memory: "1Gi"}}
	for name, s := range map[string]*Service{"v2": v2, "deploy": v3} {
		if s.Scale != 3 || s.Resources != want || s.Restart.Policy != RestartOnFailure || s.Restart.MaxAttempts == nil || *s.Restart.MaxAttempts != 4 {
			t.Errorf("%s notation: scale %d resources %+v restart %+v", name, s.Scale, s.Resources, s.Restart)
		}
	}
}

func TestRestartValues(t *testing.T) {
	for value, want := range map[string]string{
		"always": RestartAlways, "unless-stopped": RestartAlways, "any": RestartAlways,
		"none": RestartNever, "never": RestartNever, `"no"`: RestartNever, "no": RestartNever,
		"on-failure": RestartOnFailure,
	} {
		s := mustService(t, "services:\n  web:\n    image: x\n    restart: "+value+"\n")
		if s.Restart.Policy != want {
			t.Errorf("restart %s = %q, want %q", value, s.Restart.Policy, want)
		}
	}
	for cond, want := range map[string]string{"none": RestartNever, "any": RestartAlways, "on-failure": RestartOnFailure} {
		s := mustService(t, "services:\n  web:\n    image: x\n    deploy:\n      restart_policy:\n        condition: "+cond+"\n")
		if s.Restart.Policy != want {
			t.Errorf("condition %s = %q, want %q", cond, s.Restart.Policy, want)
		}
	}
}

func TestStopGracePeriod(t *testing.T) {
	for value, want := range map[string]time.Duration{"30": 30 * time.Second, "1m30s": 90 * time.Second, "\"45s\"": 45 * time.Second, "0": 0} {
		s := mustService(t, "services:\n  web:\n    image: x\n    stop_grace_period: "+value+"\n")
		if s.StopGracePeriod == nil || *s.StopGracePeriod != want {
			t.Errorf("stop_grace_period %s = %v, want %v", value, s.StopGracePeriod, want)
		}
	}
}

func TestServiceVolumes(t *testing.T) {
	p := mustLoad(t, `services:
  web:
    image: x
    volumes:
      - data:/var/lib/data
      - data:/ro:ro
      - /cache
      - ./src:/app
      - ../shared:/shared:ro
      - /etc/ssl:/etc/ssl:ro
      - ~/.ssh:/root/.ssh
      - type: volume
        source: data
        target: /long
        read_only: true
      - type: bind
        source: ./conf
        target: /conf
volumes:
  data:
`)
	dir := p.WorkingDir
	want := []VolumeMount{
		{Kind: VolumeNamed, Source: "data", Target: "/var/lib/data"},
		{Kind: VolumeNamed, Source: "data", Target: "/ro", ReadOnly: true},
		{Kind: VolumeAnonymous, Target: "/cache"},
		{Kind: VolumeHost, Source: filepath.Join(dir, "src"), Target: "/app"},
		{Kind: VolumeHost, Source: filepath.Join(filepath.Dir(dir), "shared"), Target: "/shared", ReadOnly: true},
		{Kind: VolumeHost, Source: "/etc/ssl", Target: "/etc/ssl", ReadOnly: true},
		{Kind: VolumeHost, Source: "/home/dev/.ssh", Target: "/root/.ssh"},
		{Kind: VolumeNamed, Source: "data", Target: "/long", ReadOnly: true},
		{Kind: VolumeHost, Source: filepath.Join(dir, "conf"), Target: "/conf"},
	}
	got := p.Service("web").Volumes
	for i := range got {
		if got[i].Pos.Line != 5+i && i < 7 {
			t.Errorf("volume %d at line %d, want %d", i, got[i].Pos.Line, 5+i)
		}
		got[i].Pos = Position{}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("volumes =\n %+v\nwant\n %+v", got, want)
	}
}

func TestTopLevelVolumes(t *testing.T) {
	p := mustLoad(t, `services:
  web: {image: x}
volumes:
  plain:
  sized:
    labels: {backup: daily}
    driver_opts: {class: fast, size: 10Gi}
  docker-units:
    driver_opts: {size: 10G}
`)
	want := []*Volume{
		{Name: "plain", Size: "1Gi", Pos: Position{File: p.Volumes[0].Pos.File, Line: 4, Column: 3}},
		{Name: "sized", Labels: map[string]string{"backup": "daily"}, Class: "fast", Size: "10Gi", Pos: Position{File: p.Volumes[0].Pos.File, Line: 5, Column: 3}},
		{Name: "docker-units", Size: "10Gi", Pos: Position{File: p.Volumes[0].Pos.File, Line: 8, Column: 3}},
	}
	if !reflect.DeepEqual(p.Volumes, want) {
		for i := range p.Volumes {
			t.Errorf("volume %d = %+v, want %+v", i, p.Volumes[i], want[i])
		}
	}
}

func TestEndpoints(t *testing.T) {
	services := "services:\n  web:\n    image: x\n    ports: [8080, \"80:3000\"]\n  api:\n    image: y\n    ports: [9000]\n"
	t.Run("list", func(t *testing.T) {
		p := mustLoad(t, services+"endpoints:\n  - path: /\n    service: web\n    port: 8080\n  - path: /api\n    service: api\n    port: 9000\n")
		if len(p.Endpoints) != 1 || p.Endpoints[0].Name != "" || len(p.Endpoints[0].Rules) != 2 {
			t.Fatalf("endpoints = %+v", p.Endpoints)
		}
		r := p.Endpoints[0].Rules[1]
		if r.Path != "/api" || r.Service != "api" || r.Port != 9000 || r.Pos.Line != 12 {
			t.Errorf("rule = %+v", r)
		}
	})
	t.Run("map", func(t *testing.T) {
		p := mustLoad(t, services+"endpoints:\n  shop:\n    - {path: /, service: web, port: 80}\n  admin:\n    - {path: /, service: api, port: 9000}\n")
		if len(p.Endpoints) != 2 || p.Endpoints[0].Name != "shop" || p.Endpoints[1].Name != "admin" || p.Endpoints[0].Rules[0].Port != 80 {
			t.Errorf("endpoints = %+v", p.Endpoints)
		}
	})
	t.Run("object", func(t *testing.T) {
		p := mustLoad(t, services+"endpoints:\n  labels: {tier: public}\n  rules:\n    - {path: /, service: web, port: 3000}\n")
		want := &Endpoint{Labels: map[string]string{"tier": "public"}, Rules: []Route{{Path: "/", Service: "web", Port: 3000}}}
		got := p.Endpoints[0]
		got.Pos, got.Rules[0].Pos = Position{}, Position{}
		if len(p.Endpoints) != 1 || !reflect.DeepEqual(got, want) {
			t.Errorf("endpoints = %+v", p.Endpoints)
		}
	})
}

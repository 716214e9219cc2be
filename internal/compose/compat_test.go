package compose

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// Issue 11: Compose files that Docker Compose accepts. Each table maps an input to the model it
// must give, or the warning or error it must report.

func TestHostPathRule(t *testing.T) {
	for _, tc := range []struct {
		volume string
		want   VolumeMount
	}{
		{".psqlrc:/root/.psqlrc:ro", VolumeMount{Kind: VolumeHost, Source: "DIR/.psqlrc", Target: "/root/.psqlrc", ReadOnly: true}},
		{".:/app:cached", VolumeMount{Kind: VolumeHost, Source: "DIR", Target: "/app"}},
		{".:/app:delegated", VolumeMount{Kind: VolumeHost, Source: "DIR", Target: "/app"}},
		{"./src:/src:rw", VolumeMount{Kind: VolumeHost, Source: "DIR/src", Target: "/src"}},
		{"~/x:/x", VolumeMount{Kind: VolumeHost, Source: "/home/dev/x", Target: "/x"}},
		{"~:/h:z", VolumeMount{Kind: VolumeHost, Source: "/home/dev", Target: "/h"}},
		{"../x:/x:Z", VolumeMount{Kind: VolumeHost, Source: "PARENT/x", Target: "/x"}},
		{"/etc/hosts:/h:ro,z", VolumeMount{Kind: VolumeHost, Source: "/etc/hosts", Target: "/h", ReadOnly: true}},
		{".env.local:/app/.env", VolumeMount{Kind: VolumeHost, Source: "DIR/.env.local", Target: "/app/.env"}},
		{"data:/data:ro", VolumeMount{Kind: VolumeNamed, Source: "data", Target: "/data", ReadOnly: true}},
		{"data:/data:nocopy", VolumeMount{Kind: VolumeNamed, Source: "data", Target: "/data"}},
		{"/scratch", VolumeMount{Kind: VolumeAnonymous, Target: "/scratch"}},
		{"{type: bind, source: ., target: /app, read_only: true, consistency: cached, bind: {create_host_path: true}}",
			VolumeMount{Kind: VolumeHost, Source: "DIR", Target: "/app", ReadOnly: true}},
		{"{type: volume, source: data, target: /d, volume: {nocopy: true}}", VolumeMount{Kind: VolumeNamed, Source: "data", Target: "/d"}},
		{"{type: volume, target: /anon}", VolumeMount{Kind: VolumeAnonymous, Target: "/anon"}},
		{"{type: tmpfs, target: /run, tmpfs: {size: 64m}}", VolumeMount{Kind: VolumeTmpfs, Target: "/run", Size: "64Mi"}},
	} {
		t.Run(tc.volume, func(t *testing.T) {
			item := `"` + tc.volume + `"`
			if strings.HasPrefix(tc.volume, "{") {
				item = tc.volume
			}
			p, err := loadYAML(t, "services:\n  web:\n    image: x\n    volumes:\n      - "+item+"\nvolumes:\n  data: {}\n", nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Warnings) > 0 {
				t.Errorf("warnings: %q", p.Warnings)
			}
			got := p.Service("web").Volumes[0]
			got.Pos = Position{}
			want := tc.want
			want.Source = strings.NewReplacer("PARENT", parentDir(p.WorkingDir), "DIR", p.WorkingDir).Replace(want.Source)
			if got != want {
				t.Errorf("got %+v, want %+v", got, want)
			}
		})
	}
}

func parentDir(dir string) string { return dir[:strings.LastIndex(dir, "/")] }

func TestTmpfsField(t *testing.T) {
	s := mustService(t, "services:\n  web:\n    image: x\n    tmpfs: [/run, \"/tmp:size=100m,mode=1777\"]\n")
	var got []VolumeMount
	for _, v := range s.Volumes {
		v.Pos = Position{}
		got = append(got, v)
	}
	want := []VolumeMount{{Kind: VolumeTmpfs, Target: "/run"}, {Kind: VolumeTmpfs, Target: "/tmp", Size: "100Mi"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v", got)
	}
}

// TestEmptyValuesFromUnsetVariables: where Compose tolerates an empty value (an unset variable
// with an empty default), so does the loader; where Compose refuses it, the error stays.
func TestEmptyValuesFromUnsetVariables(t *testing.T) {
	for _, tc := range []struct {
		name  string
		field string
		check func(t *testing.T, s *Service)
		err   string
	}{
		{name: "restart empty is the default", field: "restart: ${RESTART:-}", check: func(t *testing.T, s *Service) {
			if s.Restart != (Restart{Policy: RestartAlways}) {
				t.Errorf("restart = %+v", s.Restart)
			}
		}},
		{name: "restart_policy condition empty", field: "deploy: {restart_policy: {condition: \"${C:-}\"}}", check: func(t *testing.T, s *Service) {
			if s.Restart.Explicit {
				t.Errorf("restart = %+v", s.Restart)
			}
		}},
		{name: "port with empty host part", field: "ports: [\":8000\"]", check: func(t *testing.T, s *Service) {
			if len(s.Ports) != 1 || s.Ports[0] != (Port{ContainerPort: 8000, Protocol: "TCP"}) {
				t.Errorf("ports = %+v", s.Ports)
			}
		}},
		{name: "host port variable unset", field: "ports: [\"${HOST_PORT}:8000\"]", check: func(t *testing.T, s *Service) {
			if len(s.Ports) != 1 || s.Ports[0].HostPort != 0 || s.Ports[0].ContainerPort != 8000 {
				t.Errorf("ports = %+v", s.Ports)
			}
		}},
		{name: "healthcheck retries empty", field: "healthcheck: {test: [CMD, true], retries: \"${X:-}\"}", check: func(t *testing.T, s *Service) {
			if s.Healthcheck == nil || s.Healthcheck.Retries != 0 {
				t.Errorf("healthcheck = %+v", s.Healthcheck)
			}
		}},
		{name: "container port empty is refused", field: "ports: [\"8000:${CP:-}\"]", err: "compose.yml:4:13: services.web.ports[0]: invalid port"},
		{name: "scale empty is refused", field: "scale: ${N:-}", err: "compose.yml:4:12: services.web.scale: expected an integer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := loadYAML(t, "services:\n  web:\n    image: x\n    "+tc.field+"\n", nil, nil)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, p.Service("web"))
		})
	}
}

func TestNamesConvertedForKubernetes(t *testing.T) {
	p, err := loadYAML(t, `services:
  Web:
    image: x
    depends_on: [plausible_db]
    volumes: [db_data:/data]
  plausible_db:
    image: postgres
volumes:
  db_data: {}
endpoints:
  - {path: /, service: Web, port: 80}
`, nil, nil)
	if err != nil {
		// Web has no port 80: the route check must still use the written name.
		if !strings.Contains(err.Error(), `service "Web" does not expose port 80`) {
			t.Fatal(err)
		}
	}
	p, err = loadYAML(t, `services:
  Web:
    image: x
    ports: ["80"]
    depends_on: [plausible_db]
    volumes: [db_data:/data]
  plausible_db:
    image: postgres
volumes:
  db_data: {}
endpoints:
  - {path: /, service: Web, port: 80}
`, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	web := p.Service("web")
	if p.ServiceNamed("Web") != web || p.Renamed["volume:db_data"] != "db-data" {
		t.Errorf("renamed = %v", p.Renamed)
	}
	if web == nil || p.Service("plausible-db") == nil || p.Volume("db-data") == nil {
		t.Fatalf("names not converted: %+v", p.Services)
	}
	if web.DependsOn[0].Service != "plausible-db" || web.Volumes[0].Source != "db-data" || p.Endpoints[0].Rules[0].Service != "web" {
		t.Errorf("references not converted: %+v %+v %+v", web.DependsOn, web.Volumes, p.Endpoints[0].Rules)
	}
	var warn string
	for _, w := range p.Warnings {
		if strings.HasPrefix(w, "names converted") {
			if warn != "" {
				t.Errorf("more than one warning: %q", p.Warnings)
			}
			warn = w
		}
	}
	for _, want := range []string{`service "Web" is "web" (`, `service "plausible_db" is "plausible-db"`, `volume "db_data" is "db-data"`, "new host name (web, plausible-db)"} {
		if !strings.Contains(warn, want) {
			t.Errorf("warning %q does not contain %q", warn, want)
		}
	}
}

func TestConvertedNamesCollide(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{"services:\n  db_data: {image: x}\n  db-data: {image: y}\n", `service names "db_data" and "db-data" both become "db-data"`},
		{"services:\n  Web: {image: x}\n  web: {image: y}\n", `compose.yml:3:3: services.web: service names "Web" and "web" both become "web"`},
		{"services:\n  w: {image: x}\nvolumes:\n  A_b: {}\n  a_B: {}\n", `volume names "A_b" and "a_B" both become "a-b"`},
	} {
		_, err := loadYAML(t, tc.src, nil, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("err = %v, want %q", err, tc.want)
		}
	}
}

// TestFieldWarningsAndErrors: the fields beyond the spec's table, where they warn or fail.
func TestFieldWarningsAndErrors(t *testing.T) {
	for _, tc := range []struct {
		name, service string
		top           string
		warn, err     string
	}{
		{name: "user name", service: "user: postgres", warn: `user "postgres" is not a numeric id`},
		{name: "restart word in restart_policy", service: "deploy: {restart_policy: {condition: always}}", warn: `"always" is a word of restart, not of restart_policy.condition`},
		{name: "restart_policy unless-stopped", service: "deploy: {restart_policy: {condition: unless-stopped}}", warn: "read as always"},
		{name: "both probe kinds off", service: "healthcheck: {test: [CMD, true], x-devtool-readiness: false, x-devtool-liveness: false}",
			err: "compose.yml:4:18: services.web.healthcheck: x-devtool-readiness and x-devtool-liveness are both false"},
		{name: "expose with a host port", service: "expose: [\"80:80\"]", err: "services.web.expose[0]: expected a container port"},
		{name: "cpus disagrees with deploy.resources", service: "cpus: 2\n    deploy: {resources: {limits: {cpus: '1'}}}", err: "cpus is 2 but resources say 1"},
		{name: "endpoint_mode unknown", service: "deploy: {endpoint_mode: rr}", err: `expected vip or dnsrr, found "rr"`},
		{name: "undefined secret", service: "secrets: [nope]", err: `services.web.secrets[0]: secret "nope" is not defined in the top-level secrets`},
		{name: "secret file missing", service: "secrets: [s]", top: "secrets:\n  s: {file: ./missing}\n", err: "compose.yml:6:13: secrets.s.file: cannot read"},
		{name: "secret variable unset", service: "secrets: [s]", top: "secrets:\n  s: {environment: NOPE}\n", err: "secrets.s.environment: variable NOPE is not set"},
		{name: "secret with two sources", service: "secrets: [s]", top: "secrets:\n  s: {environment: A, file: ./x}\n", err: "set exactly one of file, environment"},
		{name: "config target relative", service: "configs: [{source: c, target: etc/x}]", top: "configs:\n  c: {content: x}\n", err: "the target must be an absolute path"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := loadYAML(t, "services:\n  web:\n    image: x\n    "+tc.service+"\n"+tc.top, map[string]string{"A": "a"}, nil)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(strings.Join(p.Warnings, "\n"), tc.warn) {
				t.Errorf("warnings %q do not contain %q", p.Warnings, tc.warn)
			}
		})
	}
}

func TestSecretContentNeverInErrors(t *testing.T) {
	_, err := loadYAML(t, "services:\n  web:\n    image: x\n    secrets: [s]\nsecrets:\n  s: {file: ./big}\n", nil,
		map[string]string{"big": "TOPSECRET" + strings.Repeat("x", MaxSecretSize)})
	if err == nil || strings.Contains(err.Error(), "TOPSECRET") || !strings.Contains(err.Error(), "1 MiB") {
		t.Errorf("err = %v", err)
	}
}

// TestEnvFileOutsideProjectAllowed: with the opt-in an env file outside the project is read
// (TestEnvFileOutsideProject covers the refusal without it).
func TestEnvFileOutsideProjectAllowed(t *testing.T) {
	outside := filepath.Join(t.TempDir(), "shared.env")
	if err := os.WriteFile(outside, []byte("A=1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "compose.yml")
	if err := os.WriteFile(file, []byte("services:\n  web:\n    image: x\n    env_file: ["+outside+", inside.env]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "inside.env"), []byte("B=2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := Load(LoadOptions{File: file, Environ: map[string]string{}, AllowOutside: true})
	if err != nil {
		t.Fatal(err)
	}
	if env := p.Service("web").Environment; env["A"] != "1" || env["B"] != "2" {
		t.Errorf("environment = %v", env)
	}
}

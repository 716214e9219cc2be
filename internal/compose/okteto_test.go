package compose

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// Issue 22: Okteto's extensions. Each table maps an input to the model it must give, or the
// warning or error it must report.

// TestCurlHealthcheck: a test that only curls the container itself becomes an HTTP check;
// anything else stays the exec check it was.
func TestCurlHealthcheck(t *testing.T) {
	for _, tc := range []struct {
		test string
		want *HTTPCheck // nil: stays exec
	}{
		{`curl http://localhost:4572/path`, &HTTPCheck{Path: "/path", Port: 4572, Scheme: "http"}},
		{`curl 0.0.0.0:4572/path/`, &HTTPCheck{Path: "/path/", Port: 4572, Scheme: "http"}},
		{`curl localhost:8080`, &HTTPCheck{Path: "/", Port: 8080, Scheme: "http"}},
		{`curl -f http://localhost:8080/`, &HTTPCheck{Path: "/", Port: 8080, Scheme: "http"}},
		{`curl --fail http://127.0.0.1:8080/health`, &HTTPCheck{Path: "/health", Port: 8080, Scheme: "http"}},
		{`curl -fsSL http://localhost:8080/h || exit 1`, &HTTPCheck{Path: "/h", Port: 8080, Scheme: "http"}},
		{`curl -f http://localhost:8080/h  ||  exit 1`, &HTTPCheck{Path: "/h", Port: 8080, Scheme: "http"}},
		{`curl -f http://localhost:8080/h || exit`, &HTTPCheck{Path: "/h", Port: 8080, Scheme: "http"}},
		{`curl -f http://localhost:8080/h || false`, &HTTPCheck{Path: "/h", Port: 8080, Scheme: "http"}},
		{`curl --silent --show-error --fail-with-body -o /dev/null http://localhost:8080/`, &HTTPCheck{Path: "/", Port: 8080, Scheme: "http"}},
		{`curl -sk https://localhost:8443/ready`, &HTTPCheck{Path: "/ready", Port: 8443, Scheme: "https"}},
		{`curl http://localhost/`, &HTTPCheck{Path: "/", Port: 80, Scheme: "http"}},
		{`curl https://localhost`, &HTTPCheck{Path: "/", Port: 443, Scheme: "https"}},
		{`curl -f 'http://localhost:8080/a?b=1&c=2'`, &HTTPCheck{Path: "/a?b=1&c=2", Port: 8080, Scheme: "http"}},
		{`curl -f "http://localhost:8080/x"`, &HTTPCheck{Path: "/x", Port: 8080, Scheme: "http"}},
		{`["CMD", "curl", "-f", "http://localhost:8080/h"]`, &HTTPCheck{Path: "/h", Port: 8080, Scheme: "http"}},
		{`["CMD", "curl", "http://[::1]:8080/"]`, &HTTPCheck{Path: "/", Port: 8080, Scheme: "http"}},
		{`["CMD-SHELL", "curl -f http://localhost:8080/h || exit 1"]`, &HTTPCheck{Path: "/h", Port: 8080, Scheme: "http"}},

		{`curl http://example.com:8080/`, nil},
		{`curl http://db:5432/`, nil},
		{`curl -X POST http://localhost:8080/`, nil},
		{`curl -H 'Host: x' http://localhost:8080/`, nil},
		{`curl -m 5 http://localhost:8080/`, nil},
		{`curl -I http://localhost:8080/`, nil},
		{`curl http://localhost:8080/ && echo ok`, nil},
		{`curl http://localhost:8080/ | grep ok`, nil},
		{`curl http://localhost:8080/ || exit 2`, nil},
		{`curl http://localhost:8080/ || true`, nil},
		{`curl http://localhost:8080/ || exit 1 || exit 1`, nil},
		{`curl http://localhost:8080/ ; true`, nil},
		{`curl http://localhost:$${PORT}/`, nil},
		{`curl http://localhost:8080/a http://localhost:8080/b`, nil},
		{`curl http://user:pw@localhost:8080/`, nil},
		{`curl http://localhost:8080/#x`, nil},
		{`curl ftp://localhost/`, nil},
		{`curl -o out.html http://localhost:8080/`, nil},
		{`curl`, nil},
		{`curl -f`, nil},
		{`/usr/bin/curl http://localhost:8080/`, nil},
		{`wget -q -O- http://localhost:8080/`, nil},
		{`curl "http://localhost:8080/$${X}"`, nil},
		{`curl 'http://localhost:8080/it'"'"'s'`, nil},
		{`["CMD", "curl", "-f", "http://localhost:8080/", "||", "exit", "1"]`, nil},
		{`["CMD", "sh", "-c", "curl http://localhost:8080/ && true"]`, nil},
	} {
		t.Run(tc.test, func(t *testing.T) {
			test := tc.test
			if !strings.HasPrefix(test, "[") {
				test = "'" + strings.ReplaceAll(test, "'", "''") + "'"
			}
			p, err := loadYAML(t, "services:\n  web:\n    image: x\n    healthcheck:\n      test: "+test+"\n      x-devtool-liveness: true\n", nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Warnings) > 0 {
				t.Errorf("warnings: %q", p.Warnings)
			}
			h := p.Service("web").Healthcheck
			if !h.Readiness || !h.Liveness {
				t.Errorf("readiness %v, liveness %v; want both", h.Readiness, h.Liveness)
			}
			if tc.want == nil {
				if h.HTTP != nil || len(h.Exec) == 0 {
					t.Errorf("got http %+v, exec %q; want the exec check kept", h.HTTP, h.Exec)
				}
				return
			}
			if h.Exec != nil || !reflect.DeepEqual(h.HTTP, tc.want) {
				t.Errorf("got http %+v, exec %q; want http %+v", h.HTTP, h.Exec, tc.want)
			}
		})
	}
}

// TestCurlHealthcheckWithHTTP: a curl test beside http is still the "either test or http" error.
func TestCurlHealthcheckWithHTTP(t *testing.T) {
	es := loadErrors(t, "services:\n  web:\n    image: x\n    healthcheck:\n      test: curl http://localhost:80/\n      http: {path: /, port: 80}\n")
	findError(t, es, "set either test or http, not both")
}

func TestOktetoUser(t *testing.T) {
	for _, tc := range []struct {
		user        string
		uid, gid    *int64
		warn, error string
	}{
		{user: "{runAsUser: 1000, runAsGroup: 2000}", uid: ptr[int64](1000), gid: ptr[int64](2000)},
		{user: "{runAsUser: 0}", uid: ptr[int64](0)},
		{user: "{runAsGroup: 3000}", gid: ptr[int64](3000)},
		{user: `"1000:2000"`, uid: ptr[int64](1000), gid: ptr[int64](2000)},
		{user: "{runAsUser: 1000, fsGroup: 1}", uid: ptr[int64](1000), warn: "user.fsGroup"},
		{user: "{runAsUser: -1}", error: "expected a numeric id of 0 or more, found -1"},
		{user: "{runAsUser: root}", error: "services.web.user.runAsUser"},
	} {
		t.Run(tc.user, func(t *testing.T) {
			doc := "services:\n  web:\n    image: x\n    user: " + tc.user + "\n"
			if tc.error != "" {
				e := findError(t, loadErrors(t, doc), tc.error)
				if e.Pos.Line != 4 {
					t.Errorf("error at line %d, want 4: %v", e.Pos.Line, e)
				}
				return
			}
			p, err := loadYAML(t, doc, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			s := p.Service("web")
			if !reflect.DeepEqual(s.RunAsUser, tc.uid) || !reflect.DeepEqual(s.RunAsGroup, tc.gid) {
				t.Errorf("runAsUser %v, runAsGroup %v; want %v, %v", deref(s.RunAsUser), deref(s.RunAsGroup), deref(tc.uid), deref(tc.gid))
			}
			warnings := strings.Join(p.Warnings, "\n")
			if (tc.warn == "") != (warnings == "") || !strings.Contains(warnings, tc.warn) {
				t.Errorf("warnings %q, want one containing %q", p.Warnings, tc.warn)
			}
		})
	}
}

func deref(p *int64) any {
	if p == nil {
		return nil
	}
	return *p
}

// TestOktetoSpellings: Okteto's spellings of service keys are read as Compose's, with one
// warning each naming the Compose key; both spellings in one service are an error.
func TestOktetoSpellings(t *testing.T) {
	p, err := loadYAML(t, `services:
  web:
    image: x
    envFile: web.env
    capAdd: [NET_ADMIN]
    capDrop: [ALL]
    stopGracePeriod: 5s
    workdir: /app
`, nil, map[string]string{"web.env": "A=1\n"})
	if err != nil {
		t.Fatal(err)
	}
	s := p.Service("web")
	if !reflect.DeepEqual(s.Environment, map[string]string{"A": "1"}) || !reflect.DeepEqual(s.CapAdd, []string{"NET_ADMIN"}) ||
		!reflect.DeepEqual(s.CapDrop, []string{"ALL"}) || s.StopGracePeriod == nil || *s.StopGracePeriod != 5*time.Second || s.WorkingDir != "/app" {
		t.Errorf("service = %+v", s)
	}
	var want []string
	for _, w := range []struct {
		at, okteto, compose string
	}{{"4:5", "envFile", "env_file"}, {"5:5", "capAdd", "cap_add"}, {"6:5", "capDrop", "cap_drop"}, {"7:5", "stopGracePeriod", "stop_grace_period"}, {"8:5", "workdir", "working_dir"}} {
		want = append(want, "/compose.yml:"+w.at+": services.web."+w.okteto+": "+w.okteto+" is Okteto's spelling; read as "+w.compose+", the name Docker Compose knows")
	}
	if len(p.Warnings) != len(want) {
		t.Fatalf("warnings = %q", p.Warnings)
	}
	for i, w := range want {
		if !strings.HasSuffix(p.Warnings[i], w) {
			t.Errorf("warning %d = %q, want one ending %q", i, p.Warnings[i], w)
		}
	}

	es := loadErrors(t, "services:\n  web:\n    image: x\n    env_file: a.env\n    envFile: b.env\n")
	e := findError(t, es, "env_file and envFile are the same field; set one of them")
	if e.Pos.Line != 5 {
		t.Errorf("error at line %d, want 5", e.Pos.Line)
	}

	// Through an override file too: the merged service has both keys.
	dir := t.TempDir()
	for name, content := range map[string]string{
		"compose.yml":          "services:\n  web:\n    image: x\n    stop_grace_period: 1s\n",
		"compose.override.yml": "services:\n  web:\n    stopGracePeriod: 2s\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_, err = Load(LoadOptions{Files: []string{filepath.Join(dir, "compose.yml"), filepath.Join(dir, "compose.override.yml")}, Environ: map[string]string{}})
	if err == nil || !strings.Contains(err.Error(), "compose.override.yml:3:5: services.web.stopGracePeriod: stop_grace_period and stopGracePeriod are the same field") {
		t.Errorf("override with the other spelling: %v", err)
	}
}

// TestOktetoResources: the short resources form, its storage {size, class}, and the conflict
// with deploy.resources.
func TestOktetoResources(t *testing.T) {
	for _, tc := range []struct {
		name, service string
		want          Resources
		error         string
	}{
		{name: "short", service: "resources: {cpu: 100m, memory: 1Gi, storage: 10Gi}",
			want: Resources{Requests: ResourceList{CPU: "100m", Memory: "1Gi", Storage: "10Gi"}}},
		{name: "storage class", service: "resources: {storage: {size: 10Gi, class: fast}}",
			want: Resources{Requests: ResourceList{Storage: "10Gi", StorageClass: "fast"}}},
		{name: "requests storage class", service: "resources: {requests: {storage: {size: 5Gi, class: fast}}}",
			want: Resources{Requests: ResourceList{Storage: "5Gi", StorageClass: "fast"}}},
		{name: "limits and requests", service: "resources: {limits: {cpu: 1, memory: 2Gi}, requests: {cpu: 500m, memory: 1Gi}}",
			want: Resources{Limits: ResourceList{CPU: "1", Memory: "2Gi"}, Requests: ResourceList{CPU: "500m", Memory: "1Gi"}}},
		{name: "beside an equal deploy.resources", service: "resources: {cpu: 100m}\n    deploy: {resources: {reservations: {cpus: 0.1}}}",
			want: Resources{Requests: ResourceList{CPU: "100m"}}},
		{name: "beside a different deploy.resources", service: "resources: {cpu: 100m}\n    deploy: {resources: {reservations: {cpus: 1}}}",
			error: "resources and deploy.resources are both set and differ; set one of them"},
		{name: "short and requests differ", service: "resources: {cpu: 100m, requests: {cpu: 200m}}",
			error: "the short form and requests both set a value and differ"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc := "services:\n  web:\n    image: x\n    " + tc.service + "\n"
			if tc.error != "" {
				findError(t, loadErrors(t, doc), tc.error)
				return
			}
			p, err := loadYAML(t, doc, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Warnings) > 0 {
				t.Errorf("warnings: %q", p.Warnings)
			}
			if got := p.Service("web").Resources; got != tc.want {
				t.Errorf("resources = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestOktetoVolume: a top-level volume's labels, annotations, size and class in Okteto's
// short form and in driver_opts.
func TestOktetoVolume(t *testing.T) {
	p := mustLoad(t, `services:
  web: {image: x, volumes: ["a:/a", "b:/b"]}
volumes:
  a:
    labels: {team: data}
    annotations: {backup.example.com/schedule: daily}
    size: 5Gi
    class: fast
  b:
    driver_opts: {size: 2Gi, class: slow}
`)
	if len(p.Warnings) > 0 {
		t.Errorf("warnings: %q", p.Warnings)
	}
	a, b := p.Volume("a"), p.Volume("b")
	if !reflect.DeepEqual(a.Labels, map[string]string{"team": "data"}) || !reflect.DeepEqual(a.Annotations, map[string]string{"backup.example.com/schedule": "daily"}) ||
		a.Size != "5Gi" || a.Class != "fast" {
		t.Errorf("volume a = %+v", a)
	}
	if b.Size != "2Gi" || b.Class != "slow" {
		t.Errorf("volume b = %+v", b)
	}
}

// TestOktetoContradictionsStayErrors: where Okteto accepts what Docker Compose refuses, the
// Compose error stays.
func TestOktetoContradictionsStayErrors(t *testing.T) {
	for _, tc := range []struct{ doc, err string }{
		{"services:\n  web:\n    image: x\n    scale: 2\n    deploy: {replicas: 3}\n", "scale is 2 and deploy.replicas is 3; set one of them"},
		{"services:\n  my web:\n    image: x\n", "my web"},
	} {
		findError(t, loadErrors(t, tc.doc), tc.err)
	}
}

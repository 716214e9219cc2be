package compose

import (
	"strings"
	"testing"
)

// Each bad input must fail with an error naming the line, column and field, and saying what
// was expected.
func TestErrors(t *testing.T) {
	const web = "services:\n  web:\n    image: x\n"
	tests := []struct {
		name, yaml string
		line, col  int
		field      string
		msg        string
	}{
		{"unknown named volume", web + "    volumes: [data:/d]\nvolumes: {other: {}}\n", 4, 15, "services.web.volumes[0]", `volume "data" is not defined in the top-level volumes (defined: other)`},
		{"depends_on missing service", web + "    depends_on: [db]\n", 4, 18, "services.web.depends_on", `service "db" is not defined (services: web)`},
		{"depends_on cycle", "services:\n  a: {image: x, depends_on: [b]}\n  b: {image: x, depends_on: [c]}\n  c: {image: x, depends_on: [a]}\n", 4, 30, "services.c.depends_on", "dependency cycle: a -> b -> c -> a"},
		{"depends_on self", "services:\n  a: {image: x, depends_on: [a]}\n", 2, 30, "services.a.depends_on", "dependency cycle: a -> a"},
		{"depends_on bad condition", web + "    depends_on:\n      web2: {condition: healthy}\n  web2: {image: x}\n", 5, 0, "services.web.depends_on.web2.condition", "expected service_started, service_healthy or service_completed_successfully"},
		{"endpoint unknown service", web + "    ports: [80]\nendpoints:\n  - {path: /, service: api, port: 80}\n", 6, 24, "endpoints[0].service", `service "api" is not defined`},
		{"endpoint port not exposed", web + "    ports: [80]\nendpoints:\n  - {path: /, service: web, port: 81}\n", 6, 35, "endpoints[0].port", `service "web" does not expose port 81 (its ports: 80)`},
		{"endpoint port out of range", web + "    ports: [80]\nendpoints:\n  - {path: /, service: web, port: 0}\n", 6, 35, "endpoints[0].port", "expected a port between 1 and 65535, found 0"},
		{"endpoint route missing fields", web + "endpoints:\n  - {path: /}\n", 5, 5, "endpoints[0]", "missing service, port"},
		{"bad duration", web + "    healthcheck: {test: [CMD, x], interval: 10 seconds}\n", 4, 45, "services.web.healthcheck.interval", `expected a duration such as 10s, 500ms or 1m30s, found "10 seconds"`},
		{"duration without unit", web + "    healthcheck: {test: [CMD, x], timeout: 10}\n", 4, 44, "services.web.healthcheck.timeout", "expected a duration with a unit"},
		{"bad stop_grace_period", web + "    stop_grace_period: soon\n", 4, 24, "services.web.stop_grace_period", "expected a duration"},
		{"bad port", web + "    ports: [\"80:99999\"]\n", 4, 13, "services.web.ports[0]", `invalid port "80:99999": container port "99999" is not a number between 1 and 65535`},
		{"bad port protocol", web + "    ports: [\"80/sctp\"]\n", 4, 13, "services.web.ports[0]", "protocol must be tcp or udp"},
		{"bad port range", web + "    ports: [\"8000-8002:3000-3001\"]\n", 4, 13, "services.web.ports[0]", "host and container ranges have different lengths"},
		{"bad restart", web + "    restart: sometimes\n", 4, 14, "services.web.restart", `expected one of always, unless-stopped, any, no, none, never, on-failure or on-failure:<max attempts>, found "sometimes"`},
		{"bad restart condition", web + "    deploy: {restart_policy: {condition: sometimes}}\n", 4, 42, "services.web.deploy.restart_policy.condition", `expected none, on-failure or any, found "sometimes"`},
		{"invalid service name", "services:\n  my.web: {image: x}\n", 2, 3, "services.my.web", `service name "my.web" is not valid in Kubernetes: use at most 63 lower-case letters, digits and '-'`},
		{"invalid volume name", web + "volumes:\n  db.data: {}\n", 5, 3, "volumes.db.data", `volume name "db.data" is not valid in Kubernetes: use at most 63 lower-case letters, digits and '-', starting and ending with a letter or digit (for example "db-data")`},
		{"list where a map is expected", web + "    healthcheck: [CMD, x]\n", 4, 18, "services.web.healthcheck", "expected a mapping, found a list"},
		{"map where a list is expected", web + "    cap_add: {a: b}\n", 4, 14, "services.web.cap_add", "expected a list of strings, found a mapping"},
		{"string where int is expected", web + "    scale: many\n", 4, 12, "services.web.scale", `expected an integer, found the string "many"`},
		{"image missing without build", "services:\n  web:\n    command: run\n", 2, 3, "services.web", "image is required when build is not set"},
		{"scale and replicas differ", web + "    scale: 2\n    deploy: {replicas: 3}\n", 5, 24, "services.web.deploy.replicas", "scale is 2 and deploy.replicas is 3"},
		{"bad memory", web + "    resources: {limits: {memory: lots}}\n", 4, 34, "services.web.resources.limits.memory", `expected a memory size such as 512M, 1g or 512Mi, found "lots"`},
		{"bad cpu", web + "    deploy: {resources: {limits: {cpus: -1}}}\n", 4, 41, "services.web.deploy.resources.limits.cpus", "expected a number of CPUs"},
		{"relative container path", web + "    volumes: [\"data\"]\n", 4, 15, "services.web.volumes[0]", `the container path must be absolute, found "data"`},
		{"healthcheck bad test", web + "    healthcheck: {test: [RUN, x]}\n", 4, 25, "services.web.healthcheck.test", `expected a list starting with NONE, CMD or CMD-SHELL, found "RUN" first`},
		{"duplicate key", web + "    image: y\n", 4, 5, "services.web.image", "key is defined twice"},
		{"bad yaml", "services:\n  web: [\n", 2, 1, "", "invalid YAML"},
		{"empty file", "", 1, 1, "", "the compose file is empty"},
		{"top level not a mapping", "- a\n", 1, 1, "", "expected a mapping, found a list"},
		{"unbalanced quote in command", web + "    command: echo 'oops\n", 4, 14, "services.web.command", "cannot split"},
		{"endpoint name invalid", web + "    ports: [80]\nendpoints:\n  Shop_1: [{path: /, service: web, port: 80}]\n", 6, 3, "endpoints.Shop_1", `endpoint name "Shop_1" is not valid`},
		{"merge of a scalar", "x-a: &a hello\nservices:\n  web:\n    <<: *a\n    image: x\n", 4, 9, "services.web.<<", "expected a mapping or a list of mappings to merge"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			es := loadErrors(t, tt.yaml)
			e := findError(t, es, tt.msg)
			if e.Pos.Line != tt.line || (tt.col != 0 && e.Pos.Column != tt.col) || e.Field != tt.field {
				t.Errorf("got %s field %q, want line %d col %d field %q", e.Pos, e.Field, tt.line, tt.col, tt.field)
			}
			if !strings.HasSuffix(e.Pos.File, "compose.yml") || !strings.Contains(e.Error(), "compose.yml:") {
				t.Errorf("error does not name the file: %v", e)
			}
		})
	}
}

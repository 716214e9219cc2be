package manifest

import (
	"strings"
	"testing"
)

func TestDryRunPlan(t *testing.T) {
	m, _ := mustLoad(t, `deploy:
  commands:
    - name: migrate
      command: ./migrate --token $API_TOKEN
  compose: compose.yml
dependencies:
  api: {repository: https://github.com/acme/api, branch: main}
destroy:
  - ./cleanup
`, map[string]string{"compose.yml": "services:\n  web: {image: w}\n"})
	vars := map[string]string{"DEVTOOL_NAMESPACE": "dev", "API_TOKEN": "tok-12345", "DEVTOOL_BUILD_WEB_IMAGE": "reg/web:1"}
	lines := strings.Join(m.Plan(false, vars, nil).Lines("tok-12345"), "\n")
	for _, want := range []string{"compose file: ", "compose.yml", "dependency api: https://github.com/acme/api (branch main)",
		"  API_TOKEN=******", "  DEVTOOL_NAMESPACE=dev", "  DEVTOOL_BUILD_WEB_IMAGE=reg/web:1", "would run: ./migrate --token ******"} {
		if !strings.Contains(lines, want) {
			t.Errorf("plan does not contain %q:\n%s", want, lines)
		}
	}
	if strings.Contains(lines, "tok-12345") {
		t.Errorf("secret shown:\n%s", lines)
	}
	d := m.Plan(true, vars, nil)
	if len(d.Commands) != 1 || d.Commands[0].Command != "./cleanup" || len(d.Dependencies) != 0 {
		t.Errorf("destroy plan = %+v", d)
	}
}

func TestDryRunExpand(t *testing.T) {
	p := (&Manifest{}).Plan(false, map[string]string{"DEVTOOL_NAMESPACE": "dev", "DB_PASSWORD": "hunter22", "MODE": "test", "EMPTY": ""}, nil)
	p.Environ = map[string]string{"HOME": "/home/u", "MODE": "shell"}
	for _, c := range []struct{ in, want string }{
		{"kubectl -n $DEVTOOL_NAMESPACE apply -f k8s", "kubectl -n dev apply -f k8s"},
		{"echo ${DEVTOOL_NAMESPACE}-x", "echo dev-x"},
		{"psql -p $DB_PASSWORD", "psql -p ******"},
		{"echo $MODE $HOME", "echo test /home/u"}, // the plan's variables win over the shell's
		{`echo '$MODE' \$MODE "$MODE"`, `echo '$MODE' \$MODE "test"`},
		{"echo $UNKNOWN ${UNKNOWN} ${MODE:-x} $1 $$ $", "echo $UNKNOWN ${UNKNOWN} ${MODE:-x} $1 $$ $"},
		{"echo [$EMPTY]", "echo []"},
		{"echo $MODE_X $MODEx", "echo $MODE_X $MODEx"},
	} {
		if got := p.Expand(c.in); got != c.want {
			t.Errorf("Expand(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestDryRunLinesImagesAndDependencies(t *testing.T) {
	m := &Manifest{Dependencies: []*Dependency{
		{Name: "api", Repository: "https://example.test/api", Variables: map[string]string{"API_TOKEN": "abcdef", "LEVEL": "2"}},
		{Name: "db", Repository: "https://example.test/db"},
	}}
	p := m.Plan(false, nil, nil)
	p.Images = []PlannedImage{{Service: "web", Ref: "reg:5000/dev/shop-web:abc"}, {Service: "job", Ref: "acme/job:1", Note: "always built: --build"}}
	p.DependencyNotes = map[string]string{"db": "already deployed (status deployed): skipped"}
	got := strings.Join(p.Lines(), "\n")
	want := strings.Join([]string{
		"dependency api: https://example.test/api: would be deployed",
		"  variable API_TOKEN=******",
		"  variable LEVEL=2",
		"dependency db: https://example.test/db: already deployed (status deployed): skipped",
		"image for web: reg:5000/dev/shop-web:abc (built when the registry does not have it)",
		"image for job: acme/job:1 (always built: --build)",
	}, "\n")
	if got != want {
		t.Errorf("lines:\n%s\nwant:\n%s", got, want)
	}
}

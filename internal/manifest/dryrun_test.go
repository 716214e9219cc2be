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
		"  API_TOKEN=******", "  DEVTOOL_NAMESPACE=dev", "  DEVTOOL_BUILD_WEB_IMAGE=reg/web:1", "would run: ./migrate --token $API_TOKEN"} {
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

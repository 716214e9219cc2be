package compose

import (
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/devtool/devtool/internal/yamlsrc"
)

// A port beyond any integer a port could be gets the range message, as 70000 does.
func TestEndpointPortBeyondInt32(t *testing.T) {
	es := loadErrors(t, "services:\n  web: {image: x, ports: [80]}\nendpoints:\n  - {path: /, service: web, port: 3000000000}\n")
	findError(t, es, "expected a port between 1 and 65535, found 3000000000")
}

// Without a project (a manifest's endpoints), route services are not checked.
func TestReadEndpointsWithoutProject(t *testing.T) {
	var doc yaml.Node
	src := "shop: {labels: {a: b}, rules: [{path: /, service: api, port: 8080}]}\n"
	if err := yaml.Unmarshal([]byte(src), &doc); err != nil {
		t.Fatal(err)
	}
	r := yamlsrc.NewReader("devtool.yml")
	eps := ReadEndpoints(r, &doc, "deploy.endpoints", nil)
	if len(r.Errs) != 0 {
		t.Fatalf("errors: %v", r.Errs)
	}
	if len(eps) != 1 || eps[0].Name != "shop" || eps[0].Labels["a"] != "b" || len(eps[0].Rules) != 1 {
		t.Fatalf("endpoints: %+v", eps)
	}
	if rt := eps[0].Rules[0]; rt.Path != "/" || rt.Service != "api" || rt.Port != 8080 {
		t.Fatalf("route: %+v", rt)
	}
}

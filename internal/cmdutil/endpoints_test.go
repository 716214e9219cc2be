package cmdutil

import (
	"bytes"
	"testing"

	"github.com/devtool/devtool/internal/errs"
)

// The texts are those `devtool endpoints` and `devtool preview endpoints` printed before they
// shared this printer.
func TestEndpointListWrite(t *testing.T) {
	env := []Endpoint{{URL: "https://a.x", Service: "web", Port: 80}, {URL: "https://bbbbbbbbb.x", Service: "api", Port: 8080}}
	pv := []Endpoint{{URL: "https://a.x"}, {URL: "https://b.x"}}
	for _, c := range []struct {
		list   EndpointList
		format string
		want   string
	}{
		{EndpointList{Of: "shop", None: "There are no public endpoints for shop", Table: true}, "", "There are no public endpoints for shop\n"},
		{EndpointList{Of: "shop", None: "There are no public endpoints for shop", Table: true}, "json", "[]\n"},
		{EndpointList{Of: "shop", None: "There are no public endpoints for shop", Table: true}, "md", "There are no public endpoints for shop.\n"},
		{EndpointList{Of: "shop", Items: env, Table: true}, "", "URL                  SERVICE  PORT\nhttps://a.x          web      80\nhttps://bbbbbbbbb.x  api      8080\n"},
		{EndpointList{Of: "shop", Items: env, Table: true}, "json", "[\n  \"https://a.x\",\n  \"https://bbbbbbbbb.x\"\n]\n"},
		{EndpointList{Of: "shop", Items: env, Table: true}, "md", "Available endpoints for shop:\n\n - https://a.x\n - https://bbbbbbbbb.x\n"},
		{EndpointList{Of: "preview pr-1", None: "There are no endpoints for preview pr-1"}, "", "There are no endpoints for preview pr-1\n"},
		{EndpointList{Of: "preview pr-1", None: "There are no endpoints for preview pr-1"}, "md", "There are no endpoints for preview pr-1.\n"},
		{EndpointList{Of: "preview pr-1", Items: pv}, "", "https://a.x\nhttps://b.x\n"},
		{EndpointList{Of: "preview pr-1", Items: pv}, "json", "[\n  \"https://a.x\",\n  \"https://b.x\"\n]\n"},
		{EndpointList{Of: "preview pr-1", Items: pv}, "md", "Available endpoints for preview pr-1:\n\n - https://a.x\n - https://b.x\n"},
	} {
		var b bytes.Buffer
		if err := c.list.Write(&b, c.format); err != nil {
			t.Fatal(err)
		}
		if b.String() != c.want {
			t.Errorf("%s %q with %d: %q, want %q", c.list.Of, c.format, len(c.list.Items), b.String(), c.want)
		}
	}
	for _, f := range []string{"", "json", "md"} {
		if err := CheckEndpointFormat(f); err != nil {
			t.Errorf("%q: %v", f, err)
		}
	}
	if err := CheckEndpointFormat("yaml"); err == nil || errs.ExitCode(err) != errs.ExitUsage {
		t.Errorf("yaml: %v, want a usage error", err)
	}
}

package translate

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// summary is the non-object part of a Result, as written to <case>.summary.yaml.
type summary struct {
	Services  []Service  `json:"services"`
	Endpoints []Endpoint `json:"endpoints"`
	Warnings  []string   `json:"warnings"`
}

func TestGolden(t *testing.T) {
	for _, tc := range goldenCases {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Translate(tc.project(), tc.opts)
			if err != nil {
				t.Fatalf("Translate: %v", err)
			}
			objs, err := ToYAML(res.Objects)
			if err != nil {
				t.Fatalf("ToYAML: %v", err)
			}
			sum, err := yaml.Marshal(summary{Services: res.Services, Endpoints: res.Endpoints, Warnings: res.Warnings})
			if err != nil {
				t.Fatal(err)
			}
			checkGolden(t, filepath.Join("testdata", tc.name+".objects.yaml"), objs)
			checkGolden(t, filepath.Join("testdata", tc.name+".summary.yaml"), sum)
		})
	}
}

func checkGolden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./internal/translate -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the output (run with -update to accept it):\n--- got\n%s", path, got)
	}
}

// TestDeterministic: translating the same project twice gives byte-identical YAML, whatever
// order Go happens to iterate maps in.
func TestDeterministic(t *testing.T) {
	for _, tc := range goldenCases {
		var first []byte
		for i := 0; i < 5; i++ {
			res, err := Translate(tc.project(), tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			out, err := ToYAML(res.Objects)
			if err != nil {
				t.Fatal(err)
			}
			if i == 0 {
				first = out
			} else if !bytes.Equal(first, out) {
				t.Fatalf("%s: output changed between runs", tc.name)
			}
		}
	}
}

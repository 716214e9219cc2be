package manifest

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"gopkg.in/yaml.v3"
)

const schemaPath = "../../docs/schema/devtool.schema.json"

func compileSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	f, err := os.Open(schemaPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		t.Fatalf("schema is not JSON: %v", err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("devtool.schema.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("devtool.schema.json")
	if err != nil {
		t.Fatalf("schema does not compile: %v", err)
	}
	return s
}

// yamlToInstance decodes YAML (merge keys resolved) into the JSON value the schema checks.
func yamlToInstance(t *testing.T, data []byte) any {
	t.Helper()
	var v any
	if err := yaml.Unmarshal(data, &v); err != nil {
		t.Fatalf("yaml: %v", err)
	}
	j, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("to json: %v", err)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(j))
	if err != nil {
		t.Fatal(err)
	}
	return inst
}

// TestSchemaAndLoaderAgree keeps docs/schema/devtool.schema.json in sync with the loader: every
// example the loader accepts (without ignored-field warnings) is valid per the schema, and every
// example in testdata/invalid is refused by both.
func TestSchemaAndLoaderAgree(t *testing.T) {
	schema := compileSchema(t)
	valid, _ := filepath.Glob("testdata/valid/*.yml")
	invalid, _ := filepath.Glob("testdata/invalid/*.yml")
	if len(valid) < 3 || len(invalid) < 3 {
		t.Fatalf("testdata is missing: %d valid, %d invalid examples", len(valid), len(invalid))
	}
	for _, path := range valid {
		t.Run(path, func(t *testing.T) {
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			m, err := LoadBytes(LoadOptions{File: path, Environ: map[string]string{}, HomeDir: "/home/dev"}, data)
			if err != nil {
				t.Fatalf("loader refuses it: %v", err)
			}
			for _, w := range m.Warnings {
				if strings.Contains(w, "ignored fields") {
					t.Errorf("loader ignores fields of a valid example: %s", w)
				}
			}
			if err := schema.Validate(yamlToInstance(t, data)); err != nil {
				t.Errorf("the loader accepts it but the schema does not: %v", err)
			}
		})
	}
	for _, path := range invalid {
		t.Run(path, func(t *testing.T) {
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := LoadBytes(LoadOptions{File: path, Environ: map[string]string{}}, data); err == nil {
				t.Errorf("the loader accepts an invalid example")
			}
			if err := schema.Validate(yamlToInstance(t, data)); err == nil {
				t.Errorf("the schema accepts an invalid example")
			}
		})
	}
}

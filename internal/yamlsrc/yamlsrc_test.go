package yamlsrc

import (
	"errors"
	"testing"

	"gopkg.in/yaml.v3"
)

func parse(t *testing.T, src string) *yaml.Node {
	t.Helper()
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(src), &doc); err != nil {
		t.Fatal(err)
	}
	return Deref(&doc)
}

func TestMappingMergeAndErrors(t *testing.T) {
	r := NewReader("f.yml")
	n := parse(t, "base: &b {a: 1, b: 2}\nm:\n  <<: *b\n  b: 3\n  c: 4\n  c: 5\n")
	top, ok := r.Mapping(n, "")
	if !ok || len(top) != 2 {
		t.Fatalf("top = %v, %v", top, ok)
	}
	es, _ := r.Mapping(top[1].Val, "m")
	got := map[string]string{}
	for _, e := range es {
		got[e.Key] = e.Val.Value
	}
	if len(got) != 3 || got["a"] != "1" || got["b"] != "3" || got["c"] != "4" {
		t.Errorf("entries = %v", got)
	}
	if len(r.Errs) != 1 || r.Errs[0].Error() != "f.yml:6:3: m.c: key is defined twice in the same mapping" {
		t.Errorf("errors = %v", r.Errs)
	}
	var list []*Error = r.Errs
	if FormatErrors("file", list) != r.Errs[0].Error() {
		t.Errorf("one error formats as itself")
	}
}

func TestKeyValuesStrictNames(t *testing.T) {
	for _, strict := range []bool{false, true} {
		r := NewReader("f.yml")
		r.StrictNames = strict
		kvs, ok := r.KeyValues(parse(t, "[A=1, B, '  =x', =y]"), "env")
		if !ok {
			t.Fatal("not ok")
		}
		wantKVs, wantErrs := 3, 1
		if strict {
			wantKVs, wantErrs = 2, 2
		}
		if len(kvs) != wantKVs || len(r.Errs) != wantErrs {
			t.Errorf("strict=%v: %d values, %d errors (%v)", strict, len(kvs), len(r.Errs), r.Errs)
		}
		if kvs[0] != (KV{Key: "A", Value: "1", HasValue: true, Node: kvs[0].Node}) || kvs[1].HasValue {
			t.Errorf("strict=%v: %+v", strict, kvs)
		}
	}
}

func TestInterpolate(t *testing.T) {
	r := NewReader("f.yml")
	r.Lookup = ChainLookups(nil, MapLookup(map[string]string{"A": "a"}))
	doc := parse(t, "x: ${A}-${B}\ny: ${C:?needed}\n")
	r.Interpolate(doc, "", nil)
	if v := doc.Content[1].Value; v != "a-" {
		t.Errorf("x = %q", v)
	}
	if len(r.Errs) != 1 || r.Errs[0].Error() != "f.yml:2:4: y: required variable C is not set: needed" {
		t.Errorf("errors = %v", r.Errs)
	}
	if w := r.Warnings(); len(w) != 1 || w[0] != `the "B" variable is not set; using an empty string` {
		t.Errorf("warnings = %q", w)
	}
	var e *Error
	if !errors.As(errors.Join(UnwrapErrors(r.Errs)...), &e) || e.Field != "y" {
		t.Errorf("errors.As")
	}
}

package secretmask

import (
	"bytes"
	"encoding/base64"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
)

func TestWriterMasks(t *testing.T) {
	const secret = "s3cr3t-VALUE"
	cases := []struct {
		name   string
		values []string
		writes []string
		want   string
	}{
		{"no values: unchanged", nil, []string{"a s3cr3t-VALUE b"}, "a s3cr3t-VALUE b"},
		{"whole value in one write", []string{secret}, []string{"token=s3cr3t-VALUE\n"}, "token=***\n"},
		{"twice in one write", []string{secret}, []string{"s3cr3t-VALUEs3cr3t-VALUE"}, "******"},
		{"split across two writes", []string{secret}, []string{"token=s3cr", "3t-VALUE\n"}, "token=***\n"},
		{"split byte by byte", []string{secret}, strings.Split("x s3cr3t-VALUE y", ""), "x *** y"},
		{"a prefix that turns out not to be the value", []string{secret}, []string{"s3cr", "ab\n"}, "s3crab\n"},
		{"a prefix left at the end is flushed", []string{secret}, []string{"ends with s3cr3t"}, "ends with s3cr3t"},
		{"JSON-escaped form", []string{"a\"b\\c\td"}, []string{`{"v": "a\"b\\c\td"}`}, `{"v": "***"}`},
		{"base64 form", []string{secret}, []string{"data: " + base64.StdEncoding.EncodeToString([]byte(secret))}, "data: ***"},
		{"each line of a multi-line value", []string{"line-one\nline-two"}, []string{"|\n  line-one\n  line-two\n"}, "|\n  ***\n  ***\n"},
		{"longest value wins", []string{"abcd", "abcdef"}, []string{"xabcdefx abcdx"}, "x***x ***x"},
		{"a short value is not masked", []string{"abc"}, []string{"abc abcd"}, "abc abcd"},
		{"several values", []string{"first-secret", "second-secret"}, []string{"first-secret and second-", "secret"}, "*** and ***"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var set Set
			set.Add(c.values...)
			var out bytes.Buffer
			w := NewWriter(&out, &set)
			for _, s := range c.writes {
				n, err := w.Write([]byte(s))
				if err != nil || n != len(s) {
					t.Fatalf("Write(%q) = %d, %v", s, n, err)
				}
			}
			if err := w.Flush(); err != nil {
				t.Fatal(err)
			}
			if out.String() != c.want {
				t.Errorf("got %q, want %q", out.String(), c.want)
			}
		})
	}
}

// TestWriterNeverLeaksAcrossRandomSplits writes output holding values at random places, cut into
// random writes, with values added while writing; the output never holds a value and, once the
// values are replaced by the mask in the input, equals it.
func TestWriterNeverLeaksAcrossRandomSplits(t *testing.T) {
	values := []string{"hunter2-password", "tok_ABCDEFGHIJ", "aaaab", "xyzxyzxyq"}
	for seed := uint64(1); seed <= 500; seed++ {
		r := rand.New(rand.NewPCG(seed, 0))
		var in strings.Builder
		var want strings.Builder
		for range 40 {
			if r.IntN(3) == 0 {
				v := values[r.IntN(len(values))]
				in.WriteString(v)
				want.WriteString(Mask)
			} else {
				// Filler that shares prefixes with the values but never completes one.
				fill := []string{"hunter", "tok_", "aaa", "xyzxyz", " ", "\n", "plain text"}[r.IntN(7)]
				in.WriteString(fill)
				want.WriteString(fill)
				in.WriteString("|")
				want.WriteString("|")
			}
		}
		var set Set
		set.Add(values...)
		var out bytes.Buffer
		w := NewWriter(&out, &set)
		data := []byte(in.String())
		for len(data) > 0 {
			n := min(len(data), 1+r.IntN(12))
			if _, err := w.Write(data[:n]); err != nil {
				t.Fatal(err)
			}
			data = data[n:]
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		for _, v := range values {
			if strings.Contains(out.String(), v) {
				t.Fatalf("seed %d: %q leaked in %q", seed, v, out.String())
			}
		}
		if out.String() != want.String() {
			t.Fatalf("seed %d:\n got %q\nwant %q", seed, out.String(), want.String())
		}
	}
}

func TestSetString(t *testing.T) {
	var set Set
	set.Add("p4ssw0rd")
	if got := set.String(`command "curl -u me:p4ssw0rd" failed`); got != `command "curl -u me:***" failed` {
		t.Errorf("got %q", got)
	}
}

// TestWriterConcurrent: writers and Add from several goroutines (go test -race).
func TestWriterConcurrent(t *testing.T) {
	var set Set
	set.Add("value-xxxx")
	var out bytes.Buffer
	var mu sync.Mutex
	w := NewWriter(lockedWriter{&out, &mu}, &set)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			set.Add("value-" + strings.Repeat("y", i+4))
			for range 200 {
				w.Write([]byte("value-xxxx and more\n"))
			}
		}()
	}
	wg.Wait()
	w.Flush()
	if strings.Contains(out.String(), "value-xxxx") || strings.Count(out.String(), "*** and more\n") != 8*200 {
		t.Errorf("a value leaked, or lines were lost or mixed")
	}
}

type lockedWriter struct {
	b  *bytes.Buffer
	mu *sync.Mutex
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// BenchmarkWriter: 1 MiB of dry-run-like output in 4 KiB writes, straight to a buffer (the
// baseline), through a writer with no values (every command off a platform), and through one
// masking ten values; compare the three in the same run.
func BenchmarkWriter(b *testing.B) {
	line := []byte("apiVersion: apps/v1 kind: Deployment metadata: name: web namespace: dev labels: app: web\n")
	var data []byte
	for len(data) < 1<<20 {
		data = append(data, line...)
	}
	var ten Set
	for i := range 10 {
		ten.Add("secret-value-" + strings.Repeat("k", i))
	}
	for _, bc := range []struct {
		name string
		set  *Set // nil: no writer at all
	}{{"direct", nil}, {"no-values", &Set{}}, {"ten-values", &ten}} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				var w io.Writer = &bytes.Buffer{}
				var mw *Writer
				if bc.set != nil {
					mw = NewWriter(w, bc.set)
					w = mw
				}
				for i := 0; i < len(data); i += 4096 {
					w.Write(data[i:min(len(data), i+4096)])
				}
				if mw != nil {
					mw.Flush()
				}
			}
		})
	}
}

package compose

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
)

// within fails the test when f does not return in time, so an input that hangs the loader
// fails instead of stalling the suite.
func within(t *testing.T, d time.Duration, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("still running after %v", d)
	}
}

// nested is ${V0:-${V1:-...x...}} nested n deep.
func nested(n int) string {
	return strings.Repeat("${V:-", n) + "x" + strings.Repeat("}", n)
}

// TestBadInput is issue 12's table for the Compose loader: special and huge files, deep
// nesting, several documents, long values, numbers out of range. Each case must end with the
// clean error (or result) within a generous timeout.
func TestBadInput(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	fifo := filepath.Join(dir, "fifo.yml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	envFifo := filepath.Join(dir, "env.fifo")
	if err := syscall.Mkfifo(envFifo, 0o600); err != nil {
		t.Fatal(err)
	}
	toZero := filepath.Join(dir, "zero.yml")
	if err := os.Symlink("/dev/zero", toZero); err != nil {
		t.Fatal(err)
	}
	huge := filepath.Join(dir, "huge.yml")
	f, err := os.Create(huge)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(MaxFileSize + 1); err != nil {
		t.Fatal(err)
	}
	f.Close()
	long := strings.Repeat("A", 5000)

	for _, tc := range []struct {
		name    string
		file    string // a path; or content written to compose.yml
		content string
		dotEnv  string // path .env is a symlink to
		// allowOutside loads with the opt-in for paths outside the project (special files are
		// refused for what they are even then).
		allowOutside bool
		want         []string
		wantNot      string
	}{
		{name: "fifo as compose file", file: fifo, want: []string{fifo, "not a regular file", "named pipe"}},
		{name: "symlink to /dev/zero", file: toZero, want: []string{toZero, "character device"}},
		{name: "/dev/zero", file: "/dev/zero", want: []string{"/dev/zero", "character device"}},
		{name: "file over the cap", file: huge, want: []string{huge, "16 MiB"}},
		{name: "folder", file: dir, want: []string{"a folder"}},
		{name: "env_file is a fifo", content: "services:\n  web:\n    image: x\n    env_file: " + envFifo + "\n",
			want: []string{"compose.yml:4:15", "env.fifo", "named pipe"}, allowOutside: true},
		{name: "env_file is /dev/zero", content: "services:\n  web:\n    image: x\n    env_file: /dev/zero\n",
			want: []string{"compose.yml:4:15", "/dev/zero", "character device"}, allowOutside: true},
		{name: ".env is a symlink to a fifo", content: "services:\n  web:\n    image: x\n", dotEnv: envFifo,
			want: []string{".env", "named pipe"}, allowOutside: true},
		{name: ".env is a symlink out of the project", content: "services:\n  web:\n    image: x\n", dotEnv: envFifo,
			want: []string{".env links to " + envFifo, "--allow-outside-volumes"}},
		{name: "nesting at the limit", content: "services:\n  web:\n    image: \"" + nested(10) + "\"\n"},
		{name: "nesting over the limit", content: "services:\n  web:\n    image: \"" + nested(11) + "\"\n",
			want: []string{"compose.yml:3:12", "services.web.image", "nested 11 deep", "at most 10"}},
		{name: "50,000 levels", content: "services:\n  web:\n    image: \"" + nested(50000) + "\"\n",
			want: []string{"compose.yml:3:12", "nested 50000 deep"}, wantNot: "${V:-${V:-${V:-${V:-${V:-${V:-${V:-${V:-${V:-${V:-${V:-"},
		{name: "two documents", content: "services:\n  web:\n    image: x\n---\nservices:\n  db:\n    image: y\n",
			want: []string{"compose.yml:4:1", "second YAML document"}},
		{name: "empty trailing document is fine", content: "services:\n  web:\n    image: x\n---\n"},
		{name: "long value quoted short", content: "services:\n  web:\n    image: x\n    restart: " + long + "\n",
			want: []string{`found "` + strings.Repeat("A", 60) + `…"`}, wantNot: strings.Repeat("A", 61)},
		{name: "long port quoted short", content: "services:\n  web:\n    image: x\n    ports: [\"" + long + "\"]\n",
			wantNot: strings.Repeat("A", 61), want: []string{"invalid port"}},
		{name: "number out of range", content: "services:\n  web:\n    image: x\n    scale: 99999999999999999999\n",
			want: []string{"compose.yml:4:12", "out of range"}, wantNot: "expected an integer"},
		{name: "empty file", content: "", want: []string{"the compose file is empty"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			within(t, 20*time.Second, func() {
				file := tc.file
				if file == "" {
					d := t.TempDir()
					file = filepath.Join(d, "compose.yml")
					if err := os.WriteFile(file, []byte(tc.content), 0o644); err != nil {
						t.Fatal(err)
					}
					if tc.dotEnv != "" {
						if err := os.Symlink(tc.dotEnv, filepath.Join(d, ".env")); err != nil {
							t.Fatal(err)
						}
					}
				}
				_, err := Load(LoadOptions{File: file, Environ: map[string]string{}, HomeDir: dir, AllowOutside: tc.allowOutside})
				if len(tc.want) == 0 {
					if err != nil {
						t.Fatalf("unexpected error: %v", err)
					}
					return
				}
				if err == nil {
					t.Fatalf("no error; want %q", tc.want)
				}
				for _, w := range tc.want {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not contain %q", err, w)
					}
				}
				if tc.wantNot != "" && strings.Contains(err.Error(), tc.wantNot) {
					t.Errorf("error contains %q: %.300s", tc.wantNot, err)
				}
				if len(err.Error()) > 2000 {
					t.Errorf("error is %d bytes long", len(err.Error()))
				}
			})
		})
	}
	_ = write
}

// TestNoLogrusOutput: compose-go's template package logs unset variables in nested defaults
// through logrus; the loader must route them into its warnings instead.
func TestNoLogrusOutput(t *testing.T) {
	var buf bytes.Buffer
	logrus.SetOutput(&buf)
	defer logrus.SetOutput(os.Stderr)
	p, err := loadYAML(t, "services:\n  web:\n    image: \"${A:-${B}}:${C:-${D:-${E}}}\"\n    working_dir: ${X:?${Y} needed}${Z}\n", map[string]string{"X": "/w"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if buf.Len() > 0 {
		t.Errorf("logrus output: %s", buf.String())
	}
	got := strings.Join(p.Warnings, "\n")
	for _, name := range []string{"B", "E", "Z"} {
		if !strings.Contains(got, `"`+name+`" variable is not set`) {
			t.Errorf("no warning for %s in %q", name, got)
		}
	}
}

// TestLongDependencyChain: depends_on checks are linear in services and edges, so a chain of
// 50,000 services loads and translates in well under the timeout (quadratic work took minutes).
func TestLongDependencyChain(t *testing.T) {
	const n = 50000
	var b strings.Builder
	b.WriteString("services:\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "  s%d: {image: x", i)
		if i > 0 {
			fmt.Fprintf(&b, ", depends_on: [s%d]", i-1)
		}
		b.WriteString("}\n")
	}
	within(t, 60*time.Second, func() {
		p, err := LoadBytes(LoadOptions{File: filepath.Join(t.TempDir(), "compose.yml"), Environ: map[string]string{}}, []byte(b.String()))
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Services) != n {
			t.Errorf("%d services", len(p.Services))
		}
	})
}

// TestEnvFileErrorsDoNotQuoteValues: a broken env file's error names the file and line, never
// the value (compose-go's dotenv quotes the rest of the line).
func TestEnvFileErrorsDoNotQuoteValues(t *testing.T) {
	for _, content := range []string{
		"OK=1\nPASSWORD=\"hunter2-" + strings.Repeat("x", 5000) + "\n",
		"OK=1\nBAD!NAME=hunter2-secret\n",
	} {
		for _, name := range []string{"app.env", ".env"} {
			compose := "services:\n  web:\n    image: x\n"
			if name == "app.env" {
				compose += "    env_file: app.env\n"
			}
			_, err := loadYAML(t, compose, nil, map[string]string{name: content})
			if err == nil {
				t.Fatalf("%s: no error", name)
			}
			if strings.Contains(err.Error(), "hunter2") || !strings.Contains(err.Error(), "line ") {
				t.Errorf("%s: %.300s", name, err)
			}
		}
	}
}

// TestLoadCancelled: a cancelled context stops a load with context.Canceled.
func TestLoadCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var b strings.Builder
	b.WriteString("services:\n")
	for i := 0; i < 5000; i++ {
		fmt.Fprintf(&b, "  s%d: {image: x}\n", i)
	}
	_, err := LoadBytes(LoadOptions{File: filepath.Join(t.TempDir(), "compose.yml"), Context: ctx}, []byte(b.String()))
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
}

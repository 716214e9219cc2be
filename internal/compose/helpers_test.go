package compose

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// loadYAML writes compose.yml (and any extra files) into a fresh folder and loads it with the
// given shell environment.
func loadYAML(t *testing.T, compose string, env map[string]string, extra map[string]string) (*Project, error) {
	t.Helper()
	dir := t.TempDir()
	for name, content := range extra {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	file := filepath.Join(dir, "compose.yml")
	if err := os.WriteFile(file, []byte(compose), 0o644); err != nil {
		t.Fatal(err)
	}
	if env == nil {
		env = map[string]string{}
	}
	return Load(LoadOptions{File: file, Environ: env, HomeDir: "/home/dev"})
}

// mustLoad loads and fails the test on error.
func mustLoad(t *testing.T, compose string) *Project {
	t.Helper()
	p, err := loadYAML(t, compose, nil, nil)
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	return p
}

// mustService loads a file and returns its only service "web".
func mustService(t *testing.T, compose string) *Service {
	t.Helper()
	s := mustLoad(t, compose).Service("web")
	if s == nil {
		t.Fatal("service web not loaded")
	}
	return s
}

// loadErrors loads a file that must fail and returns its errors.
func loadErrors(t *testing.T, compose string) Errors {
	t.Helper()
	_, err := loadYAML(t, compose, nil, nil)
	if err == nil {
		t.Fatalf("expected an error for:\n%s", compose)
	}
	var es Errors
	if !errors.As(err, &es) {
		t.Fatalf("error is not compose.Errors: %T %v", err, err)
	}
	return es
}

// findError returns the error whose message contains want, or fails.
func findError(t *testing.T, es Errors, want string) *Error {
	t.Helper()
	for _, e := range es {
		if strings.Contains(e.Error(), want) {
			return e
		}
	}
	t.Fatalf("no error containing %q in:\n%v", want, es)
	return nil
}

func ptr[T any](v T) *T { return &v }

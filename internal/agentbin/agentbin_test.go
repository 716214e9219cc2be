package agentbin

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestOverrideByEnv(t *testing.T) {
	p := filepath.Join(t.TempDir(), "agent")
	if err := os.WriteFile(p, []byte("binary"), 0o755); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{EnvBinary: p}
	data, sum, err := ForEnv("arm64", func(k string) string { return env[k] })
	want := sha256.Sum256([]byte("binary"))
	if err != nil || string(data) != "binary" || sum != hex.EncodeToString(want[:]) {
		t.Fatalf("%q %s %v", data, sum, err)
	}
	env[EnvBinary] = filepath.Join(t.TempDir(), "missing")
	if _, _, err := ForEnv("amd64", func(k string) string { return env[k] }); err == nil || !strings.Contains(err.Error(), EnvBinary) {
		t.Fatalf("missing override: %v", err)
	}
}

func TestEmbedded(t *testing.T) {
	none := func(string) string { return "" }
	if _, _, err := ForEnv("riscv64", none); !errors.Is(err, ErrMissing) {
		t.Fatalf("riscv64: %v", err)
	}
	for _, arch := range []string{"amd64", "arm64"} {
		data, sum, err := ForEnv(arch, none)
		if errors.Is(err, ErrMissing) {
			// A plain `go build`/`go test` without `make agent`: the error says how to fix it.
			if !strings.Contains(err.Error(), "make build") {
				t.Fatalf("unhelpful: %v", err)
			}
			t.Logf("%s: not embedded in this build (%v)", arch, err)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(data) < 4 || string(data[:4]) != "\x7fELF" || len(sum) != 64 {
			t.Fatalf("%s: not an ELF binary", arch)
		}
	}
}

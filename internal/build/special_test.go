//go:build unix

package build

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSpecialBuildFiles: the Dockerfile, the .dockerignore and build secrets named by the user
// may be FIFOs, devices or huge; ContentTagContext and the builders' validate refuse them at once with
// an error naming the file.
func TestSpecialBuildFiles(t *testing.T) {
	specials := map[string]func(t *testing.T, p string, cap int64){
		"fifo":     func(t *testing.T, p string, _ int64) { must(t, syscall.Mkfifo(p, 0o600)) },
		"dev-zero": func(t *testing.T, p string, _ int64) { must(t, os.Symlink("/dev/zero", p)) },
		"over-cap": func(t *testing.T, p string, cap int64) {
			must(t, os.WriteFile(p, nil, 0o600))
			must(t, os.Truncate(p, cap+1))
		},
		"link-to-fifo": func(t *testing.T, p string, _ int64) {
			must(t, syscall.Mkfifo(p+".p", 0o600))
			must(t, os.Symlink(p+".p", p))
		},
	}
	for kind, mk := range specials {
		for _, file := range []string{"Dockerfile", ".dockerignore", "secret"} {
			t.Run(file+"/"+kind, func(t *testing.T) {
				dir := t.TempDir()
				must(t, os.WriteFile(filepath.Join(dir, "a"), []byte("a"), 0o600))
				if file != "Dockerfile" {
					must(t, os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte("FROM scratch\n"), 0o600))
				}
				p := filepath.Join(dir, file)
				cap := int64(MaxDockerfileBytes)
				if file == "secret" {
					cap = MaxBuildSecretBytes
				}
				mk(t, p, cap)
				req := Request{Context: dir, Tags: []string{"127.0.0.1:1/x:y"}}
				if file == "secret" {
					req.Secrets = []Secret{{ID: "s", Src: p}}
				}
				done := make(chan error, 1)
				go func() {
					if file == "secret" {
						done <- req.validate()
						return
					}
					_, err := ContentTagContext(context.Background(), req)
					if err == nil {
						err = req.validate()
					}
					done <- err
				}()
				var err error
				select {
				case err = <-done:
				case <-time.After(30 * time.Second):
					t.Fatal("blocked on a special file")
				}
				if err == nil || !strings.Contains(err.Error(), p) {
					t.Fatalf("err %v does not name %s", err, p)
				}
			})
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

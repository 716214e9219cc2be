package main

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/devtool/devtool/internal/cli/root"
	"github.com/devtool/devtool/internal/cmdutil"
	"github.com/devtool/devtool/internal/iostreams"
)

// TestBadInput is issue 12's table for the command layer: each case runs the real command tree
// on a prepared folder under a generous timeout (a hang fails the case instead of stalling CI)
// and asserts the clean error or behaviour.
func TestBadInput(t *testing.T) {
	type tc struct {
		name    string
		files   map[string]string
		args    []string
		cancel  bool   // cancel the context right after starting
		wantErr string // "" means success
		wantOut string // expected in stderr
		stdout  string // expected in stdout
		code    int
	}
	cases := []tc{
		{name: "host volume outside the project refused in a dry run",
			files:   map[string]string{"compose.yml": "services:\n  web:\n    image: busybox\n    volumes: [\"/etc:/host-etc\"]\n"},
			args:    []string{"deploy", "--dry-run", "-n", "dev"},
			wantErr: "--allow-outside-volumes", code: cmdutil.ExitError},
		{name: "host volume outside allowed with the flag and shown by the dry run",
			files:   map[string]string{"compose.yml": "services:\n  web:\n    image: busybox\n    volumes: [\"../:/up\"]\n"},
			args:    []string{"deploy", "--dry-run", "-n", "dev", "--allow-outside-volumes"},
			wantOut: "a deploy copies host folder"},
		{name: "host volume inside the project shown by the dry run",
			files:   map[string]string{"compose.yml": "services:\n  web:\n    image: busybox\n    volumes: [\"./src:/app\"]\n", "src/a": "x"},
			args:    []string{"deploy", "--dry-run", "-n", "dev"},
			wantOut: "host folder"},
		{name: "several --file merge in order (the second file's image wins)",
			files: map[string]string{"a.yml": "services:\n  web:\n    image: busybox:one\n",
				"b.yml": "services:\n  web:\n    image: busybox:two\n"},
			args:   []string{"deploy", "--dry-run", "-n", "dev", "-f", "a.yml", "-f", "b.yml"},
			stdout: "image: busybox:two"},
		{name: "a devtool.yml among several --file refused clearly",
			files:   map[string]string{"a.yml": "services: {}\n", "devtool.yml": "deploy: [echo]\n"},
			args:    []string{"deploy", "--dry-run", "-f", "a.yml", "-f", "devtool.yml"},
			wantErr: "merge Compose files only", code: cmdutil.ExitError},
		{name: "a broken devtool.yml is not hidden by a Compose file",
			files:   map[string]string{"devtool.yml": "deploy:\n  commands: 12\n", "compose.yml": "services:\n  web:\n    image: x\n"},
			args:    []string{"endpoints", "-n", "dev"},
			wantErr: "devtool.yml", code: cmdutil.ExitError},
		{name: "cancelled dry run returns 130",
			files:  map[string]string{"compose.yml": "services:\n  web:\n    build: .\n", "Dockerfile": "FROM scratch\n"},
			args:   []string{"build", "-n", "dev"},
			cancel: true, wantErr: "context canceled", code: cmdutil.ExitCancelled},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "project")
			for name, content := range c.files {
				p := filepath.Join(dir, name)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			ios, _, stdout, errOut := iostreams.Test()
			env := map[string]string{"HOME": t.TempDir(), "DEVTOOL_REGISTRY": "127.0.0.1:1", "KUBECONFIG": filepath.Join(dir, "none")}
			f := &cmdutil.Factory{IOStreams: ios, Logger: slog.New(slog.DiscardHandler), Getenv: func(k string) string { return env[k] },
				Environ: []string{"DEVTOOL_REGISTRY=127.0.0.1:1"}, WorkDir: dir,
				Target: func(k cmdutil.KubeFlags) (*cmdutil.Target, error) {
					return &cmdutil.Target{Namespace: k.Namespace, Registry: "127.0.0.1:1"}, nil
				}}
			cmd := root.NewCmd(f, new(slog.LevelVar))
			cmd.SetArgs(c.args)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			if c.cancel {
				cctx, ccancel := context.WithCancel(ctx)
				ccancel()
				ctx = cctx
			}
			done := make(chan error, 1)
			go func() { done <- root.Execute(ctx, cmd) }()
			var err error
			select {
			case err = <-done:
			case <-time.After(90 * time.Second):
				t.Fatal("the command hangs")
			}
			if c.wantErr == "" && err != nil {
				t.Fatalf("err %v; stderr %s", err, errOut)
			}
			if c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)) {
				t.Fatalf("err %v, want %q; stderr %s", err, c.wantErr, errOut)
			}
			if got := cmdutil.ExitCode(err); got != c.code {
				t.Errorf("exit code %d, want %d", got, c.code)
			}
			if c.wantOut != "" && !strings.Contains(errOut.String(), c.wantOut) {
				t.Errorf("stderr lacks %q:\n%s", c.wantOut, errOut)
			}
			if c.stdout != "" && !strings.Contains(stdout.String(), c.stdout) {
				t.Errorf("stdout lacks %q:\n%s", c.stdout, stdout)
			}
		})
	}
}

package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/fake"

	"github.com/devtool/devtool/internal/cli/root"
	"github.com/devtool/devtool/internal/cmdutil"
	"github.com/devtool/devtool/internal/iostreams"
	"github.com/devtool/devtool/internal/kube"
)

// TestUpInputChecks is issue 18's table for `up` without a cluster: each bad dev entry or flag
// is refused with its file, line and field and exit code 2, before any call reaches the
// cluster (the target's clientset records every call: none may be made). The same refusals
// against the local cluster, with the original checked untouched, are in
// test/e2e/dev_input_test.go.
func TestUpInputChecks(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	port := busy.Addr().(*net.TCPAddr).Port
	yml := func(entry string) map[string]string {
		return map[string]string{"devtool.yml": "deploy: [\"true\"]\ndev:\n  web:\n" + entry, "src/a": "x"}
	}
	cases := []struct {
		name  string
		files map[string]string
		args  []string
		want  []string // in the error
	}{
		{name: "unknown dev name", files: yml("    sync: [src:/app]\n"), args: []string{"up", "nope"},
			want: []string{`no dev container "nope" (it has web)`}},
		{name: "local folder outside the project", files: yml("    sync: [..:/app]\n"), args: []string{"up", "web"},
			want: []string{"devtool.yml:4:12: dev.web.sync[0]: the local folder", "is outside the project folder", "--allow-outside-volumes"}},
		{name: "local folder is a file", files: yml("    sync: [src/a:/app]\n"), args: []string{"up", "web"},
			want: []string{"devtool.yml:4:12: dev.web.sync[0]", "is a file, not a folder"}},
		{name: "remote climbs out", files: yml("    sync: [src:/app/../etc]\n"), args: []string{"up", "web"},
			want: []string{"dev.web.sync[0]", `(write "/etc")`}},
		{name: "remote root", files: yml("    sync: [src:/]\n"), args: []string{"up", "web"},
			want: []string{"dev.web.sync[0]", "root of the container"}},
		{name: "local port in use", files: yml(fmt.Sprintf("    forward: [%d:80]\n", port)), args: []string{"up", "web"},
			want: []string{"devtool.yml:4:15: dev.web.forward[0]", fmt.Sprintf("local port %d is in use by process %d", port, os.Getpid())}},
		{name: "local port twice", files: yml("    forward: [8080:80, 8080:81]\n"), args: []string{"up", "web"},
			want: []string{"dev.web.forward[1]: local port 8080 is also the one of forward[0]"}},
		{name: "env name", files: yml("    environment: {\"A=B\": x}\n"), args: []string{"up", "web"},
			want: []string{"dev.web.environment.A=B", "not a valid environment variable name"}},
		{name: "--env name with a space", files: yml("    image: busybox\n"), args: []string{"up", "web", "--env", "A B=1"},
			want: []string{"not a valid environment variable name"}},
		{name: "--env without =", files: yml("    image: busybox\n"), args: []string{"up", "web", "--env", "A"},
			want: []string{"expected NAME=value"}},
		{name: "a 1 MB image name", files: yml("    image: " + strings.Repeat("x", 1<<20) + "\n"), args: []string{"up", "web"},
			want: []string{"dev.web.image", "a name of 1048576 bytes"}},
		{name: "empty image", files: yml("    image: ''\n"), args: []string{"up", "web"},
			want: []string{"dev.web.image", "empty"}},
		{name: "limit below request", files: yml("    resources: {requests: {memory: 1Gi}, limits: {memory: 1Mi}}\n"), args: []string{"up", "web"},
			want: []string{"dev.web.resources.limits.memory", "below the request"}},
		{name: "workdir not clean", files: yml("    workdir: /app/\n"), args: []string{"up", "web"},
			want: []string{"dev.web.workdir", `(write "/app")`}},
		{name: "Compose-only entry with its published port in use",
			files: map[string]string{"compose.yml": fmt.Sprintf("services:\n  site:\n    image: busybox\n    ports: [\"%d:8080\"]\n", port)}, args: []string{"up"},
			want: []string{"compose.yml:2:3: services.site.ports", "in use"}},
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
			cs := fake.NewClientset()
			ios, _, _, errOut := iostreams.Test()
			env := map[string]string{"HOME": t.TempDir(), "KUBECONFIG": filepath.Join(dir, "none")}
			f := &cmdutil.Factory{IOStreams: ios, Logger: slog.New(slog.DiscardHandler), Getenv: func(k string) string { return env[k] },
				WorkDir: dir,
				Target: func(k cmdutil.KubeFlags) (*cmdutil.Target, error) {
					return &cmdutil.Target{Namespace: "dev", Kube: &kube.Client{Clientset: cs, Namespace: "dev"}}, nil
				}}
			cmd := root.NewCmd(f, new(slog.LevelVar))
			cmd.SetArgs(append(c.args, "--namespace", "dev"))
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			err := root.Execute(ctx, cmd)
			if err == nil {
				t.Fatalf("accepted; stderr %s", errOut)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if code := cmdutil.ExitCode(err); code != cmdutil.ExitUsage {
				t.Errorf("exit code %d, want %d (%v)", code, cmdutil.ExitUsage, err)
			}
			if len(err.Error()) > 2000 {
				t.Errorf("an error of %d bytes", len(err.Error()))
			}
			if a := cs.Actions(); len(a) != 0 {
				t.Errorf("the cluster was called before the input was checked: %v", a)
			}
		})
	}
}

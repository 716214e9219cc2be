//go:build unix

package main

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/devtool/devtool/internal/cli/root"
	"github.com/devtool/devtool/internal/cmdutil"
	"github.com/devtool/devtool/internal/contexts"
	"github.com/devtool/devtool/internal/iostreams"
)

// TestSpecialFiles is issue 12's table for the files the command layer reads because of user
// input, beyond the Compose files and manifests (their own tables cover them): every kubeconfig of
// the KUBECONFIG list, the files a kubeconfig names, the context store, the Dockerfile, the
// .dockerignore. Each is replaced by a FIFO with no writer, a symlink to /dev/zero, a sparse file
// over its cap and a symlink to a FIFO; the real command tree with the real context resolver must
// fail at once with an error naming the file, never block or read without end.
func TestSpecialFiles(t *testing.T) {
	type special struct {
		name string
		make func(t *testing.T, path string, cap int64)
		want string
	}
	specials := []special{
		{"a FIFO", func(t *testing.T, p string, _ int64) { mkfifo(t, p) }, "not a regular file (a named pipe)"},
		{"a symlink to /dev/zero", func(t *testing.T, p string, _ int64) { symlink(t, "/dev/zero", p) }, "not a regular file (a character device)"},
		{"a file over the cap", func(t *testing.T, p string, cap int64) { sparse(t, p, cap+1) }, "file too large: larger than the limit of"},
		{"a symlink to a FIFO", func(t *testing.T, p string, _ int64) { mkfifo(t, p+".fifo"); symlink(t, p+".fifo", p) }, "not a regular file (a named pipe)"},
	}
	const mib = 1 << 20
	type target struct {
		name string
		file string // path of the special file, relative to the project folder ("" : see setup)
		cap  int64
		// setup writes the rest of the project and returns the command's arguments and the
		// environment; special is the absolute path of the special file.
		setup func(t *testing.T, dir, home, special string) (args []string, env map[string]string)
	}
	compose := "services:\n  web:\n    image: busybox\n"
	targets := []target{
		{name: "kubeconfig in the KUBECONFIG list", file: "kube/second", cap: 16 * mib,
			setup: func(t *testing.T, dir, home, special string) ([]string, map[string]string) {
				write(t, filepath.Join(dir, "compose.yml"), compose)
				good := writeKubeconfig(t, filepath.Join(dir, "kube/first"), "")
				return []string{"endpoints", "-n", "dev"}, map[string]string{"KUBECONFIG": good + string(os.PathListSeparator) + special}
			}},
		{name: "certificate-authority named by the kubeconfig", file: "kube/ca.crt", cap: 16 * mib,
			setup: func(t *testing.T, dir, home, special string) ([]string, map[string]string) {
				write(t, filepath.Join(dir, "compose.yml"), compose)
				kc := writeKubeconfig(t, filepath.Join(dir, "kube/config"), "    certificate-authority: "+special+"\n")
				return []string{"endpoints", "-n", "dev"}, map[string]string{"KUBECONFIG": kc}
			}},
		{name: "tokenFile named by the kubeconfig", file: "kube/token", cap: 16 * mib,
			setup: func(t *testing.T, dir, home, special string) ([]string, map[string]string) {
				write(t, filepath.Join(dir, "compose.yml"), compose)
				kc := writeKubeconfigUser(t, filepath.Join(dir, "kube/config"), "    tokenFile: "+special+"\n")
				return []string{"endpoints", "-n", "dev"}, map[string]string{"KUBECONFIG": kc}
			}},
		{name: "context store", file: "", cap: 4 * mib,
			setup: func(t *testing.T, dir, home, special string) ([]string, map[string]string) {
				write(t, filepath.Join(dir, "compose.yml"), compose)
				kc := writeKubeconfig(t, filepath.Join(dir, "kube/config"), "")
				return []string{"context", "list"}, map[string]string{"KUBECONFIG": kc}
			}},
		{name: "Dockerfile", file: "Dockerfile", cap: 4 * mib,
			setup: func(t *testing.T, dir, home, special string) ([]string, map[string]string) {
				kc := writeKubeconfig(t, filepath.Join(dir, "kube/config"), "")
				return []string{"build", "-f", "Dockerfile", "-n", "dev"}, map[string]string{"KUBECONFIG": kc, "DEVTOOL_REGISTRY": "127.0.0.1:1"}
			}},
		{name: ".dockerignore", file: ".dockerignore", cap: 4 * mib,
			setup: func(t *testing.T, dir, home, special string) ([]string, map[string]string) {
				write(t, filepath.Join(dir, "Dockerfile"), "FROM scratch\n")
				kc := writeKubeconfig(t, filepath.Join(dir, "kube/config"), "")
				return []string{"build", "-f", "Dockerfile", "-n", "dev"}, map[string]string{"KUBECONFIG": kc, "DEVTOOL_REGISTRY": "127.0.0.1:1"}
			}},
		{name: "Dockerfile of a Compose build section (deploy --dry-run hashes the context)", file: "app/Dockerfile", cap: 4 * mib,
			setup: func(t *testing.T, dir, home, special string) ([]string, map[string]string) {
				write(t, filepath.Join(dir, "compose.yml"), "services:\n  web:\n    build: ./app\n")
				kc := writeKubeconfig(t, filepath.Join(dir, "kube/config"), "")
				// A link to /dev/zero leads out of the project: refused as such without the opt-in
				// (TestIssue18), and for what it is with it.
				return []string{"deploy", "--dry-run", "-n", "dev", "--allow-outside-volumes"}, map[string]string{"KUBECONFIG": kc, "DEVTOOL_REGISTRY": "127.0.0.1:1"}
			}},
	}
	for _, tg := range targets {
		for _, sp := range specials {
			t.Run(tg.name+"/"+sp.name, func(t *testing.T) {
				dir := filepath.Join(t.TempDir(), "project")
				home := t.TempDir()
				if err := os.MkdirAll(filepath.Join(dir, "kube"), 0o755); err != nil {
					t.Fatal(err)
				}
				path := filepath.Join(dir, tg.file)
				if tg.file == "" {
					path = filepath.Join(home, ".devtool", "context", "config.json")
				}
				if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
					t.Fatal(err)
				}
				sp.make(t, path, tg.cap)
				args, env := tg.setup(t, dir, home, path)
				env["HOME"], env["DEVTOOL_HOME"] = home, home
				err, stderr := runCommand(t, dir, env, args, 30*time.Second)
				if err == nil {
					t.Fatalf("%v succeeded; stderr %s", args, stderr)
				}
				msg := err.Error()
				if !strings.Contains(msg, path) || !strings.Contains(msg, sp.want) {
					t.Fatalf("error %q\nwant the path %s and %q", msg, path, sp.want)
				}
				if sp.name == "a file over the cap" && !strings.Contains(msg, "MiB") {
					t.Errorf("error %q does not name the cap", msg)
				}
				t.Logf("%v: %v", args, err)
				if code := cmdutil.ExitCode(err); code == cmdutil.ExitOK || code == cmdutil.ExitCancelled {
					t.Errorf("exit code %d", code)
				}
			})
		}
	}
}

// runCommand runs the real command tree with the real context resolver (as main builds it) in
// dir, with env as the whole environment; a command still running after guard fails the test.
func runCommand(t *testing.T, dir string, env map[string]string, args []string, guard time.Duration) (error, string) {
	t.Helper()
	getenv := func(k string) string { return env[k] }
	var environ []string
	for k, v := range env {
		environ = append(environ, k+"="+v)
	}
	ios, _, _, errOut := iostreams.Test()
	f := &cmdutil.Factory{IOStreams: ios, Logger: slog.New(slog.DiscardHandler), Getenv: getenv, Environ: environ, WorkDir: dir}
	f.Target = cmdutil.TargetFunc(&contexts.Resolver{Getenv: getenv})
	cmd := root.NewCmd(f, new(slog.LevelVar))
	cmd.SetArgs(args)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- root.Execute(ctx, cmd) }()
	select {
	case err := <-done:
		return err, errOut.String()
	case <-time.After(guard):
		cancel()
		t.Fatalf("%v still running after %v (blocked on a special file?)", args, guard)
		return nil, ""
	}
}

func mkfifo(t *testing.T, p string) {
	t.Helper()
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Fatal(err)
	}
}

func symlink(t *testing.T, target, p string) {
	t.Helper()
	if err := os.Symlink(target, p); err != nil {
		t.Fatal(err)
	}
}

// sparse makes a file of size bytes that takes no room on disk.
func sparse(t *testing.T, p string, size int64) {
	t.Helper()
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
}

func write(t *testing.T, p, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// writeKubeconfig writes a kubeconfig whose one context "local" points at a closed loopback
// port; cluster is appended to the cluster entry (e.g. a certificate-authority line).
func writeKubeconfig(t *testing.T, p, cluster string) string {
	t.Helper()
	write(t, p, "apiVersion: v1\nkind: Config\ncurrent-context: local\n"+
		"clusters:\n- name: local\n  cluster:\n    server: https://127.0.0.1:1\n"+cluster+
		"contexts:\n- name: local\n  context:\n    cluster: local\n    user: me\n    namespace: dev\n"+
		"users:\n- name: me\n  user:\n    token: x\n")
	return p
}

// writeKubeconfigUser is writeKubeconfig with user's lines as the user entry.
func writeKubeconfigUser(t *testing.T, p, user string) string {
	t.Helper()
	write(t, p, "apiVersion: v1\nkind: Config\ncurrent-context: local\n"+
		"clusters:\n- name: local\n  cluster:\n    server: https://127.0.0.1:1\n"+
		"contexts:\n- name: local\n  context:\n    cluster: local\n    user: me\n    namespace: dev\n"+
		"users:\n- name: me\n  user:\n"+user)
	return p
}

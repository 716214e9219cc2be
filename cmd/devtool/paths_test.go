//go:build unix

package main

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/devtool/devtool/internal/cli/root"
	"github.com/devtool/devtool/internal/cmdutil"
	"github.com/devtool/devtool/internal/contexts"
	"github.com/devtool/devtool/internal/iostreams"
)

// TestIssue18 is issue 18's table for paths outside the project, silent fallbacks and messages:
// each case runs the real command tree with the real context resolver on a prepared project
// folder and a temporary HOME (no kubeconfig unless the case writes one), and checks the error,
// exit code (as main reports it) and output.
func TestIssue18(t *testing.T) {
	type tc struct {
		name  string
		files map[string]string // project files; "->target" makes a symlink
		home  map[string]string // files under HOME
		copy  string            // a testdata folder copied as the project instead of files
		setup func(t *testing.T, home string)
		args  []string
		code  int
		// stderr is expected in the final error or stderr; stdout in stdout.
		stderr, stdout []string
		notOut         []string // not in stdout
		notErr         []string // not in stderr
		count          map[string]int
	}
	compose := func(service string) string { return "services:\n  web:\n    image: busybox\n" + service }
	kubeconfig := "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: https://127.0.0.1:1}\nusers:\n- name: u\n  user: {token: t}\n" +
		"contexts:\n- name: real\n  context: {cluster: c, user: u, namespace: team}\ncurrent-context: real\n"
	dry := []string{"deploy", "--dry-run", "-n", "dev"}
	cases := []tc{
		// Paths outside the project.
		{name: "env_file linking to /etc/shadow is refused unread",
			files: map[string]string{"compose.yml": compose("    env_file: secrets.env\n"), "secrets.env": "->/etc/shadow"},
			args:  dry, code: cmdutil.ExitError,
			stderr: []string{"compose.yml:4", "secrets.env links to /etc/shadow, outside the project folder", "--allow-outside-volumes"}},
		{name: "env_file outside refused by endpoints too",
			files: map[string]string{"compose.yml": compose("    env_file: ../shared.env\n"), "../shared.env": "A=1\n"},
			args:  []string{"endpoints", "-n", "dev"}, code: cmdutil.ExitError,
			stderr: []string{"shared.env is outside the project folder"}},
		{name: "env_file outside allowed with the opt-in",
			files: map[string]string{"compose.yml": compose("    env_file: ../shared.env\n"), "../shared.env": "A=from-outside\n"},
			args:  append(dry, "--allow-outside-volumes"), stdout: []string{"from-outside"}},
		{name: "build context / refused before hashing",
			files: map[string]string{"compose.yml": "services:\n  web:\n    build: /\n"},
			args:  dry, code: cmdutil.ExitError, stderr: []string{"service web: the build context is the filesystem root /"}},
		{name: "build context / refused even with the opt-in",
			files: map[string]string{"compose.yml": "services:\n  web:\n    build: /\n"},
			args:  append(dry, "--allow-outside-volumes"), code: cmdutil.ExitError, stderr: []string{"the build context is the filesystem root"}},
		{name: "build context climbing out refused by build",
			files: map[string]string{"compose.yml": "services:\n  web:\n    build: ../../../../usr\n"},
			args:  []string{"build", "-n", "dev"}, code: cmdutil.ExitError,
			stderr: []string{"build context /usr is outside the project folder", "--allow-outside-volumes"}},
		{name: "Dockerfile outside refused",
			files: map[string]string{"compose.yml": "services:\n  web:\n    build: {context: ., dockerfile: ../Dockerfile}\n", "../Dockerfile": "FROM scratch\n"},
			args:  dry, code: cmdutil.ExitError, stderr: []string{"Dockerfile", "is outside the project folder"}},
		{name: "Dockerfile linking out refused",
			files: map[string]string{"compose.yml": "services:\n  web:\n    build: .\n", "Dockerfile": "->../elsewhere/Dockerfile", "../elsewhere/Dockerfile": "FROM scratch\n"},
			args:  dry, code: cmdutil.ExitError, stderr: []string{"Dockerfile links to", "outside the project folder"}},
		{name: "build secret outside refused",
			files: map[string]string{"devtool.yml": "build:\n  web:\n    context: .\n    secrets: {npmrc: ~/.npmrc}\ndeploy: [echo hi]\n", "Dockerfile": "FROM scratch\n"},
			home:  map[string]string{".npmrc": "//registry/:_authToken=x\n"},
			args:  dry, code: cmdutil.ExitError, stderr: []string{"build secret npmrc", ".npmrc is outside the project folder"}},
		{name: "build secret outside allowed with the opt-in",
			files: map[string]string{"devtool.yml": "build:\n  web:\n    context: .\n    secrets: {npmrc: ~/.npmrc}\ndeploy: [echo hi]\n", "Dockerfile": "FROM scratch\n"},
			home:  map[string]string{".npmrc": "//registry/:_authToken=x\n"},
			args:  append(dry, "--allow-outside-volumes")},
		{name: "home-folder volume stays refused",
			files: map[string]string{"compose.yml": compose("    volumes: [\"~/.aws:/root/.aws:ro\"]\n")},
			home:  map[string]string{".aws/credentials": "x"},
			args:  dry, code: cmdutil.ExitError, stderr: []string{"host volume", ".aws is outside the project folder"}},
		{name: "host volume linking out refused",
			files: map[string]string{"compose.yml": compose("    volumes: [\"./conf:/conf\"]\n"), "conf": "->/etc"},
			args:  dry, code: cmdutil.ExitError, stderr: []string{"conf links to /etc"}},
		{name: "immich: /etc/localtime dropped with one warning",
			copy: "immich", args: dry,
			stderr: []string{"not mounted: system paths of the Docker host", "services.immich-server.volumes[1]: /etc/localtime"},
			notOut: []string{"mountPath: /etc/localtime"}, count: map[string]int{"/etc/localtime": 1}},
		{name: "supabase: the docker socket dropped with one warning",
			copy: "supabase", args: dry,
			stderr: []string{"not mounted: system paths of the Docker host", "services.vector.volumes[1]: /var/run/docker.sock"},
			notOut: []string{"docker.sock"}, count: map[string]int{"/var/run/docker.sock": 1}},

		// Silent fallbacks.
		{name: "dry run without any kubeconfig renders for default",
			files: map[string]string{"compose.yml": compose("")}, args: []string{"deploy", "--dry-run"}, stdout: []string{"namespace: default"}},
		{name: "dry run with a broken context store names the file",
			files: map[string]string{"compose.yml": compose("")}, home: map[string]string{".devtool/context/config.json": "{"},
			args: []string{"deploy", "--dry-run"}, code: cmdutil.ExitError, stderr: []string{".devtool/context/config.json is corrupt", "fix the file"}},
		{name: "dry run with a context store that is a folder",
			files: map[string]string{"compose.yml": compose("")}, home: map[string]string{".devtool/context/config.json/x": ""},
			args: []string{"deploy", "--dry-run"}, code: cmdutil.ExitError, stderr: []string{"config.json"}},
		{name: "dry run whose current context left the kubeconfig",
			files: map[string]string{"compose.yml": compose("")},
			home: map[string]string{".devtool/context/config.json": `{"currentContext":"gone","contexts":{"gone":{"name":"gone","namespace":"x"}}}`,
				".kube/config": kubeconfig},
			args: []string{"deploy", "--dry-run"}, code: cmdutil.ExitError, stderr: []string{`devtool context "gone" uses Kubernetes context "gone" not found`, "devtool context delete gone"}},
		{name: "the store's folder tightened with a note",
			home: map[string]string{".devtool/analytics.json": "{\"enabled\": true}\n"},
			setup: func(t *testing.T, home string) {
				chmod(t, filepath.Join(home, ".devtool"), 0o755)
				chmod(t, filepath.Join(home, ".devtool", "analytics.json"), 0o644)
			},
			args: []string{"analytics", "--disable"}, stderr: []string{".devtool to its owner (mode 0700, was 0755)",
				"analytics.json is now readable by its owner only (mode 0600, was 0644)"}},
		{name: "a store already private is not noted",
			home: map[string]string{".devtool/analytics.json": "{\"enabled\": true}\n"},
			setup: func(t *testing.T, home string) {
				chmod(t, filepath.Join(home, ".devtool"), 0o700)
				chmod(t, filepath.Join(home, ".devtool", "analytics.json"), 0o600)
			},
			args: []string{"analytics", "--disable"}, stderr: []string{"Analytics disabled"}, notErr: []string{"Note:"}},
		{name: "dry run follows the kubeconfig's namespace",
			files: map[string]string{"compose.yml": compose("")}, home: map[string]string{".kube/config": kubeconfig},
			args: []string{"deploy", "--dry-run"}, stdout: []string{"namespace: team"}},

		// Usage errors exit 2.
		{name: "bad --namespace in a dry run", files: map[string]string{"compose.yml": compose("")},
			args: []string{"deploy", "--dry-run", "-n", "Bad_NS"}, code: cmdutil.ExitUsage, stderr: []string{"--namespace", "Bad_NS"}},
		{name: "bad --namespace with a kubeconfig", files: map[string]string{"compose.yml": compose("")}, home: map[string]string{".kube/config": kubeconfig},
			args: []string{"endpoints", "-n", "Bad_NS"}, code: cmdutil.ExitUsage, stderr: []string{"--namespace"}},
		{name: "completion for an unknown shell", args: []string{"completion", "tcsh"}, code: cmdutil.ExitUsage,
			stderr: []string{`no completion script for "tcsh"`, "bash"}},
		{name: "completion for a known shell", args: []string{"completion", "bash"}, stdout: []string{"bash completion"}},

		// Clear messages.
		{name: "negative port keeps its sign", files: map[string]string{"compose.yml": compose("    ports: [\"-8080:80\"]\n")},
			args: dry, code: cmdutil.ExitError, stderr: []string{`"-8080" is not a number between 1 and 65535`}},
		{name: "grace period too large", files: map[string]string{"compose.yml": compose("    stop_grace_period: 10000000000\n")},
			args: dry, code: cmdutil.ExitError, stderr: []string{"10000000000 seconds is too large"}},
		{name: "key over the parser's limit", files: map[string]string{"compose.yml": compose("    environment:\n      " + strings.Repeat("k", 2000) + ": v\n")},
			args: dry, code: cmdutil.ExitError, stderr: []string{"compose.yml:5", "a key of 2000 characters is longer than the YAML parser's limit of 1024"}},
		{name: "one route where a list is expected", files: map[string]string{"compose.yml": compose("    ports: [80]\nendpoints:\n  web:\n    path: /\n    service: web\n    port: 80\n")},
			args: dry, code: cmdutil.ExitError, stderr: []string{"compose.yml:7", "expected a list of routes, found a mapping"}},
		{name: "help says what the tool is for", args: []string{"--help"},
			stdout: []string{"development environments on Kubernetes", "dev container", "two-way sync"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			base := t.TempDir()
			dir, home := filepath.Join(base, "project"), filepath.Join(base, "home")
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if c.copy != "" {
				if err := os.CopyFS(dir, os.DirFS(filepath.Join("..", "..", "internal", "compose", "testdata", "realworld", c.copy))); err != nil {
					t.Fatal(err)
				}
			}
			for root, files := range map[string]map[string]string{dir: c.files, home: c.home} {
				for name, content := range files {
					p := filepath.Join(root, name)
					if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
						t.Fatal(err)
					}
					if target, ok := strings.CutPrefix(content, "->"); ok {
						symlink(t, target, p)
					} else if !strings.HasSuffix(name, "/x") {
						write(t, p, content)
					}
				}
			}
			if c.setup != nil {
				c.setup(t, home)
			}
			env := map[string]string{"HOME": home, "DEVTOOL_HOME": home, "KUBECONFIG": ""}
			getenv := func(k string) string { return env[k] }
			ios, _, stdout, errOut := iostreams.Test()
			f := &cmdutil.Factory{IOStreams: ios, Logger: slog.New(slog.DiscardHandler), Getenv: getenv, WorkDir: dir,
				Target: cmdutil.TargetFunc(&contexts.Resolver{Getenv: getenv, Home: home})}
			// The kubeconfig default is ~/.kube/config of the process: point it at this HOME.
			env["KUBECONFIG"] = filepath.Join(home, ".kube", "config")
			cmd := root.NewCmd(f, new(slog.LevelVar))
			cmd.SetArgs(c.args)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			code := report(errOut, cmd, root.Execute(ctx, cmd), false)
			if code != c.code {
				t.Fatalf("exit %d, want %d; stderr:\n%s", code, c.code, errOut)
			}
			for _, w := range c.stderr {
				if !strings.Contains(errOut.String(), w) {
					t.Errorf("stderr lacks %q:\n%s", w, errOut)
				}
			}
			for _, w := range c.stdout {
				if !strings.Contains(stdout.String(), w) {
					t.Errorf("stdout lacks %q:\n%s", w, stdout)
				}
			}
			for _, w := range c.notOut {
				if strings.Contains(stdout.String(), w) {
					t.Errorf("stdout has %q:\n%s", w, stdout)
				}
			}
			for _, w := range c.notErr {
				if strings.Contains(errOut.String(), w) {
					t.Errorf("stderr has %q:\n%s", w, errOut)
				}
			}
			for w, n := range c.count {
				if got := strings.Count(errOut.String(), w); got != n {
					t.Errorf("stderr names %q %d times, want %d:\n%s", w, got, n, errOut)
				}
			}
		})
	}
}

func chmod(t *testing.T, p string, mode os.FileMode) {
	t.Helper()
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
}

// TestLogrusThroughLogger: compose-go's dotenv parser warns through logrus about an unset
// variable in an env file; main routes logrus through its slog logger, so the line comes out in
// the logger's format and nothing in logrus's own.
func TestLogrusThroughLogger(t *testing.T) {
	defer func() {
		logrus.SetOutput(os.Stderr)
		logrus.StandardLogger().ReplaceHooks(logrus.LevelHooks{})
		logrus.SetLevel(logrus.InfoLevel)
	}()
	dir := t.TempDir()
	write(t, filepath.Join(dir, "compose.yml"), "services:\n  web:\n    image: busybox\n    env_file: app.env\n")
	write(t, filepath.Join(dir, "app.env"), "A=${NOT_SET_ANYWHERE}\n")
	ios, _, _, errOut := iostreams.Test()
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	routeLogrus(logger)
	home := t.TempDir()
	env := map[string]string{"HOME": home, "DEVTOOL_HOME": home, "KUBECONFIG": filepath.Join(home, "none")}
	getenv := func(k string) string { return env[k] }
	f := &cmdutil.Factory{IOStreams: ios, Logger: logger, Getenv: getenv, WorkDir: dir,
		Target: cmdutil.TargetFunc(&contexts.Resolver{Getenv: getenv, Home: home})}
	cmd := root.NewCmd(f, new(slog.LevelVar))
	cmd.SetArgs([]string{"deploy", "--dry-run", "-n", "dev"})
	if code := report(errOut, cmd, root.Execute(context.Background(), cmd), false); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "NOT_SET_ANYWHERE") {
		t.Errorf("the logger did not get the warning: %q", logs.String())
	}
	if strings.Contains(errOut.String(), "level=warning") {
		t.Errorf("a raw logrus line: %s", errOut)
	}
}

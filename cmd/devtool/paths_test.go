//go:build unix

package main

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"os/exec"
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

// TestIssue18 is issue 18's table, run on the built binary (TestMain builds it once) as a user
// would: a prepared project folder, a temporary HOME (no kubeconfig unless the case writes one), and
// the exit code, stdout and stderr of the process.
//
// Where each item of issue 18 is proven:
//
//   - up validates the whole dev entry before its first cluster write (sync folders, forwards and
//     reverses, the port holder's process, environment names and values, --env, image references,
//     limits, workdir): TestUpInputChecks (this package: exit 2, file:line:col and field, a recording
//     clientset that stays empty) and test/e2e TestDevUpRefusesBadInput (the local cluster: after
//     each refused up the original's spec, replicas and every object of the namespace are unchanged);
//     the unit table internal/dev TestValidate, TestPortOwner, TestSyncableFolders and the fuzz
//     target internal/dev FuzzDevSection (hack/fuzz.sh, 60 s).
//   - several dev containers and none named, an unknown dev name, a bad --namespace: the "dev
//     commands" cases below (exit 2).
//   - Ctrl-C during activation says the original may be at zero replicas and how to restore it:
//     test/e2e TestDevUpInterruptedDuringActivation.
//   - the dev commands' own files read like user input (links not followed, FIFOs and devices fail
//     at once naming the path, doctor reads the tail of logs, logs rotated, status names a broken
//     status.json and caps the sync service's answer): TestDevFiles (this package, built binary),
//     internal/dev TestLockRefusesALinkedPIDFile, TestOpenStateDirRefusesLinkedFolders,
//     TestStateDirCheck, TestBrokenStateFilesNamed, internal/safefile TestNoFollow, TestTail,
//     internal/logfile TestRotatesAtTheCap; one atomic writer that fsyncs file and folder:
//     internal/atomicfile TestWriteSyncsFileThenFolder and the others of that package.
//   - paths outside the project, one rule and one opt-in (env files, also through a link; build
//     contexts, Dockerfiles, build secrets, host volumes, ~/...; build context / refused before
//     hashing), system paths dropped with one warning: the "paths" cases below, internal/projectpath
//     TestCheck and TestIsSystemPath; immich and supabase really deployed with one warning each:
//     test/e2e TestRealWorldSystemPathsOnCluster.
//   - silent fallbacks (a broken, unreadable or special context store, a context whose kube context
//     left the kubeconfig, store permissions changed only with a note): the "fallbacks" cases below
//     and internal/contexts TestStoreCorruption, TestStoreUnreadable, TestStorePermissions.
//   - usage errors exit 2 everywhere (unknown dev name, bad --namespace, completion tcsh): the
//     "usage" cases below and TestCommandLineExitCodes.
//   - clear messages (negative port, "too large" grace period, compose-go's dotenv warning through
//     our logger, a key over the parser's limit, "expected a list of routes, found a mapping",
//     --help): the "messages" cases below; "the destroy timed out": internal/deploy
//     TestDestroyTimedOut and, with the process of the destroy command checked gone, test/e2e
//     TestDestroyTimedOutOnCluster.
//
// A YAML syntax error in devtool.yml exits 1 for every command (as deploy always has): exit 2 is for
// usage and for values the dev checks refuse (the "syntax" cases below).
func TestIssue18(t *testing.T) {
	bin := devtoolBinary(t)
	type tc struct {
		name  string
		files map[string]string // project files; "->target" makes a symlink, "|fifo" a named pipe
		home  map[string]string // files under HOME, the same way
		copy  string            // a testdata folder copied as the project instead of files
		setup func(t *testing.T, home string)
		args  []string
		code  int
		// stderr is expected in stderr; stdout in stdout.
		stderr, stdout []string
		notOut         []string // not in stdout
		notErr         []string // not in stderr
		count          map[string]int
	}
	compose := func(service string) string { return "services:\n  web:\n    image: busybox\n" + service }
	kubeconfig := "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: https://127.0.0.1:1}\nusers:\n- name: u\n  user: {token: t}\n" +
		"contexts:\n- name: real\n  context: {cluster: c, user: u, namespace: team}\ncurrent-context: real\n"
	twoDevs := map[string]string{"devtool.yml": "deploy: [\"true\"]\ndev:\n  web:\n    sync: [src:/app]\n  api:\n    sync: [src:/srv]\n", "src/a": "x"}
	noneNamed := "devtool.yml has 2 dev containers (web, api) and none was named: name one"
	dry := []string{"deploy", "--dry-run", "-n", "dev"}
	cases := []tc{
		// Dev commands: usage errors exit 2 before anything is attempted.
		{name: "dev commands: up with two dev containers and none named", files: twoDevs, args: []string{"up", "-n", "dev"},
			code: cmdutil.ExitUsage, stderr: []string{noneNamed, "Hint: run 'devtool up NAME' with NAME one of: web, api"}},
		{name: "dev commands: status with two dev containers and none named", files: twoDevs, args: []string{"status"},
			code: cmdutil.ExitUsage, stderr: []string{noneNamed, "Hint: run 'devtool status NAME' with NAME one of: web, api"}},
		{name: "dev commands: down of an unknown dev name", files: twoDevs, home: map[string]string{".kube/config": kubeconfig},
			args: []string{"down", "nope"}, code: cmdutil.ExitUsage, stderr: []string{`devtool.yml has no dev container "nope" (it has api, web)`}},
		{name: "dev commands: up with a bad --namespace", files: twoDevs, home: map[string]string{".kube/config": kubeconfig},
			args: []string{"up", "web", "--namespace", "Bad_NS"}, code: cmdutil.ExitUsage, stderr: []string{"--namespace", `"Bad_NS" is not a valid namespace name`}},

		// A YAML syntax error exits 1 for every command (exit 2 is usage and refused values).
		{name: "syntax: deploy of a devtool.yml that does not parse", files: map[string]string{"devtool.yml": "deploy: [true\n"},
			args: dry, code: cmdutil.ExitError, stderr: []string{"devtool.yml:"}},
		{name: "syntax: up of a devtool.yml that does not parse", files: map[string]string{"devtool.yml": "dev:\n  web: {sync: [\n"},
			args: []string{"up", "web", "-n", "dev"}, code: cmdutil.ExitError, stderr: []string{"devtool.yml:"}},
		{name: "syntax: status of a devtool.yml that does not parse", files: map[string]string{"devtool.yml": "dev:\n  web: {sync: [\n"},
			args: []string{"status", "web"}, code: cmdutil.ExitError, stderr: []string{"devtool.yml:"}},

		// Paths outside the project.
		{name: "paths: env_file linking to /etc/shadow is refused unread",
			files: map[string]string{"compose.yml": compose("    env_file: secrets.env\n"), "secrets.env": "->/etc/shadow"},
			args:  dry, code: cmdutil.ExitError,
			stderr: []string{"compose.yml:4", "secrets.env links to /etc/shadow, outside the project folder", "--allow-outside-volumes"}},
		{name: "paths: env_file outside refused by endpoints too",
			files: map[string]string{"compose.yml": compose("    env_file: ../shared.env\n"), "../shared.env": "A=1\n"},
			args:  []string{"endpoints", "-n", "dev"}, code: cmdutil.ExitError,
			stderr: []string{"shared.env is outside the project folder"}},
		{name: "paths: env_file outside allowed with the opt-in",
			files: map[string]string{"compose.yml": compose("    env_file: ../shared.env\n"), "../shared.env": "A=from-outside\n"},
			args:  append(dry, "--allow-outside-volumes"), stdout: []string{"from-outside"}},
		{name: "paths: build context / refused before hashing",
			files: map[string]string{"compose.yml": "services:\n  web:\n    build: /\n"},
			args:  dry, code: cmdutil.ExitError, stderr: []string{"service web: the build context is the filesystem root /"}},
		{name: "paths: build context / refused even with the opt-in",
			files: map[string]string{"compose.yml": "services:\n  web:\n    build: /\n"},
			args:  append(dry, "--allow-outside-volumes"), code: cmdutil.ExitError, stderr: []string{"the build context is the filesystem root"}},
		{name: "paths: build context climbing out refused by build",
			files: map[string]string{"compose.yml": "services:\n  web:\n    build: ../../../../usr\n"},
			args:  []string{"build", "-n", "dev"}, code: cmdutil.ExitError,
			stderr: []string{"build context /usr is outside the project folder", "--allow-outside-volumes"}},
		{name: "paths: Dockerfile outside refused",
			files: map[string]string{"compose.yml": "services:\n  web:\n    build: {context: ., dockerfile: ../Dockerfile}\n", "../Dockerfile": "FROM scratch\n"},
			args:  dry, code: cmdutil.ExitError, stderr: []string{"Dockerfile", "is outside the project folder"}},
		{name: "paths: Dockerfile linking out refused",
			files: map[string]string{"compose.yml": "services:\n  web:\n    build: .\n", "Dockerfile": "->../elsewhere/Dockerfile", "../elsewhere/Dockerfile": "FROM scratch\n"},
			args:  dry, code: cmdutil.ExitError, stderr: []string{"Dockerfile links to", "outside the project folder"}},
		{name: "paths: build secret outside refused",
			files: map[string]string{"devtool.yml": "build:\n  web:\n    context: .\n    secrets: {npmrc: ~/.npmrc}\ndeploy: [echo hi]\n", "Dockerfile": "FROM scratch\n"},
			home:  map[string]string{".npmrc": "//registry/:_authToken=x\n"},
			args:  dry, code: cmdutil.ExitError, stderr: []string{"build secret npmrc", ".npmrc is outside the project folder"}},
		{name: "paths: build secret outside allowed with the opt-in",
			files: map[string]string{"devtool.yml": "build:\n  web:\n    context: .\n    secrets: {npmrc: ~/.npmrc}\ndeploy: [echo hi]\n", "Dockerfile": "FROM scratch\n"},
			home:  map[string]string{".npmrc": "//registry/:_authToken=x\n"},
			args:  append(dry, "--allow-outside-volumes")},
		{name: "paths: home-folder volume stays refused",
			files: map[string]string{"compose.yml": compose("    volumes: [\"~/.aws:/root/.aws:ro\"]\n")},
			home:  map[string]string{".aws/credentials": "x"},
			args:  dry, code: cmdutil.ExitError, stderr: []string{"host volume", ".aws is outside the project folder", "--allow-outside-volumes"}},
		{name: "paths: home-folder volume allowed with the opt-in",
			files: map[string]string{"compose.yml": compose("    volumes: [\"~/.aws:/root/.aws:ro\"]\n")},
			home:  map[string]string{".aws/credentials": "x"},
			args:  append(dry, "--allow-outside-volumes"), stdout: []string{"kind: Deployment", "name: web"},
			notErr: []string{"outside the project folder", "not mounted"}},
		{name: "paths: host volume linking out refused",
			files: map[string]string{"compose.yml": compose("    volumes: [\"./conf:/conf\"]\n"), "conf": "->/etc"},
			args:  dry, code: cmdutil.ExitError, stderr: []string{"conf links to /etc"}},
		{name: "paths: immich: /etc/localtime dropped with one warning",
			copy: "immich", args: dry,
			stderr: []string{"not mounted: system paths of the Docker host", "services.immich-server.volumes[1]: /etc/localtime"},
			notOut: []string{"mountPath: /etc/localtime"}, count: map[string]int{"/etc/localtime": 1}},
		{name: "paths: supabase: the docker socket dropped with one warning",
			copy: "supabase", args: dry,
			stderr: []string{"not mounted: system paths of the Docker host", "services.vector.volumes[1]: /var/run/docker.sock"},
			notOut: []string{"docker.sock"}, count: map[string]int{"/var/run/docker.sock": 1}},

		// Silent fallbacks.
		{name: "fallbacks: dry run without any kubeconfig renders for default",
			files: map[string]string{"compose.yml": compose("")}, args: []string{"deploy", "--dry-run"}, stdout: []string{"namespace: default"}},
		{name: "fallbacks: dry run with a broken context store names the file",
			files: map[string]string{"compose.yml": compose("")}, home: map[string]string{".devtool/context/config.json": "{"},
			args: []string{"deploy", "--dry-run"}, code: cmdutil.ExitError, stderr: []string{".devtool/context/config.json is corrupt", "fix the file"}},
		{name: "fallbacks: dry run with a context store that is a folder",
			files: map[string]string{"compose.yml": compose("")}, home: map[string]string{".devtool/context/config.json/x": ""},
			args: []string{"deploy", "--dry-run"}, code: cmdutil.ExitError, stderr: []string{"config.json"}},
		{name: "fallbacks: a FIFO in place of the context store fails at once naming it",
			files: map[string]string{"compose.yml": compose("")}, home: map[string]string{".devtool/context/config.json": "|fifo"},
			args: []string{"deploy", "--dry-run"}, code: cmdutil.ExitError, stderr: []string{".devtool/context/config.json", "named pipe"}},
		{name: "fallbacks: context list with a FIFO in place of the store",
			home: map[string]string{".devtool/context/config.json": "|fifo"},
			args: []string{"context", "list"}, code: cmdutil.ExitError, stderr: []string{".devtool/context/config.json", "named pipe"}},
		{name: "fallbacks: dry run whose current context left the kubeconfig",
			files: map[string]string{"compose.yml": compose("")},
			home: map[string]string{".devtool/context/config.json": `{"currentContext":"gone","contexts":{"gone":{"name":"gone","namespace":"x"}}}`,
				".kube/config": kubeconfig},
			args: []string{"deploy", "--dry-run"}, code: cmdutil.ExitError, stderr: []string{`devtool context "gone" uses Kubernetes context "gone" not found`, "devtool context delete gone"}},
		{name: "fallbacks: the store's folder tightened with a note",
			home: map[string]string{".devtool/analytics.json": "{\"enabled\": true}\n"},
			setup: func(t *testing.T, home string) {
				chmod(t, filepath.Join(home, ".devtool"), 0o755)
				chmod(t, filepath.Join(home, ".devtool", "analytics.json"), 0o644)
			},
			args: []string{"analytics", "--disable"}, stderr: []string{".devtool to its owner (mode 0700, was 0755)",
				"analytics.json is now readable by its owner only (mode 0600, was 0644)"}},
		{name: "fallbacks: a store already private is not noted",
			home: map[string]string{".devtool/analytics.json": "{\"enabled\": true}\n"},
			setup: func(t *testing.T, home string) {
				chmod(t, filepath.Join(home, ".devtool"), 0o700)
				chmod(t, filepath.Join(home, ".devtool", "analytics.json"), 0o600)
			},
			args: []string{"analytics", "--disable"}, stderr: []string{"Analytics disabled"}, notErr: []string{"Note:"}},
		{name: "fallbacks: dry run follows the kubeconfig's namespace",
			files: map[string]string{"compose.yml": compose("")}, home: map[string]string{".kube/config": kubeconfig},
			args: []string{"deploy", "--dry-run"}, stdout: []string{"namespace: team"}},

		// Usage errors exit 2.
		{name: "usage: bad --namespace in a dry run", files: map[string]string{"compose.yml": compose("")},
			args: []string{"deploy", "--dry-run", "-n", "Bad_NS"}, code: cmdutil.ExitUsage, stderr: []string{"--namespace", "Bad_NS"}},
		{name: "usage: bad --namespace with a kubeconfig", files: map[string]string{"compose.yml": compose("")}, home: map[string]string{".kube/config": kubeconfig},
			args: []string{"endpoints", "-n", "Bad_NS"}, code: cmdutil.ExitUsage, stderr: []string{"--namespace"}},
		{name: "usage: completion for an unknown shell", args: []string{"completion", "tcsh"}, code: cmdutil.ExitUsage,
			stderr: []string{`no completion script for "tcsh"`, "bash"}},
		{name: "usage: completion for a known shell", args: []string{"completion", "bash"}, stdout: []string{"bash completion"}},

		// Clear messages.
		{name: "messages: negative port keeps its sign", files: map[string]string{"compose.yml": compose("    ports: [\"-8080:80\"]\n")},
			args: dry, code: cmdutil.ExitError, stderr: []string{`"-8080" is not a number between 1 and 65535`}},
		{name: "messages: grace period too large", files: map[string]string{"compose.yml": compose("    stop_grace_period: 10000000000\n")},
			args: dry, code: cmdutil.ExitError, stderr: []string{"10000000000 seconds is too large"}},
		{name: "messages: key over the parser's limit", files: map[string]string{"compose.yml": compose("    environment:\n      " + strings.Repeat("k", 2000) + ": v\n")},
			args: dry, code: cmdutil.ExitError, stderr: []string{"compose.yml:5", "a key of 2000 characters is longer than the YAML parser's limit of 1024"}},
		{name: "messages: one route where a list is expected", files: map[string]string{"compose.yml": compose("    ports: [80]\nendpoints:\n  web:\n    path: /\n    service: web\n    port: 80\n")},
			args: dry, code: cmdutil.ExitError, stderr: []string{"compose.yml:7", "expected a list of routes, found a mapping"}},
		{name: "messages: compose-go's dotenv warning through our logger",
			files: map[string]string{"compose.yml": compose("    env_file: app.env\n"), "app.env": "A=${NOT_SET_ANYWHERE}\n"},
			args:  dry, stderr: []string{"level=WARN", "NOT_SET_ANYWHERE"}, notErr: []string{"level=warning"}},
		{name: "messages: help says what the tool is for", args: []string{"--help"},
			stdout: []string{"development environments on Kubernetes", "dev container", "two-way sync"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			base, err := filepath.EvalSymlinks(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			dir, home := filepath.Join(base, "project"), filepath.Join(base, "home")
			for _, d := range []string{dir, home} {
				if err := os.MkdirAll(d, 0o755); err != nil {
					t.Fatal(err)
				}
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
					} else if content == "|fifo" {
						mkfifo(t, p)
					} else if !strings.HasSuffix(name, "/x") {
						write(t, p, content)
					}
				}
			}
			if c.setup != nil {
				c.setup(t, home)
			}
			code, stdout, stderr := runBinary(t, bin, dir, []string{"HOME=" + home, "DEVTOOL_HOME=" + home,
				"KUBECONFIG=" + filepath.Join(home, ".kube", "config"), "PATH=" + os.Getenv("PATH"), "NO_COLOR=1"}, c.args...)
			if code != c.code {
				t.Fatalf("exit %d, want %d; stderr:\n%s", code, c.code, stderr)
			}
			for _, w := range c.stderr {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr)
				}
			}
			for _, w := range c.stdout {
				if !strings.Contains(stdout, w) {
					t.Errorf("stdout lacks %q:\n%s", w, stdout)
				}
			}
			for _, w := range c.notOut {
				if strings.Contains(stdout, w) {
					t.Errorf("stdout has %q:\n%s", w, stdout)
				}
			}
			for _, w := range c.notErr {
				if strings.Contains(stderr, w) {
					t.Errorf("stderr has %q:\n%s", w, stderr)
				}
			}
			for w, n := range c.count {
				if got := strings.Count(stderr, w); got != n {
					t.Errorf("stderr names %q %d times, want %d:\n%s", w, got, n, stderr)
				}
			}
		})
	}
}

// runBinary runs the built binary in dir with exactly env and returns its exit code, stdout and
// stderr; a process still running after a minute (a blocked open) is killed and fails the test.
func runBinary(t *testing.T, bin, dir string, env []string, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir, cmd.Env = dir, env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("devtool %s still running after a minute; stderr:\n%s", strings.Join(args, " "), stderr.String())
	}
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, stdout.String(), stderr.String()
	case errors.As(err, &ee):
		return ee.ExitCode(), stdout.String(), stderr.String()
	}
	t.Fatal(err)
	return 0, "", ""
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

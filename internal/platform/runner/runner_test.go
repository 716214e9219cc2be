package runner

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/devtool/devtool/internal/gittest"
	"github.com/devtool/devtool/internal/platform/install"
	"github.com/devtool/devtool/internal/platform/runspec"
)

func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for p, c := range files {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func tlsServer(t *testing.T, token string) (*gittest.Server, []byte) {
	t.Helper()
	c, err := install.NewCerts([]string{"127.0.0.1", "localhost"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(c.Cert, c.Key)
	if err != nil {
		t.Fatal(err)
	}
	return gittest.Start(t, gittest.Options{Addr: "127.0.0.1:0", TLS: &pair, Token: token}), c.CA
}

func TestClone(t *testing.T) {
	src := writeFiles(t, map[string]string{"devtool.yml": "name: app\n", "README": "hi\n"})
	plain := gittest.Start(t, gittest.Options{Addr: "127.0.0.1:0", Token: "s3cr3t-token"})
	secure, ca := tlsServer(t, "s3cr3t-token")
	pubHTTP := plain.Repo(t, "pub", src, "trunk", false)
	privHTTP := plain.Repo(t, "priv", src, "main", true)
	privHTTPS := secure.Repo(t, "priv", src, "main", true)
	feature := secure.Commit(t, "priv", "feature", map[string]string{"x.txt": "x"})
	ctx := context.Background()

	t.Run("default branch over http", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "c")
		got, err := Clone(ctx, CloneOptions{URL: pubHTTP, Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		if got.Branch != "trunk" || len(got.Commit) != 40 {
			t.Fatalf("cloned %+v, want the default branch trunk", got)
		}
		if b, err := os.ReadFile(filepath.Join(dir, "devtool.yml")); err != nil || string(b) != "name: app\n" {
			t.Fatalf("checkout: %q %v", b, err)
		}
	})
	t.Run("a branch of a private repository with its token", func(t *testing.T) {
		got, err := Clone(ctx, CloneOptions{URL: privHTTPS, Branch: "feature", Dir: filepath.Join(t.TempDir(), "c"), CA: ca, Token: "s3cr3t-token"})
		if err != nil {
			t.Fatal(err)
		}
		if got.Commit != feature || got.Branch != "feature" {
			t.Fatalf("cloned %+v, want feature at %s", got, feature)
		}
	})
	for _, c := range []struct {
		name string
		o    CloneOptions
		want string
	}{
		{"private without a token", CloneOptions{URL: privHTTPS, CA: ca}, "store an HTTPS access token as the secret GIT_TOKEN_127_0_0_1"},
		{"a wrong token", CloneOptions{URL: privHTTPS, CA: ca, Token: "wrong"}, "refused the token of the secret GIT_TOKEN_127_0_0_1"},
		{"a branch that does not exist", CloneOptions{URL: pubHTTP, Branch: "nope"}, `the branch "nope" does not exist`},
		{"an untrusted certificate", CloneOptions{URL: privHTTPS, Token: "s3cr3t-token"}, "certificate is not trusted"},
		{"credentials over http", CloneOptions{URL: privHTTP, Token: "s3cr3t-token"}, "never sent over plain HTTP"},
		{"ssh", CloneOptions{URL: "ssh://git@127.0.0.1/x.git"}, "only https://"},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.o.Dir = filepath.Join(t.TempDir(), "c")
			_, err := Clone(ctx, c.o)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want it to say %q", err, c.want)
			}
		})
	}
	if n := plain.Auths("priv"); n != 0 {
		t.Fatalf("credentials were sent over plain HTTP %d times", n)
	}
}

func TestMasker(t *testing.T) {
	var out bytes.Buffer
	m := NewMasker(&out, []string{"hunter22", "abc", "multi\nline-secret", "hunter22"})
	for _, p := range []string{"pass=hun", "ter22 ok\nthe key: multi", "\nline-secret end", "\nshort abc stays\npartial hunt"} {
		if _, err := m.Write([]byte(p)); err != nil {
			t.Fatal(err)
		}
	}
	if strings.Contains(out.String(), "hunter22") || strings.Contains(out.String(), "line-secret") {
		t.Fatalf("a secret was written before Flush: %q", out.String())
	}
	if err := m.Flush(); err != nil {
		t.Fatal(err)
	}
	want := "pass=**** ok\nthe key: **** end\nshort abc stays\npartial hunt"
	if out.String() != want {
		t.Fatalf("masked:\n%q\nwant:\n%q", out.String(), want)
	}
	// a long line without an end is cut by size, a value across the cut still caught
	out.Reset()
	m = NewMasker(&out, []string{"TOPSECRET"})
	long := strings.Repeat("x", maskLimit-3) + "TOPSECRET" + strings.Repeat("y", 10)
	for i := 0; i < len(long); i += 1000 {
		m.Write([]byte(long[i:min(i+1000, len(long))]))
	}
	m.Flush()
	if strings.Contains(out.String(), "TOP") || !strings.Contains(out.String(), "****") {
		t.Fatalf("cut by size: the value leaked or was not masked (%d bytes)", out.Len())
	}
}

// fakeDevtool is a devtool that prints its arguments and some of its environment, then fails when
// the file FAIL is in its folder, or sleeps when SLEEP is.
const fakeDevtool = `#!/bin/sh
echo "args: $*"
echo "MODE=$MODE FROM_ENV=$FROM_ENV STORED=$STORED KUBECONFIG=$KUBECONFIG"
echo "printing the stored secret: $STORED"
echo "BUILDKIT_HOST=$BUILDKIT_HOST CERT=$DEVTOOL_BUILDKIT_CERT KEY=$DEVTOOL_BUILDKIT_KEY CA=$DEVTOOL_BUILDKIT_CA DOCKER_CONFIG=$DOCKER_CONFIG REGISTRY=$DEVTOOL_REGISTRY"
[ -f SLEEP ] && sleep 30
if [ -f FAIL ]; then echo "step output line 1"; echo "error: the deploy failed" >&2; exit 3; fi
exit 0
`

func runSpec(t *testing.T, files map[string]string) (Options, *bytes.Buffer) {
	t.Helper()
	srv := gittest.Start(t, gittest.Options{Addr: "127.0.0.1:0"})
	repo := srv.Repo(t, "app", writeFiles(t, files), "main", false)
	bin := filepath.Join(t.TempDir(), "devtool")
	if err := os.WriteFile(bin, []byte(fakeDevtool), 0o755); err != nil {
		t.Fatal(err)
	}
	tok := filepath.Join(t.TempDir(), "token")
	os.WriteFile(tok, []byte("kube-token-value\n"), 0o600)
	var out bytes.Buffer
	return Options{
		Spec: runspec.Spec{Action: "deploy", Namespace: "alice", Name: "app", User: "alice", Number: 2, Repository: repo,
			Deadline: time.Now().Add(time.Minute), Vars: map[string]string{"MODE": "test"},
			Secrets: map[string]string{"STORED": "stored-value-1", "FROM_ENV": "stored-loses"}},
		APIServer: "https://10.97.0.1:443", KubeCAFile: "/ca.crt", TokenFile: tok,
		WorkDir: t.TempDir(), Devtool: bin, Environ: []string{"PATH=" + os.Getenv("PATH")}, Out: &out,
	}, &out
}

func TestRunDeploys(t *testing.T) {
	o, out := runSpec(t, map[string]string{"devtool.yml": "name: app\n", ".env": "FROM_ENV=dotenv\n"})
	res, err := Run(context.Background(), o)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	log := out.String()
	for _, want := range []string{
		"==> deploy of app in namespace alice (run #2, as alice)",
		"==> clone " + o.Spec.Repository + " (the default branch)",
		"==> cloned " + res.Commit[:12] + " (branch main)",
		"==> devtool deploy --namespace alice --name app --wait --timeout ",
		"--var MODE=…",
		"args: deploy --namespace alice --name app --wait --timeout",
		"--var MODE=test",
		// (--var values reach devtool as flags) .env wins over a stored secret; a stored secret
		// the .env does not set is in the environment, masked in the log
		"MODE= FROM_ENV= STORED=**** KUBECONFIG=" + filepath.Join(o.WorkDir, ".kube", "config"),
		"printing the stored secret: ****",
		"==> deploy of app done in",
	} {
		if !strings.Contains(log, want) {
			t.Errorf("the log lacks %q:\n%s", want, log)
		}
	}
	if strings.Contains(log, "stored-value-1") || strings.Contains(log, "kube-token-value") {
		t.Fatalf("a secret leaked into the log:\n%s", log)
	}
	if res.Step != "" || res.Branch != "main" || res.CloneMillis <= 0 {
		t.Fatalf("result %+v", res)
	}
	kc, err := os.ReadFile(filepath.Join(o.WorkDir, ".kube", "config"))
	if err != nil || !strings.Contains(string(kc), `tokenFile: "`+o.TokenFile+`"`) || !strings.Contains(string(kc), `server: "https://10.97.0.1:443"`) {
		t.Fatalf("kubeconfig: %s %v", kc, err)
	}
}

// TestRunHostedBuild: with a builder in the spec, devtool gets BUILDKIT_HOST, the certificate's
// files and a Docker config (0600) whose only credentials are the user's token for the platform's
// registry (the token never in the log); a shell's BUILDKIT_HOST does not win over the platform's.
func TestRunHostedBuild(t *testing.T) {
	o, out := runSpec(t, map[string]string{"devtool.yml": "name: app\n"})
	o.Spec.Builder, o.Spec.Registry = "tcp://127.0.0.1:31234", "127.0.0.1:31500"
	o.BuilderCert, o.BuilderKey, o.BuilderCA = "/run/builder.crt", "/run/builder.key", "/run/builder-ca.crt"
	o.Environ = append(o.Environ, "BUILDKIT_HOST=tcp://elsewhere:1234")
	if _, err := Run(context.Background(), o); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	dc := filepath.Join(o.WorkDir, ".docker")
	want := "BUILDKIT_HOST=tcp://127.0.0.1:31234 CERT=/run/builder.crt KEY=/run/builder.key CA=/run/builder-ca.crt DOCKER_CONFIG=" + dc + " REGISTRY=127.0.0.1:31500"
	if !strings.Contains(out.String(), want) || !strings.Contains(out.String(), "builder: the platform's build service (tcp://127.0.0.1:31234), images pushed to 127.0.0.1:31500 as alice") {
		t.Fatalf("the log lacks %q:\n%s", want, out)
	}
	fi, err := os.Stat(filepath.Join(dc, "config.json"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("docker config: %v %v", fi, err)
	}
	b, _ := os.ReadFile(filepath.Join(dc, "config.json"))
	var cfg struct {
		Auths map[string]struct{ Auth string } `json:"auths"`
	}
	if err := json.Unmarshal(b, &cfg); err != nil || len(cfg.Auths) != 1 {
		t.Fatalf("docker config %s: %v", b, err)
	}
	if a, _ := base64.StdEncoding.DecodeString(cfg.Auths["127.0.0.1:31500"].Auth); string(a) != "alice:kube-token-value" {
		t.Fatalf("registry credentials %q", a)
	}

	// a builder without certificate files is a failed step, not a build without mTLS
	o, _ = runSpec(t, map[string]string{"devtool.yml": "name: app\n"})
	o.Spec.Builder = "tcp://127.0.0.1:31234"
	if res, err := Run(context.Background(), o); err == nil || res.Step != "deploy" || !strings.Contains(err.Error(), "no client certificate") {
		t.Fatalf("err %v, result %+v", err, res)
	}
}

func TestRunFailsAndTimesOut(t *testing.T) {
	o, out := runSpec(t, map[string]string{"devtool.yml": "name: app\n", "FAIL": ""})
	res, err := Run(context.Background(), o)
	var se *StepError
	if !errors.As(err, &se) || se.Step != "deploy" || res.Step != "deploy" || res.TimedOut {
		t.Fatalf("err %v, result %+v", err, res)
	}
	if !strings.Contains(res.Tail, "error: the deploy failed") || strings.Contains(res.Tail, "stored-value-1") {
		t.Fatalf("tail %q", res.Tail)
	}
	if !strings.Contains(out.String(), "step output line 1") {
		t.Fatalf("log:\n%s", out)
	}

	o, _ = runSpec(t, map[string]string{"devtool.yml": "name: app\n", "SLEEP": ""})
	o.Spec.Deadline = time.Now().Add(4 * time.Second)
	o.Grace = time.Second
	start := time.Now()
	res, err = Run(context.Background(), o)
	if err == nil || !res.TimedOut || res.Step != "deploy" || !strings.Contains(err.Error(), "timed out during step deploy") {
		t.Fatalf("err %v, result %+v", err, res)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Fatalf("the timed-out deploy was not stopped: %s", d)
	}

	o, _ = runSpec(t, map[string]string{"devtool.yml": "name: app\n"})
	o.Spec.Branch = "missing"
	res, err = Run(context.Background(), o)
	if err == nil || res.Step != "clone" || !strings.Contains(err.Error(), `the branch "missing" does not exist`) {
		t.Fatalf("err %v, result %+v", err, res)
	}
}

func TestGit(t *testing.T) {
	srv, ca := tlsServer(t, "tok-123456")
	repo := srv.Repo(t, "dep", writeFiles(t, map[string]string{"a": "a"}), "main", true)
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.crt")
	os.WriteFile(caFile, ca, 0o644)
	env := map[string]string{runspec.GitTokenSecret("127.0.0.1:1"): "tok-123456", "DEVTOOL_RUNNER_CA_FILE": caFile}
	var out, errb bytes.Buffer
	code := Git(context.Background(), []string{"clone", "--progress", "--depth", "1", "--branch", "main", "--", repo, "dep"}, dir,
		func(k string) string { return env[k] }, &out, &errb)
	if code != 0 {
		t.Fatalf("clone: exit %d: %s", code, errb.String())
	}
	out.Reset()
	if code := Git(context.Background(), []string{"-C", filepath.Join(dir, "dep"), "rev-parse", "--abbrev-ref", "HEAD"}, "/", nil, &out, &errb); code != 0 || out.String() != "main\n" {
		t.Fatalf("rev-parse --abbrev-ref: %d %q %s", code, out.String(), errb.String())
	}
	out.Reset()
	if code := Git(context.Background(), []string{"rev-parse", "HEAD"}, filepath.Join(dir, "dep"), nil, &out, &errb); code != 0 || len(strings.TrimSpace(out.String())) != 40 {
		t.Fatalf("rev-parse HEAD: %d %q", code, out.String())
	}
	errb.Reset()
	if code := Git(context.Background(), []string{"log"}, dir, nil, &out, &errb); code != 1 || !strings.Contains(errb.String(), "clone and rev-parse only") {
		t.Fatalf("git log: %d %q", code, errb.String())
	}
}

func TestLineTail(t *testing.T) {
	tl := &lineTail{max: 20}
	tl.Write([]byte("first line\nprogress 10%\rprogress 100%\nlast line is here\n"))
	if got := tl.String(); got != "last line is here" {
		t.Fatalf("tail %q", got)
	}
}

//go:build integration

package e2e

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devtool/devtool/internal/errs"
	"github.com/devtool/devtool/internal/gittest"
	"github.com/devtool/devtool/internal/platform/api"
	"github.com/devtool/devtool/internal/platform/client"
	"github.com/devtool/devtool/internal/platform/install"
	"github.com/devtool/devtool/internal/platform/runspec"
	"github.com/devtool/devtool/internal/testcluster"
)

// bridgeIP is the local cluster's pod bridge (hack/cluster/lib.sh): the test's git servers listen
// there, so the pipeline runs' pods can clone from them, and nothing beyond the machine can.
const bridgeIP = "10.244.91.1"

// pipelineLab is a platform with pipelines, its admin, the cluster as admin, and git servers on
// the pod bridge: plain HTTP (public repositories) and HTTPS with a CA of the test's (private ones,
// behind a token).
type pipelineLab struct {
	t          testing.TB
	p          platformFiles
	ca         []byte
	admin      *client.Client
	cluster    *testcluster.Cluster
	info       *api.Info
	plain      *gittest.Server
	secure     *gittest.Server
	gitCA      string
	gitToken   string
	suffix     string
	namespaces []string
}

func newPipelineLab(t testing.TB) *pipelineLab {
	t.Helper()
	p := findPlatform(t)
	cluster := testcluster.Connect(t)
	ca, err := os.ReadFile(p.caFile)
	if err != nil {
		t.Fatal(err)
	}
	admin, err := client.New(client.Options{URL: p.url, Token: p.adminToken, CA: ca})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(admin.Close)
	info, err := admin.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !info.Pipelines {
		msg := "the platform runs no pipelines (installed without a runner image)"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	if ln, err := net.Listen("tcp", bridgeIP+":0"); err != nil {
		msg := "the pod bridge " + bridgeIP + " is not on this machine: " + err.Error()
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	} else {
		ln.Close()
	}
	certs, err := install.NewCerts([]string{bridgeIP}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(certs.Cert, certs.Key)
	if err != nil {
		t.Fatal(err)
	}
	sfx := make([]byte, 3)
	_, _ = rand.Read(sfx)
	l := &pipelineLab{t: t, p: p, ca: ca, admin: admin, cluster: cluster, info: info, suffix: hex.EncodeToString(sfx),
		gitCA: string(certs.CA), gitToken: "tok-" + hex.EncodeToString(sfx) + "-private"}
	l.plain = gittest.Start(t, gittest.Options{Addr: bridgeIP + ":0"})
	l.secure = gittest.Start(t, gittest.Options{Addr: bridgeIP + ":0", TLS: &pair, Token: l.gitToken})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for _, ns := range l.namespaces {
			_ = cluster.Clientset.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
		}
	})
	return l
}

// user makes a platform user (admin or not) whose CLI reaches the platform through DEVTOOL_URL,
// DEVTOOL_TOKEN and DEVTOOL_CA_CERT, in its personal namespace; it is removed when the test ends.
func (l *pipelineLab) user(base string, admin bool) (*platformUser, string) {
	l.t.Helper()
	name := base + "-" + l.suffix
	r, err := l.admin.CreateUser(context.Background(), api.CreateUserRequest{Name: name, Admin: admin})
	if err != nil {
		l.t.Fatalf("creating %s: %v", name, err)
	}
	l.namespaces = append(l.namespaces, name)
	l.t.Cleanup(func() { _ = l.admin.DeleteUser(context.Background(), name) })
	u := newPlatformUser(l.t)
	u.timeout = 6 * time.Minute // a run on a loaded machine: pod start, clone, deploy
	u.env = []string{api.EnvURL + "=" + l.p.url, api.EnvToken + "=" + r.Token, api.EnvCACert + "=" + l.p.caFile, api.EnvNamespace + "=" + name}
	return u, r.Token
}

// secret stores a secret of the user's (PUT /api/v1/secrets/{name}).
func (l *pipelineLab) secret(token, name, value, scope string) {
	l.t.Helper()
	c, err := install.Client(l.ca)
	if err != nil {
		l.t.Fatal(err)
	}
	body, _ := json.Marshal(api.SecretValue{Value: value})
	u := l.p.url + api.Prefix + "/secrets/" + name
	if scope != "" {
		u += "?scope=" + scope
	}
	req, _ := http.NewRequest(http.MethodPut, u, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		l.t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		l.t.Fatalf("storing secret %s: %s", name, resp.Status)
	}
}

// repo makes a repository of files on the plain (or, private, the secure) server.
func (l *pipelineLab) repo(name string, files map[string]string, private bool) string {
	l.t.Helper()
	dir := l.t.TempDir()
	for p, c := range files {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			l.t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			l.t.Fatal(err)
		}
	}
	if private {
		return l.secure.Repo(l.t, name, dir, "main", true)
	}
	return l.plain.Repo(l.t, name, dir, "main", false)
}

func pipelineManifest(deploy, destroy string) string {
	m := "deploy:\n  - name: run\n    command: " + deploy + "\n"
	if destroy != "" {
		m += "destroy:\n  - name: clean\n    command: " + destroy + "\n"
	}
	return m
}

// TestPipelines drives `devtool pipeline` through the built CLI against the platform: deploy and
// destroy with --wait, --var and --skip-if-exists, one run at a time, a failing run's exit code and
// streamed log, a timed-out run, a private repository with a stored token, a run refused by the API
// server in another user's namespace, logs afterwards, and exit 4 without a login.
func TestPipelines(t *testing.T) {
	l := newPipelineLab(t)
	alice, aliceToken := l.user("alice", false)
	_, _ = l.user("bob", false)
	aliceNS, bobNS := "alice-"+l.suffix, "bob-"+l.suffix
	ctx := context.Background()
	cm := func(ns, name string) (map[string]string, error) {
		c, err := l.cluster.Clientset.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		return c.Data, nil
	}

	app := l.repo("app", map[string]string{"devtool.yml": pipelineManifest(
		`echo "deploying mode=$MODE commit=$DEVTOOL_GIT_COMMIT"; kubectl create configmap app-config --from-literal=mode=$MODE --from-literal=commit=$DEVTOOL_GIT_COMMIT`,
		`kubectl delete configmap app-config`)}, false)

	t.Run("deploy with --wait and --var", func(t *testing.T) {
		out, errOut := alice.in(t).mustRun("pipeline", "deploy", "--repository", app, "--var", "MODE=test", "--wait")
		for _, want := range []string{"==> clone " + app, "==> cloned ", "deploying mode=test commit=", "==> deploy of app done"} {
			if !strings.Contains(out, want) {
				t.Errorf("the streamed log lacks %q", want)
			}
		}
		if !strings.Contains(errOut, "plain HTTP") || !strings.Contains(errOut, "Pipeline app deployed to namespace "+aliceNS+" (branch main") {
			t.Errorf("stderr: %s", errOut)
		}
		data, err := cm(aliceNS, "app-config")
		if err != nil || data["mode"] != "test" || len(data["commit"]) != 40 {
			t.Fatalf("the deploy command's ConfigMap: %v %v", data, err)
		}
		p, err := clientFor(t, l, aliceToken).Pipeline(ctx, aliceNS, "app")
		if err != nil || p.Status != api.PhaseSucceeded || p.Commit != data["commit"] || p.Branch != "main" || p.Repository != app {
			t.Fatalf("the pipeline's state %+v %v", p, err)
		}
		if r := p.Runs[0]; r.User != "alice-"+l.suffix || r.Started == nil || r.CloneMillis <= 0 || strings.Join(r.VarNames, ",") != "MODE" {
			t.Fatalf("run %+v", r)
		}
	})

	t.Run("builds on the hosted build service", func(t *testing.T) {
		if l.info.Builder == "" || l.info.Registry == "" {
			t.Skip("the platform has no hosted build service")
		}
		bb, err := os.ReadFile("/bin/busybox")
		if err != nil {
			t.Skipf("busybox-static not installed: %v", err)
		}
		marker := "built-in-a-pipeline-" + l.suffix
		built := l.repo("built", map[string]string{
			"compose.yml": "services:\n  web:\n    build: .\n    stop_grace_period: 1s\n",
			"busybox":     string(bb),
			"Dockerfile": "FROM scratch\nCOPY --chmod=755 busybox /bin/busybox\n" + // (the test's repository keeps files 0644)
				`RUN ["/bin/busybox", "sh", "-c", "/bin/busybox --install -s /bin && echo ` + marker + ` > /marker"]` + "\n" +
				`CMD ["/bin/sh", "-c", "cat /marker; exec sleep 3600"]` + "\n",
		}, false)
		out, _ := alice.in(t).mustRun("pipeline", "deploy", "--repository", built, "--wait")
		if !strings.Contains(out, "builder: the platform's build service ("+l.info.Builder+"), images pushed to "+l.info.Registry+" as alice-"+l.suffix) {
			t.Errorf("the log does not say the build ran on the platform's build service:\n%s", out)
		}
		pods, err := l.cluster.Clientset.CoreV1().Pods(aliceNS).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=web"})
		if err != nil || len(pods.Items) == 0 {
			t.Fatalf("the built service's pods: %v %v", pods, err)
		}
		p := pods.Items[0]
		if img := p.Spec.Containers[0].Image; !strings.HasPrefix(img, l.info.Registry+"/"+aliceNS+"/") {
			t.Errorf("the pod runs %s, not an image of the platform's registry in %s", img, aliceNS)
		}
		logs, err := l.cluster.Clientset.CoreV1().Pods(aliceNS).GetLogs(p.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
		if err != nil || !strings.Contains(string(logs), marker) {
			t.Errorf("the pod does not print what the build's RUN step wrote: %q %v", logs, err)
		}
		alice.in(t).mustRun("pipeline", "destroy", "--name", "built", "--wait")

		// the run pushes with alice's rights: not into bob's repositories
		stolen := l.info.Registry + "/" + bobNS + "/stolen:1"
		steal := l.repo("steal", map[string]string{
			"compose.yml": "services:\n  web:\n    build: .\n    image: " + stolen + "\n",
			"busybox":     string(bb),
			"Dockerfile":  "FROM scratch\nCOPY --chmod=755 busybox /bin/busybox\nCMD [\"/bin/busybox\", \"sleep\", \"3600\"]\n",
		}, false)
		out, errOut, err := alice.in(t).run("pipeline", "deploy", "--repository", steal, "--wait")
		if exitCode(err) != 1 || !strings.Contains(errOut, "failed in step deploy") || !strings.Contains(out, "may not push to "+bobNS+"/stolen") {
			t.Fatalf("a push into bob's repository: exit %d\n%s%s", exitCode(err), out, errOut)
		}
		if r, err := name.ParseReference(stolen, name.Insecure); err != nil {
			t.Fatal(err)
		} else if _, err := remote.Head(r, remote.WithContext(ctx)); err == nil {
			t.Fatalf("the run pushed %s into bob's repository", stolen)
		}
	})

	t.Run("skip if exists", func(t *testing.T) {
		_, errOut := alice.in(t).mustRun("pipeline", "deploy", "--repository", app, "--skip-if-exists", "--wait")
		if !strings.Contains(errOut, "nothing done (--skip-if-exists)") {
			t.Errorf("stderr: %s", errOut)
		}
		if p, _ := clientFor(t, l, aliceToken).Pipeline(ctx, aliceNS, "app"); len(p.Runs) != 1 {
			t.Fatalf("a skipped deploy started a run: %d runs", len(p.Runs))
		}
	})

	t.Run("one run at a time, then logs", func(t *testing.T) {
		slow := l.repo("slow", map[string]string{"devtool.yml": pipelineManifest(`echo slow-start; sleep 8; echo slow-end`, "")}, false)
		_, errOut := alice.in(t).mustRun("pipeline", "deploy", "--repository", slow)
		if !strings.Contains(errOut, "Follow it with: devtool pipeline logs --name slow") {
			t.Errorf("stderr without --wait: %s", errOut)
		}
		_, errOut, err := alice.in(t).run("pipeline", "deploy", "--repository", slow, "--wait")
		if exitCode(err) != 1 || !strings.Contains(errOut, "is running: run #1 (deploy), started by alice-"+l.suffix) {
			t.Fatalf("second run: exit %d: %s", exitCode(err), errOut)
		}
		out, _ := alice.in(t).mustRun("pipeline", "logs", "--name", "slow", "-f")
		if !strings.Contains(out, "slow-start") || !strings.Contains(out, "slow-end") {
			t.Errorf("followed log:\n%s", out)
		}
		out, errOut = alice.in(t).mustRun("pipeline", "logs", "--name", "slow", "--run", "1")
		if !strings.Contains(out, "==> clone "+slow) || !strings.Contains(out, "slow-end") || !strings.Contains(errOut, "Succeeded") {
			t.Errorf("the kept log of run 1:\n%s%s", out, errOut)
		}
	})

	t.Run("a failing pipeline", func(t *testing.T) {
		fail := l.repo("fail", map[string]string{"devtool.yml": pipelineManifest(`echo "about to fail"; echo "the real reason" >&2; exit 3`, "")}, false)
		out, errOut, err := alice.in(t).run("pipeline", "deploy", "--repository", fail, "--wait")
		if exitCode(err) != 1 {
			t.Fatalf("exit %d, want 1", exitCode(err))
		}
		if !strings.Contains(out, "about to fail") || !strings.Contains(errOut, "failed in step deploy") || !strings.Contains(errOut, "the real reason") {
			t.Errorf("log:\n%s\nstderr:\n%s", out, errOut)
		}
	})

	t.Run("a timed-out pipeline", func(t *testing.T) {
		hang := l.repo("hang", map[string]string{"devtool.yml": pipelineManifest(`echo hanging; sleep 600`, "")}, false)
		start := time.Now()
		out, errOut, err := alice.in(t).run("pipeline", "deploy", "--repository", hang, "--timeout", "25s", "--wait")
		if exitCode(err) != 1 || !strings.Contains(errOut, "timed out") || !strings.Contains(out, "hanging") {
			t.Fatalf("exit %d\n%s%s", exitCode(err), out, errOut)
		}
		if d := time.Since(start); d > 2*time.Minute {
			t.Errorf("the timed-out run took %s to end", d)
		}
		r, err := clientFor(t, l, aliceToken).PipelineRun(ctx, aliceNS, "hang", "latest", 0)
		if err != nil || r.Phase != api.PhaseTimedOut || !strings.Contains(r.Message, "25s") {
			t.Fatalf("run %+v %v", r, err)
		}
		pods, _ := l.cluster.Clientset.CoreV1().Pods(aliceNS).List(ctx, metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=" + r.Job})
		for _, p := range pods.Items {
			if p.Status.Phase == "Running" {
				t.Errorf("the timed-out run's pod %s still runs", p.Name)
			}
		}
	})

	t.Run("a private repository with a stored token", func(t *testing.T) {
		priv := l.repo("private", map[string]string{"devtool.yml": pipelineManifest(`echo "the token is $GIT_TOKEN_10_244_91_1"; kubectl create configmap private-ok --from-literal=token=$GIT_TOKEN_10_244_91_1`, "")}, true)
		// the CA of the server, but not the token
		l.secret(aliceToken, runspec.GitCASecret(bridgeIP), l.gitCA, "")
		_, errOut, err := alice.in(t).run("pipeline", "deploy", "--repository", priv, "--wait")
		if exitCode(err) != 1 || !strings.Contains(errOut, "failed in step clone") || !strings.Contains(errOut, runspec.GitTokenSecret(bridgeIP)) {
			t.Fatalf("without a token: exit %d: %s", exitCode(err), errOut)
		}
		l.secret(aliceToken, runspec.GitTokenSecret(bridgeIP), l.gitToken, "")
		out, errOut := alice.in(t).mustRun("pipeline", "deploy", "--repository", priv, "--wait")
		if strings.Contains(out+errOut, l.gitToken) {
			t.Fatalf("the token is in the output:\n%s%s", out, errOut)
		}
		if data, err := cm(aliceNS, "private-ok"); err != nil || data["token"] != l.gitToken {
			t.Fatalf("the deploy did not run with the stored secret: %v %v", data, err)
		}
		if !strings.Contains(out, "the token is ****") {
			t.Errorf("the secret's value was not masked in the log:\n%s", out)
		}
	})

	t.Run("a run cannot do what its user cannot", func(t *testing.T) {
		intruder := l.repo("intruder", map[string]string{"devtool.yml": pipelineManifest(`kubectl -n `+bobNS+` create configmap stolen --from-literal=a=b`, "")}, false)
		out, errOut, err := alice.in(t).run("pipeline", "deploy", "--repository", intruder, "--wait")
		if exitCode(err) != 1 || !strings.Contains(strings.ToLower(out+errOut), "forbidden") || !strings.Contains(out+errOut, "system:serviceaccount:") {
			t.Fatalf("exit %d\n%s%s", exitCode(err), out, errOut)
		}
		if _, err := cm(bobNS, "stolen"); !apierrors.IsNotFound(err) {
			t.Fatalf("the run wrote into bob's namespace: %v", err)
		}
	})

	t.Run("destroy with --wait", func(t *testing.T) {
		_, errOut := alice.in(t).mustRun("pipeline", "destroy", "--name", "app", "--volumes", "--wait")
		if !strings.Contains(errOut, "Pipeline app destroyed in namespace "+aliceNS) {
			t.Errorf("stderr: %s", errOut)
		}
		if _, err := cm(aliceNS, "app-config"); !apierrors.IsNotFound(err) {
			t.Fatalf("the destroy command did not run: %v", err)
		}
		// no token or run Secret is left behind
		secs, _ := l.cluster.Clientset.CoreV1().Secrets(aliceNS).List(ctx, metav1.ListOptions{LabelSelector: "devtool.dev/pipeline-run"})
		if len(secs.Items) != 0 {
			t.Errorf("%d run Secrets left in %s", len(secs.Items), aliceNS)
		}
	})

	t.Run("exit 4 without a login", func(t *testing.T) {
		nobody := newPlatformUser(t)
		for _, args := range [][]string{{"pipeline", "deploy", "--repository", app}, {"pipeline", "logs", "--name", "app"}, {"preview", "list"}} {
			_, errOut, err := nobody.in(t).run(args...)
			if exitCode(err) != errs.ExitAuth || !strings.Contains(errOut, "needs a login to a devtool platform") {
				t.Errorf("%v: exit %d: %s", args, exitCode(err), errOut)
			}
		}
	})
}

// in is the user's machine in (sub)test t.
func (u *platformUser) in(t *testing.T) *platformUser {
	c := *u
	c.t = t
	return &c
}

func clientFor(t testing.TB, l *pipelineLab, token string) *client.Client {
	t.Helper()
	c, err := client.New(client.Options{URL: l.p.url, Token: token, CA: l.ca})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// webCompose is a small web app: busybox's httpd, public on 8080 (an Ingress, so an endpoint).
const webCompose = `services:
  web:
    image: docker.io/library/busybox:local
    command: sh -c 'echo "hello from $${GREETING:-a preview}" > /tmp/index.html && exec httpd -f -p 8080 -h /tmp'
    ports: ["8080:8080"]
    stop_grace_period: 1s
`

// TestPreviews drives `devtool preview` through the built CLI: a personal preview (bob does not see
// alice's), a global one (admins only; bob sees it and is a viewer, may not destroy it), endpoints
// as JSON, one destroyed by a signed webhook, and — when the platform's idle limits are short
// (PLATFORM_PREVIEW_SLEEP_AFTER, PLATFORM_PREVIEW_TTL at install) — sleep, wake and the TTL.
func TestPreviews(t *testing.T) {
	l := newPipelineLab(t)
	alice, _ := l.user("alice", false)
	bob, _ := l.user("bob", false)
	admin, _ := l.user("boss", true)
	ctx := context.Background()
	repo := l.repo("web-"+l.suffix, map[string]string{"compose.yml": webCompose}, false)
	l.plain.Commit(t, "web-"+l.suffix, "feature", map[string]string{"README": "a pull request"})
	nsGone := func(ns string) bool {
		n, err := l.cluster.Clientset.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		return apierrors.IsNotFound(err) || (err == nil && n.DeletionTimestamp != nil)
	}
	waitUntil := func(t *testing.T, what string, d time.Duration, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(d)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within %s", what, d)
			}
			time.Sleep(2 * time.Second)
		}
	}
	shortTTL := l.info.PreviewTTLSeconds > 0 && l.info.PreviewTTLSeconds <= 300
	ttlName := "ttl-" + l.suffix
	if shortTTL {
		alice.mustRun("preview", "deploy", ttlName, "--repository", repo, "--branch", "main")
		l.namespaces = append(l.namespaces, ttlName)
	}

	personal := "web-" + l.suffix + "-main" // generated from the repository and the branch
	l.namespaces = append(l.namespaces, personal)
	url := ""
	t.Run("personal", func(t *testing.T) {
		out, errOut := alice.in(t).mustRun("preview", "deploy", "--repository", repo, "--branch", "main", "--public", "--wait")
		url = "https://web-" + personal + "." + l.info.Domain + "/"
		if l.info.EndpointPort != 0 && l.info.EndpointPort != 443 {
			url = fmt.Sprintf("https://web-%s.%s:%d/", personal, l.info.Domain, l.info.EndpointPort)
		}
		if !strings.Contains(out, url) || !strings.Contains(errOut, "Preview "+personal+" deployed.") {
			t.Fatalf("deploy:\n%s%s", out, errOut)
		}
		if l.info.IngressClass != "" {
			if status, body := l.get(t, url); status != http.StatusOK || !strings.Contains(body, "hello from a preview") {
				t.Errorf("the endpoint over the platform's ingress: %d %q", status, body)
			}
		}
		out, _ = alice.in(t).mustRun("preview", "list")
		if !strings.Contains(out, personal) || !strings.Contains(out, "personal") || !strings.Contains(out, "Ready") {
			t.Errorf("alice's list:\n%s", out)
		}
		out, _ = alice.in(t).mustRun("preview", "endpoints", personal, "-o", "json")
		var urls []string
		if err := json.Unmarshal([]byte(out), &urls); err != nil || len(urls) != 1 || urls[0] != url {
			t.Errorf("endpoints -o json: %q %v", out, err)
		}
		if out, _ := bob.in(t).mustRun("preview", "list"); strings.Contains(out, personal) {
			t.Errorf("bob sees alice's personal preview:\n%s", out)
		}
		if _, errOut, err := bob.in(t).run("preview", "endpoints", personal); exitCode(err) != 1 || !strings.Contains(errOut, "not found") {
			t.Errorf("bob's endpoints of alice's preview: exit %d: %s", exitCode(err), errOut)
		}
	})

	global := "staging-" + l.suffix
	l.namespaces = append(l.namespaces, global)
	t.Run("global", func(t *testing.T) {
		_, errOut, err := bob.in(t).run("preview", "deploy", global, "--scope", "global", "--repository", repo, "--branch", "main")
		if exitCode(err) != 1 || !strings.Contains(errOut, "only an admin may deploy a global preview") {
			t.Fatalf("bob's global preview: exit %d: %s", exitCode(err), errOut)
		}
		admin.in(t).mustRun("preview", "deploy", global, "--scope", "global", "--repository", repo, "--branch", "main", "--wait")
		out, _ := bob.in(t).mustRun("preview", "list")
		if !strings.Contains(out, global) || !strings.Contains(out, "global") {
			t.Errorf("bob's list lacks the global preview:\n%s", out)
		}
		if _, errOut, err := bob.in(t).run("preview", "destroy", global); exitCode(err) != 1 || !strings.Contains(errOut, "only an admin") {
			t.Errorf("bob destroys the global preview: exit %d: %s", exitCode(err), errOut)
		}
		// bob reads it, and may change nothing in it (the API server's answer)
		bobSA := "system:serviceaccount:" + platformNamespace(t, l.cluster, l.p) + ":u-bob-" + l.suffix
		for verb, want := range map[string]bool{"list": true, "delete": false} {
			if got := l.can(t, bobSA, verb, "pods", global); got != want {
				t.Errorf("bob may %s pods in the global preview: %v, want %v", verb, got, want)
			}
		}
		_, errOut = admin.in(t).mustRun("preview", "destroy", global)
		if !strings.Contains(errOut, "Preview "+global+" destroyed.") || !nsGone(global) {
			t.Errorf("destroy: %s", errOut)
		}
	})

	t.Run("destroyed by a signed webhook", func(t *testing.T) {
		name, pull := "pr7-"+l.suffix, "https://git.example.com/acme/web/pull/7"
		l.namespaces = append(l.namespaces, name)
		alice.in(t).mustRun("preview", "deploy", name, "--repository", repo, "--branch", "feature", "--sourceUrl", pull, "--wait")
		body := []byte(`{"action":"closed","pull_request":{"html_url":"` + pull + `","merged":true,"head":{"ref":"feature"}}}`)
		secret, err := os.ReadFile(filepath.Join(platformDir(), "platform-webhook-secret"))
		if err != nil {
			t.Fatal(err)
		}
		if status, _ := l.webhook(t, body, []byte("not the secret")); status != http.StatusUnauthorized {
			t.Fatalf("a payload signed with another secret: %d", status)
		}
		status, res := l.webhook(t, body, bytes.TrimSpace(secret))
		if status != http.StatusAccepted || strings.Join(res.Destroying, ",") != name {
			t.Fatalf("webhook: %d %+v", status, res)
		}
		waitUntil(t, "the preview gone", 3*time.Minute, func() bool {
			out, _, _ := alice.in(t).run("preview", "list")
			return !strings.Contains(out, name) && nsGone(name)
		})
	})

	if l.info.PreviewSleepSeconds > 0 && l.info.PreviewSleepSeconds <= 120 {
		t.Run("sleeps when idle, woken by a request and by a command", func(t *testing.T) {
			replicas := func() int32 {
				d, err := l.cluster.Clientset.AppsV1().Deployments(personal).Get(ctx, "web", metav1.GetOptions{})
				if err != nil || d.Spec.Replicas == nil {
					return -1
				}
				return *d.Spec.Replicas
			}
			// asleep: scaled to zero and its pod gone (a terminating pod may still answer)
			sleeping := func() bool {
				pods, err := l.cluster.Clientset.CoreV1().Pods(personal).List(ctx, metav1.ListOptions{})
				if err != nil || replicas() != 0 {
					return false
				}
				for _, p := range pods.Items {
					if p.Status.Phase == "Running" || p.Status.Phase == "Pending" {
						return false
					}
				}
				return true
			}
			asleep := time.Duration(l.info.PreviewSleepSeconds)*time.Second + 2*time.Minute
			waitUntil(t, "asleep", asleep, sleeping)
			if l.info.IngressClass != "" {
				start := time.Now()
				status, body := l.get(t, url) // the ingress asks the platform to wake it, and waits
				if status != http.StatusOK || !strings.Contains(body, "hello from a preview") {
					t.Fatalf("the first request to the sleeping preview: %d %q", status, body)
				}
				t.Logf("woken by a request: answered after %s", time.Since(start).Round(10*time.Millisecond))
				if n := replicas(); n != 1 {
					t.Fatalf("woken by a request: %d replicas", n)
				}
				waitUntil(t, "asleep again", asleep, sleeping)
			}
			if out, _ := alice.in(t).mustRun("preview", "list"); !strings.Contains(out, "Sleeping") {
				t.Errorf("list:\n%s", out)
			}
			alice.in(t).mustRun("preview", "endpoints", personal)
			if n := replicas(); n != 1 {
				t.Fatalf("woken: %d replicas", n)
			}
		})
	} else {
		t.Logf("sleep not tested: the platform's previews sleep after %ds (install with PLATFORM_PREVIEW_SLEEP_AFTER=75s)", l.info.PreviewSleepSeconds)
	}
	if shortTTL {
		t.Run("destroyed after its time-to-live", func(t *testing.T) {
			waitUntil(t, "the idle preview gone", time.Duration(l.info.PreviewTTLSeconds)*time.Second+3*time.Minute, func() bool {
				out, _, _ := alice.in(t).run("preview", "list")
				return !strings.Contains(out, ttlName) && nsGone(ttlName)
			})
		})
	} else {
		t.Logf("time-to-live not tested: the platform's previews live %ds idle (install with PLATFORM_PREVIEW_TTL=4m)", l.info.PreviewTTLSeconds)
	}
	alice.mustRun("preview", "destroy", personal)
}

func platformDir() string {
	if d := os.Getenv("DEVTOOL_TEST_PLATFORM_DIR"); d != "" {
		return d
	}
	return "/tmp/devtool-cluster"
}

// can asks the API server whether a ServiceAccount user may verb resource in ns.
func (l *pipelineLab) can(t *testing.T, user, verb, resource, ns string) bool {
	t.Helper()
	parts := strings.Split(user, ":")
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:               user,
		Groups:             []string{"system:serviceaccounts", "system:serviceaccounts:" + parts[2], "system:authenticated"},
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: verb, Resource: resource},
	}}
	r, err := l.cluster.Clientset.AuthorizationV1().SubjectAccessReviews().Create(context.Background(), sar, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return r.Status.Allowed
}

// webhook posts a GitHub pull_request event signed with secret.
func (l *pipelineLab) webhook(t *testing.T, body, secret []byte) (int, api.WebhookResult) {
	t.Helper()
	c, err := install.Client(l.ca)
	if err != nil {
		t.Fatal(err)
	}
	mac := hmac.New(sha256.New, secret)
	mac.Write(body)
	req, _ := http.NewRequest(http.MethodPost, l.p.url+api.Prefix+"/webhooks/github", bytes.NewReader(body))
	req.Header.Set("X-GitHub-Event", "pull_request")
	req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var res api.WebhookResult
	_ = json.NewDecoder(resp.Body).Decode(&res)
	return resp.StatusCode, res
}

// get fetches url (an endpoint under the platform's domain) trusting the platform's CA, dialling
// .localhost names on loopback.
func (l *pipelineLab) get(t *testing.T, url string) (int, string) {
	t.Helper()
	c, err := install.Client(l.ca)
	if err != nil {
		t.Fatal(err)
	}
	c.Timeout = 3 * time.Minute // a sleeping preview wakes first
	defer c.CloseIdleConnections()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, string(b)
}

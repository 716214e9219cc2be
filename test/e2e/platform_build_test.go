//go:build integration

package e2e

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devtool/devtool/internal/build"
	"github.com/devtool/devtool/internal/platform/api"
	"github.com/devtool/devtool/internal/platform/client"
	"github.com/devtool/devtool/internal/platform/pki"
	"github.com/devtool/devtool/internal/testcluster"
)

// hostedPlatform is the platform of findPlatform with its build service.
type hostedPlatform struct {
	platformFiles
	admin *client.Client
	info  *api.Info
	// ns is the platform's namespace (where its build service runs), found through the BuildKit
	// Service whose node port the builder address names.
	ns     string
	c      *testcluster.Cluster
	suffix string
}

func findHostedPlatform(t *testing.T) *hostedPlatform {
	t.Helper()
	p := findPlatform(t)
	c := testcluster.Connect(t)
	ca, err := os.ReadFile(p.caFile)
	if err != nil {
		t.Fatal(err)
	}
	admin, err := client.New(client.Options{URL: p.url, Token: p.adminToken, CA: ca})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(admin.Close)
	ctx := context.Background()
	info, err := admin.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.Builder == "" || info.Registry == "" {
		msg := "the platform at " + p.url + " has no hosted build service (install it with this branch's hack/platform.sh up)"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(info.Builder, "tcp://"))
	svcs, err := c.Clientset.CoreV1().Services("").List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=devtool-buildkit"})
	if err != nil {
		t.Fatal(err)
	}
	hp := &hostedPlatform{platformFiles: p, admin: admin, info: info, c: c}
	for _, s := range svcs.Items {
		if len(s.Spec.Ports) > 0 && fmt.Sprint(s.Spec.Ports[0].NodePort) == port {
			hp.ns = s.Namespace
		}
	}
	if hp.ns == "" {
		t.Fatalf("no devtool-buildkit Service has node port %s (builder %s)", port, info.Builder)
	}
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	hp.suffix = hex.EncodeToString(b)
	return hp
}

// user makes a platform user (removed at the end) and logs a fresh machine in as them.
func (hp *hostedPlatform) user(t *testing.T, base string) (*platformUser, string, string) {
	t.Helper()
	n := base + "-" + hp.suffix
	r, err := hp.admin.CreateUser(context.Background(), api.CreateUserRequest{Name: n})
	if err != nil {
		t.Fatalf("creating %s: %v", n, err)
	}
	t.Cleanup(func() { _ = hp.admin.DeleteUser(context.Background(), n) })
	u := newPlatformUser(t)
	u.mustRun("context", "use", hp.url, "--token", r.Token, "--ca-cert", hp.caFile)
	return u, n, r.Token
}

// writeBusyboxContext writes a build context whose image needs no base image (the hosted BuildKit
// cannot reach the host's registry): Debian's static busybox, a RUN step (runc inside the BuildKit
// pod) that writes marker, and a command that prints it and sleeps.
func writeBusyboxContext(t testing.TB, dir, marker string) {
	t.Helper()
	bb, err := os.ReadFile("/bin/busybox")
	if err != nil {
		t.Fatalf("busybox-static not installed: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "busybox"), bb, 0o755); err != nil {
		t.Fatal(err)
	}
	df := fmt.Sprintf(`FROM scratch
COPY busybox /bin/busybox
RUN ["/bin/busybox", "sh", "-c", "/bin/busybox --install -s /bin && echo %s > /marker"]
CMD ["/bin/sh", "-c", "cat /marker; exec sleep 3600"]
`, marker)
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(df), 0o644); err != nil {
		t.Fatal(err)
	}
}

// pushRandom pushes a small random image to ref as user:password ("" for none) and returns the
// registry's status code (0 when the push worked).
func pushRandom(t *testing.T, ref, user, password string) int {
	t.Helper()
	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	img, err := random.Image(512, 1)
	if err != nil {
		t.Fatal(err)
	}
	auth := authn.Anonymous
	if password != "" {
		auth = authn.FromConfig(authn.AuthConfig{Username: user, Password: password})
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err = remote.Write(r, img, remote.WithAuth(auth), remote.WithContext(ctx))
	if err == nil {
		return 0
	}
	var te *transport.Error
	if errors.As(err, &te) {
		t.Logf("push %s as %q: %d %v", ref, user, te.StatusCode, err)
		return te.StatusCode
	}
	t.Fatalf("push %s: %v", ref, err)
	return -1
}

// TestPlatformHostedBuild drives the hosted build service through the built CLI on a platform
// context, as issue 21 asks:
//   - `deploy --wait` of a Compose service with a build section builds on the platform's BuildKit
//     (mTLS with a certificate the CLI fetched and saved 0600), pushes to the platform's registry
//     under <registry>/<namespace>/..., and the kubelet pulls it: the pod prints what the RUN step
//     wrote;
//   - a push into another user's namespace is refused, through the CLI and straight to the
//     registry (anonymous 401; a viewer 403; an editor and the owner allowed; pulls open);
//   - an expired certificate (signed with the builder CA for the past) is refused by BuildKit, and
//     the CLI holding it renews it and builds; so does one of another CA that BuildKit refuses;
//   - BUILDKIT_HOST still wins: the build runs on a local BuildKit and still pushes to the
//     platform's registry with the user's credentials;
//   - a pipeline runner's way in (no platform context): BUILDKIT_HOST to the hosted BuildKit with
//     DEVTOOL_BUILDKIT_CERT/KEY/CA, the registry's credentials in a Docker config; refused without
//     the certificate.
func TestPlatformHostedBuild(t *testing.T) {
	hp := findHostedPlatform(t)
	ctx := context.Background()
	reg := hp.info.Registry
	alice, aliceName, aliceToken := hp.user(t, "alice")
	bob, bobName, bobToken := hp.user(t, "bob")
	_ = bob

	out, _ := alice.mustRun("context", "show")
	if !strings.Contains(out, `"builder": "`+hp.info.Builder+`"`) || !strings.Contains(out, `"registry": "`+reg+`"`) {
		t.Fatalf("the context's builder and registry are not the platform's (%s, %s):\n%s", hp.info.Builder, reg, out)
	}

	// 1. deploy builds on the platform and runs the image.
	marker := "built-by-hosted-" + hp.suffix
	writeBusyboxContext(t, alice.dir, marker)
	compose := "name: hosted\nservices:\n  web:\n    build: .\n    stop_grace_period: 1s\n"
	if err := os.WriteFile(filepath.Join(alice.dir, "compose.yml"), []byte(compose), 0o644); err != nil {
		t.Fatal(err)
	}
	_, errOut := alice.mustRun("deploy", "--wait", "--timeout", "4m")
	if !strings.Contains(errOut, "the build service of "+hp.url) {
		t.Errorf("deploy did not say it built on the platform's build service:\n%s", errOut)
	}
	alice.mustRun("kubeconfig")
	images, err := alice.kubectl("-n", aliceName, "get", "pods", "-l", "app.kubernetes.io/name=web", "-o", "jsonpath={.items[*].spec.containers[*].image}")
	if err != nil || !strings.HasPrefix(strings.TrimSpace(images), reg+"/"+aliceName+"/hosted-web:") {
		t.Fatalf("the pod's image %q is not in %s/%s/ (%v)", images, reg, aliceName, err)
	}
	var logs string
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Second) {
		logs, err = alice.kubectl("-n", aliceName, "logs", "deployment/web")
		if err == nil && strings.Contains(logs, marker) || time.Now().After(deadline) {
			break
		}
	}
	if !strings.Contains(logs, marker) {
		t.Fatalf("the pod does not print what the RUN step wrote (%q): %q", marker, logs)
	}
	certFiles, _ := filepath.Glob(filepath.Join(alice.home, ".devtool", "builder", "*.json"))
	if len(certFiles) != 1 {
		t.Fatalf("certificate files: %v", certFiles)
	}
	if fi, err := os.Stat(certFiles[0]); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("certificate file %s: %v %v", certFiles[0], fi.Mode(), err)
	}

	// 2. Pushing into bob's namespace: refused through the CLI (BuildKit pushes with alice's
	// credentials) ...
	_, errOut, err = alice.run("build", "-f", "Dockerfile", "--tag", reg+"/"+bobName+"/stolen:1")
	if exitCode(err) != 1 || !strings.Contains(errOut, "may not push to "+bobName+"/stolen") {
		t.Fatalf("a push into bob's namespace: exit %d, want 1 naming the refusal:\n%s", exitCode(err), errOut)
	}
	// ... and straight to the registry, with each user's Kubernetes token as the password.
	kubeToken := func(tok string) string {
		ca, _ := os.ReadFile(hp.caFile)
		pc, err := client.New(client.Options{URL: hp.url, Token: tok, CA: ca})
		if err != nil {
			t.Fatal(err)
		}
		defer pc.Close()
		kt, err := pc.KubeToken(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		return kt.Token
	}
	aliceKube, bobKube := kubeToken(aliceToken), kubeToken(bobToken)
	if code := pushRandom(t, reg+"/"+bobName+"/anonymous:1", "", ""); code != http.StatusUnauthorized {
		t.Errorf("anonymous push: %d, want 401", code)
	}
	if code := pushRandom(t, reg+"/"+bobName+"/direct:1", aliceName, aliceKube); code != http.StatusForbidden {
		t.Errorf("alice into bob's namespace: %d, want 403", code)
	}
	if code := pushRandom(t, reg+"/"+bobName+"/direct:1", bobName, "not-a-token"); code != http.StatusUnauthorized {
		t.Errorf("a bad token: %d, want 401", code)
	}
	if code := pushRandom(t, reg+"/"+bobName+"/direct:1", bobName, bobKube); code != 0 {
		t.Errorf("bob into his namespace: %d, want success", code)
	}
	if code := pushRandom(t, reg+"/nonamespace:1", bobName, bobKube); code != http.StatusForbidden {
		t.Errorf("a repository outside any namespace: %d, want 403", code)
	}
	// Pulls are open (the kubelet pulls without credentials).
	if r, err := name.ParseReference(reg+"/"+bobName+"/direct:1", name.Insecure); err != nil {
		t.Fatal(err)
	} else if _, err := remote.Head(r, remote.WithContext(ctx)); err != nil {
		t.Errorf("anonymous pull of bob's image: %v", err)
	}
	// Membership decides: a viewer may not push, an editor may.
	ca, _ := os.ReadFile(hp.caFile)
	bobClient, err := client.New(client.Options{URL: hp.url, Token: bobToken, CA: ca})
	if err != nil {
		t.Fatal(err)
	}
	defer bobClient.Close()
	if err := bobClient.Share(ctx, bobName, aliceName, api.RoleViewer); err != nil {
		t.Fatal(err)
	}
	if code := pushRandom(t, reg+"/"+bobName+"/as-viewer:1", aliceName, aliceKube); code != http.StatusForbidden {
		t.Errorf("alice as bob's viewer: %d, want 403", code)
	}
	if err := bobClient.Share(ctx, bobName, aliceName, api.RoleEditor); err != nil {
		t.Fatal(err)
	}
	if code := pushRandom(t, reg+"/"+bobName+"/as-editor:1", aliceName, aliceKube); code != 0 {
		t.Errorf("alice as bob's editor: %d, want success", code)
	}

	// 3. An expired certificate: BuildKit refuses it; the CLI that holds one renews it and builds.
	sec, err := hp.c.Clientset.CoreV1().Secrets(hp.ns).Get(ctx, "devtool-builder-ca", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	builderCA, err := pki.ParseCA(sec.Data["ca.crt"], sec.Data["ca.key"])
	if err != nil {
		t.Fatal(err)
	}
	key, csr, err := pki.NewClientKey(aliceName)
	if err != nil {
		t.Fatal(err)
	}
	past := time.Now().Add(-2 * time.Hour)
	expired, expiredAt, err := builderCA.SignClient(csr, aliceName, past, pki.MinClientLifetime)
	if err != nil {
		t.Fatal(err)
	}
	old := &build.BuildKit{Addr: hp.info.Builder, Hosted: &build.HostedService{Addr: hp.info.Builder, Platform: hp.url,
		Credentials: func(context.Context) ([]byte, []byte, []byte, error) { return expired, key, builderCA.CertPEM, nil }}}
	pctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	err = old.Ping(pctx)
	cancel()
	if err == nil {
		t.Fatal("BuildKit took an expired client certificate")
	}
	t.Logf("BuildKit refuses the expired certificate: %v", err)
	var rec map[string]any
	data, err := os.ReadFile(certFiles[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &rec); err != nil {
		t.Fatal(err)
	}
	rec["certificate"], rec["key"] = string(expired), string(key)
	rec["issued"], rec["expires"] = past.Format(time.RFC3339), expiredAt.Format(time.RFC3339)
	data, _ = json.Marshal(rec)
	if err := os.WriteFile(certFiles[0], data, 0o600); err != nil {
		t.Fatal(err)
	}
	_, errOut = alice.mustRun("build", "-f", "Dockerfile", "--tag", reg+"/"+aliceName+"/renewed:1")
	if !strings.Contains(errOut, "the build service of") {
		t.Errorf("the build after renewal did not run on the platform:\n%s", errOut)
	}
	data, _ = os.ReadFile(certFiles[0])
	if err := json.Unmarshal(data, &rec); err != nil {
		t.Fatal(err)
	}
	renewed, err := pki.ParseCertificate([]byte(rec["certificate"].(string)))
	if err != nil || !renewed.NotAfter.After(time.Now()) || rec["key"] == string(key) {
		t.Fatalf("the certificate was not renewed: %v, until %v", err, renewed.NotAfter)
	}

	// 3b. A certificate of another CA (a platform reinstalled from scratch), not expired: BuildKit
	// refuses it, and the CLI drops it and gets a new one once.
	foreign, _, err := pki.NewCA("another builder CA", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	key, csr, _ = pki.NewClientKey(aliceName)
	alien, alienAt, err := foreign.SignClient(csr, aliceName, time.Now(), pki.DefaultClientLifetime)
	if err != nil {
		t.Fatal(err)
	}
	rec["certificate"], rec["key"] = string(alien), string(key)
	rec["issued"], rec["expires"] = time.Now().Format(time.RFC3339), alienAt.Format(time.RFC3339)
	data, _ = json.Marshal(rec)
	if err := os.WriteFile(certFiles[0], data, 0o600); err != nil {
		t.Fatal(err)
	}
	_, errOut = alice.mustRun("build", "-f", "Dockerfile", "--tag", reg+"/"+aliceName+"/renewed:2")
	if !strings.Contains(errOut, "the build service of") {
		t.Errorf("the build after a refused certificate did not run on the platform:\n%s", errOut)
	}
	data, _ = os.ReadFile(certFiles[0])
	if err := json.Unmarshal(data, &rec); err != nil {
		t.Fatal(err)
	}
	if rec["certificate"] == string(alien) {
		t.Error("the refused certificate was kept")
	}

	// 4. BUILDKIT_HOST wins over the platform's build service, and the push still goes to the
	// platform's registry with alice's credentials (BuildKit asks the CLI for them).
	addr := buildkitd(t)
	alice.env = append(alice.env, "BUILDKIT_HOST="+strings.TrimPrefix(addr, "tcp://"))
	_, errOut = alice.mustRun("build", "-f", "Dockerfile", "--tag", reg+"/"+aliceName+"/local:1")
	if !strings.Contains(errOut, "with BuildKit at "+addr) || strings.Contains(errOut, "build service of") {
		t.Errorf("BUILDKIT_HOST did not win:\n%s", errOut)
	}
	if r, err := name.ParseReference(reg+"/"+aliceName+"/local:1", name.Insecure); err != nil {
		t.Fatal(err)
	} else if _, err := remote.Head(r, remote.WithContext(ctx)); err != nil {
		t.Errorf("the locally built image is not in the platform's registry: %v", err)
	}

	// 5. What a pipeline's runner does (no platform context, no API token): BUILDKIT_HOST names the
	// hosted BuildKit, DEVTOOL_BUILDKIT_CERT/KEY/CA a certificate the platform signed, and a Docker
	// config the registry's credentials (the user's Kubernetes token). Without the certificate
	// BuildKit is not reachable at all.
	runner := newPlatformUser(t)
	writeBusyboxContext(t, runner.dir, marker)
	runner.env = []string{"BUILDKIT_HOST=" + strings.TrimPrefix(hp.info.Builder, "tcp://")}
	_, errOut, err = runner.run("build", "-f", "Dockerfile", "--tag", reg+"/"+aliceName+"/runner:1")
	if err == nil {
		t.Fatalf("the hosted BuildKit built for a client without a certificate:\n%s", errOut)
	}
	key, csr, _ = pki.NewClientKey(aliceName)
	runnerCert, _, err := builderCA.SignClient(csr, aliceName, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{"tls.crt": runnerCert, "tls.key": key, "ca.crt": builderCA.CertPEM,
		"docker/config.json": []byte(fmt.Sprintf(`{"auths": {%q: {"auth": %q}}}`, reg,
			base64.StdEncoding.EncodeToString([]byte(aliceName+":"+aliceKube))))}
	for n, b := range files {
		p := filepath.Join(runner.home, n)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	runner.env = append(runner.env, "DEVTOOL_BUILDKIT_CERT="+filepath.Join(runner.home, "tls.crt"),
		"DEVTOOL_BUILDKIT_KEY="+filepath.Join(runner.home, "tls.key"), "DEVTOOL_BUILDKIT_CA="+filepath.Join(runner.home, "ca.crt"),
		"DOCKER_CONFIG="+filepath.Join(runner.home, "docker"))
	runner.mustRun("build", "-f", "Dockerfile", "--tag", reg+"/"+aliceName+"/runner:1")
	if r, err := name.ParseReference(reg+"/"+aliceName+"/runner:1", name.Insecure); err != nil {
		t.Fatal(err)
	} else if _, err := remote.Head(r, remote.WithContext(ctx)); err != nil {
		t.Errorf("the runner's image is not in the platform's registry: %v", err)
	}
}

// TestHostedBuildBenchmark (DEVTOOL_BENCH=1): the same `devtool build -f Dockerfile` (an 8 MiB
// context; a RUN step hashing it) through the platform's build service and through a local
// BuildKit (hack/buildkit's buildkitd on this machine), both pushing to the platform's registry,
// alternating in the same run: cold (--no-cache, a new context file) and warm (unchanged, cached).
// Reports the medians and hosted/local ratios.
//
//	DEVTOOL_BENCH=1 DEVTOOL_TEST_PLATFORM_DIR=... go test -tags integration -run TestHostedBuildBenchmark -v ./test/e2e/
func TestHostedBuildBenchmark(t *testing.T) {
	if os.Getenv("DEVTOOL_BENCH") == "" {
		t.Skip("a benchmark: set DEVTOOL_BENCH=1")
	}
	rounds := 5
	hp := findHostedPlatform(t)
	u, uname, _ := hp.user(t, "bench")
	addr := buildkitd(t)
	writeBusyboxContext(t, u.dir, "bench")
	df := `FROM scratch
COPY busybox /bin/busybox
COPY blob /blob
RUN ["/bin/busybox", "sh", "-c", "/bin/busybox sha256sum /blob > /sum"]
CMD ["/bin/busybox", "cat", "/sum"]
`
	if err := os.WriteFile(filepath.Join(u.dir, "Dockerfile"), []byte(df), 0o644); err != nil {
		t.Fatal(err)
	}
	newBlob := func() {
		b := make([]byte, 8<<20)
		_, _ = rand.Read(b)
		if err := os.WriteFile(filepath.Join(u.dir, "blob"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ref := hp.info.Registry + "/" + uname + "/bench:latest"
	timed := func(local bool, args ...string) time.Duration {
		u.env = nil
		if local {
			u.env = []string{"BUILDKIT_HOST=" + strings.TrimPrefix(addr, "tcp://")}
		}
		start := time.Now()
		u.mustRun(append([]string{"build", "-f", "Dockerfile", "--tag", ref}, args...)...)
		return time.Since(start)
	}
	// One build each first: the certificate fetched, the daemons' first-use costs paid.
	newBlob()
	timed(false)
	timed(true)
	res := map[string][]time.Duration{}
	for i := 0; i < rounds; i++ {
		newBlob()
		res["hosted cold"] = append(res["hosted cold"], timed(false, "--no-cache"))
		res["local cold"] = append(res["local cold"], timed(true, "--no-cache"))
		res["hosted warm"] = append(res["hosted warm"], timed(false))
		res["local warm"] = append(res["local warm"], timed(true))
	}
	med := func(k string) time.Duration {
		d := append([]time.Duration(nil), res[k]...)
		sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
		return d[len(d)/2]
	}
	for _, k := range []string{"hosted cold", "local cold", "hosted warm", "local warm"} {
		t.Logf("%-11s median %v (all %v)", k, med(k).Round(time.Millisecond), res[k])
	}
	t.Logf("hosted/local: cold %.2f×, warm %.2f×", med("hosted cold").Seconds()/med("local cold").Seconds(),
		med("hosted warm").Seconds()/med("local warm").Seconds())
}

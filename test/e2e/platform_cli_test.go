//go:build integration

package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/devtool/devtool/internal/errs"
	"github.com/devtool/devtool/internal/platform/api"
	"github.com/devtool/devtool/internal/platform/client"
)

// platformFiles are what `make platform-up` leaves for tests: the URL, the CA and the admin's token.
type platformFiles struct{ url, caFile, adminToken string }

// findPlatform reads /tmp/devtool-cluster/platform-{url,ca.crt,admin-token} (DEVTOOL_TEST_PLATFORM_DIR
// replaces the folder); it skips, saying why, when they are missing (fails under CI=true).
func findPlatform(t testing.TB) platformFiles {
	t.Helper()
	dir := os.Getenv("DEVTOOL_TEST_PLATFORM_DIR")
	if dir == "" {
		dir = "/tmp/devtool-cluster"
	}
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			msg := "no platform installed (run 'make platform-up'): " + err.Error()
			if os.Getenv("CI") == "true" {
				t.Fatal(msg)
			}
			t.Skip(msg)
		}
		return strings.TrimSpace(string(b))
	}
	return platformFiles{url: read("platform-url"), caFile: filepath.Join(dir, "platform-ca.crt"), adminToken: read("platform-admin-token")}
}

// platformUser is one platform user's machine: its own home and kubeconfig, no admin credentials.
type platformUser struct {
	t          testing.TB
	home, dir  string
	kubeconfig string
	env        []string
	timeout    time.Duration // of one command (default 3 minutes)
}

func newPlatformUser(t testing.TB) *platformUser {
	home := t.TempDir()
	return &platformUser{t: t, home: home, dir: t.TempDir(), kubeconfig: filepath.Join(home, ".kube", "config")}
}

func (u *platformUser) run(args ...string) (string, string, error) {
	u.t.Helper()
	timeout := u.timeout
	if timeout == 0 {
		timeout = 3 * time.Minute
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, devtoolBin, args...)
	cmd.Dir = u.dir
	cmd.Env = append([]string{"HOME=" + u.home, "DEVTOOL_HOME=" + u.home, "KUBECONFIG=" + u.kubeconfig,
		"PATH=" + os.Getenv("PATH"), "NO_COLOR=1"}, u.env...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	u.t.Logf("$ devtool %s\n%s%s", strings.Join(args, " "), out.String(), errOut.String())
	return out.String(), errOut.String(), err
}

func (u *platformUser) mustRun(args ...string) (string, string) {
	u.t.Helper()
	out, errOut, err := u.run(args...)
	if err != nil {
		u.t.Fatalf("devtool %s: %v\n%s", strings.Join(args, " "), err, errOut)
	}
	return out, errOut
}

func (u *platformUser) kubectl(args ...string) (string, error) {
	u.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "kubectl", append([]string{"--kubeconfig", u.kubeconfig}, args...)...)
	cmd.Env = []string{"HOME=" + u.home, "PATH=" + os.Getenv("PATH")}
	out, err := cmd.CombinedOutput()
	u.t.Logf("$ kubectl %s\n%s", strings.Join(args, " "), out)
	return string(out), err
}

func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	return -1
}

// TestPlatformCLI drives the built CLI against the platform on the local cluster as two users
// would: token login, namespaces, sharing, kubeconfig with kubectl, CI variables, a revoked token.
func TestPlatformCLI(t *testing.T) {
	p := findPlatform(t)
	ca, err := os.ReadFile(p.caFile)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	admin, err := client.New(client.Options{URL: p.url, Token: p.adminToken, CA: ca})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	suffix := make([]byte, 3)
	_, _ = rand.Read(suffix)
	s := hex.EncodeToString(suffix)
	aliceName, bobName := "alice-"+s, "bob-"+s
	users := map[string]string{}
	for _, n := range []string{aliceName, bobName} {
		r, err := admin.CreateUser(ctx, api.CreateUserRequest{Name: n})
		if err != nil {
			t.Fatalf("creating %s: %v", n, err)
		}
		users[n] = r.Token
		removePlatformUserAfter(t, admin, n)
	}
	alice, bob := newPlatformUser(t), newPlatformUser(t)

	// Login with --token and the CA file; the context is saved with the user and the namespace.
	_, errOut := alice.mustRun("context", "use", p.url, "--token", users[aliceName], "--ca-cert", p.caFile)
	if !strings.Contains(errOut, "as "+aliceName) {
		t.Errorf("login output: %s", errOut)
	}
	out, _ := alice.mustRun("context", "show")
	if strings.Contains(out, users[aliceName]) || !strings.Contains(out, `"isDevtool": true`) || !strings.Contains(out, `"token": "redacted"`) {
		t.Errorf("context show: %s", out)
	}
	bob.mustRun("context", p.url, "--token", users[bobName], "--ca-cert", p.caFile)

	// Namespaces: create (selects it, idempotent), list with * on the current.
	shop := "shop-" + s
	alice.mustRun("namespace", "create", shop)
	alice.mustRun("namespace", "create", shop)
	out, _ = alice.mustRun("namespace", "list")
	if !strings.Contains(out, shop+" *") || !strings.Contains(out, aliceName) || strings.Contains(out, bobName) {
		t.Errorf("namespace list:\n%s", out)
	}

	// kubeconfig, then kubectl works in her namespace and is refused in bob's.
	alice.mustRun("kubeconfig")
	if out, err := alice.kubectl("get", "pods", "-n", shop); err != nil {
		t.Errorf("kubectl in her namespace: %v\n%s", err, out)
	}
	if out, err := alice.kubectl("get", "pods", "-n", bobName); err == nil || !strings.Contains(out, "Forbidden") && !strings.Contains(out, "forbidden") {
		t.Errorf("kubectl in bob's namespace: %v\n%s", err, out)
	}

	// Sharing: bob sees shop once shared, not after unshare.
	alice.mustRun("namespace", "share", shop, bobName, "--role", "viewer")
	if out, _ := bob.mustRun("namespace", "list"); !strings.Contains(out, shop) {
		t.Errorf("bob's list after share:\n%s", out)
	}
	alice.mustRun("namespace", "unshare", shop, bobName)
	if out, _ := bob.mustRun("namespace", "list"); strings.Contains(out, shop) {
		t.Errorf("bob's list after unshare:\n%s", out)
	}

	// CI: DEVTOOL_URL and DEVTOOL_TOKEN with no saved context at all.
	ci := newPlatformUser(t)
	ci.env = []string{api.EnvURL + "=" + p.url, api.EnvToken + "=" + users[aliceName], api.EnvCACert + "=" + p.caFile, api.EnvNamespace + "=" + shop, "CI=true"}
	if out, _ := ci.mustRun("namespace", "list"); !strings.Contains(out, shop+" *") {
		t.Errorf("CI namespace list:\n%s", out)
	}

	// delete runs the destroy of every environment deployed there, their output seen: the current
	// folder's from its devtool.yml, another folder's from the devtool.yml its state recorded.
	elsewhere := t.TempDir()
	if err := os.WriteFile(filepath.Join(elsewhere, "devtool.yml"), []byte("name: marker\ndeploy:\n  commands:\n    - name: hello\n      command: echo deployed-$DEVTOOL_NAMESPACE\ndestroy:\n  - name: bye\n    command: echo destroyed-$DEVTOOL_NAME-in-$DEVTOOL_NAMESPACE\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	alice.dir = elsewhere
	alice.mustRun("deploy")
	alice.dir = t.TempDir()
	if err := os.WriteFile(filepath.Join(alice.dir, "devtool.yml"), []byte("name: here\ndeploy:\n  commands:\n    - echo deployed\ndestroy:\n  - echo destroyed-$DEVTOOL_NAME-in-$DEVTOOL_NAMESPACE\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	alice.mustRun("deploy")
	if err := os.RemoveAll(elsewhere); err != nil { // the other project is not on this machine any more
		t.Fatal(err)
	}
	_, errOut = alice.mustRun("namespace", "delete", shop)
	for _, want := range []string{"destroyed-marker-in-" + shop, "destroyed-here-in-" + shop, "Namespace " + shop + " is being deleted"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("namespace delete output has no %q:\n%s", want, errOut)
		}
	}

	// A revoked token: refused at once, exit 4.
	ac, _ := client.New(client.Options{URL: p.url, Token: users[aliceName], CA: ca})
	defer ac.Close()
	id, _ := client.TokenID(users[aliceName])
	if err := ac.RevokeToken(ctx, id); err != nil {
		t.Fatal(err)
	}
	_, errOut, err = alice.run("namespace", "list")
	if exitCode(err) != errs.ExitAuth || !strings.Contains(errOut, "--token") {
		t.Errorf("revoked token: exit %d\n%s", exitCode(err), errOut)
	}
}

//go:build integration

package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devtool/devtool/internal/platform/api"
	"github.com/devtool/devtool/internal/platform/client"
	"github.com/devtool/devtool/internal/testcluster"
)

// adminClient is the platform's API client as its admin.
func (p platformFiles) adminClient(t *testing.T) *client.Client {
	t.Helper()
	ca, err := os.ReadFile(p.caFile)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(client.Options{URL: p.url, Token: p.adminToken, CA: ca})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// userClient is the API client of a user's token.
func (p platformFiles) userClient(t *testing.T, token string) *client.Client {
	t.Helper()
	ca, err := os.ReadFile(p.caFile)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(client.Options{URL: p.url, Token: token, CA: ca})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func randomSuffix() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// TestPlatformStoredSecrets is issue 19's stored secrets end to end: the platform on the local
// cluster stores a user's, a namespace's and an admin-wide secret; the built CLI, logged in as the
// user, deploys a devtool.yml whose Compose file names them as ${NAME} and whose deploy and destroy
// commands read them from their environment. The deployed Deployment holds the stored values where
// the shell and .env do not define the name, the shell's and .env's values where they do (spec A6),
// and no output of deploy (also --dry-run and --loglevel debug) or destroy holds a stored value.
func TestPlatformStoredSecrets(t *testing.T) {
	p := findPlatform(t)
	c := testcluster.Connect(t)
	ctx := context.Background()
	admin := p.adminClient(t)
	s := randomSuffix()
	name := "sec-" + s
	r, err := admin.CreateUser(ctx, api.CreateUserRequest{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	removePlatformUserAfter(t, admin, name)
	user := p.userClient(t, r.Token)
	up := strings.ToUpper(s)
	vars := map[string]string{ // name in the files -> stored value
		"STORED_" + up: "user-secret-" + s + "-Qx7",
		"NSSEC_" + up:  "namespace-secret-" + s + "-Zp3",
		"ADMSEC_" + up: "admin-secret-" + s + "-Wk9",
		"DOTENV_" + up: "stored-loses-to-dotenv-" + s,
		"SHELL_" + up:  "stored-loses-to-shell-" + s,
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(user.SetSecret(ctx, "", "", "STORED_"+up, vars["STORED_"+up]))
	must(user.SetSecret(ctx, "", "", "DOTENV_"+up, vars["DOTENV_"+up]))
	must(user.SetSecret(ctx, "", "", "SHELL_"+up, vars["SHELL_"+up]))
	must(user.SetSecret(ctx, api.ScopeNamespace, name, "NSSEC_"+up, vars["NSSEC_"+up]))
	must(admin.SetSecret(ctx, api.ScopeAdmin, "", "ADMSEC_"+up, vars["ADMSEC_"+up]))
	t.Cleanup(func() { _ = admin.DeleteSecret(context.Background(), api.ScopeAdmin, "", "ADMSEC_"+up) })

	u := newPlatformUser(t)
	u.mustRun("context", "use", p.url, "--token", r.Token, "--ca-cert", p.caFile)
	u.env = []string{"SHELL_" + up + "=shell-wins-" + s}
	write := func(file, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(u.dir, file), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(".env", "DOTENV_"+up+"=dotenv-wins-"+s+"\n")
	write("compose.yml", `services:
  app:
    image: docker.io/library/busybox:local
    command: ["sh", "-c", "exec sleep 3600"]
    stop_grace_period: 1s
    environment:
      FROM_USER: ${STORED_`+up+`}
      FROM_NAMESPACE: ${NSSEC_`+up+`}
      FROM_ADMIN: ${ADMSEC_`+up+`}
      FROM_DOTENV: ${DOTENV_`+up+`}
      FROM_SHELL: ${SHELL_`+up+`}
`)
	write("devtool.yml", `name: secrets
deploy:
  commands:
    - name: show
      command: echo "deploy sees $STORED_`+up+` and $NSSEC_`+up+`"
  compose: compose.yml
destroy:
  - name: show
    command: echo "destroy sees $STORED_`+up+` and $ADMSEC_`+up+`"
`)
	var outputs []string
	run := func(args ...string) (string, string) {
		t.Helper()
		out, errOut := u.mustRun(args...)
		outputs = append(outputs, out, errOut)
		return out, errOut
	}
	run("deploy", "--dry-run")
	_, deployErr := run("deploy", "--wait", "--timeout", "3m", "--loglevel", "debug")
	if !strings.Contains(deployErr, "deploy sees *** and ***") {
		t.Errorf("the deploy command did not see the stored secrets (masked):\n%s", deployErr)
	}
	d, err := c.Clientset.AppsV1().Deployments(name).Get(ctx, "app", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, e := range d.Spec.Template.Spec.Containers[0].Env {
		got[e.Name] = e.Value
	}
	want := map[string]string{
		"FROM_USER": vars["STORED_"+up], "FROM_NAMESPACE": vars["NSSEC_"+up], "FROM_ADMIN": vars["ADMSEC_"+up],
		"FROM_DOTENV": "dotenv-wins-" + s, "FROM_SHELL": "shell-wins-" + s,
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	_, destroyErr := run("destroy", "--wait")
	if !strings.Contains(destroyErr, "destroy sees *** and ***") {
		t.Errorf("the destroy command did not see the stored secrets (masked):\n%s", destroyErr)
	}
	for _, o := range outputs {
		for k, v := range vars {
			if strings.Contains(o, v) {
				t.Errorf("the value of %s was printed:\n%s", k, o)
			}
		}
	}
}

//go:build integration

package e2e

import (
	"context"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devtool/devtool/internal/errs"
	"github.com/devtool/devtool/internal/platform/api"
	"github.com/devtool/devtool/internal/platform/client"
	"github.com/devtool/devtool/internal/testcluster"
)

// TestPlatformPasswordChange: `devtool context password` through the built CLI against the
// installed platform: from a pipe (a wrong current password refused, nothing changed; then the
// right one), on a terminal (asked without echo, the new one twice, a mismatch refused), and
// without a terminal or with CI nothing is asked (exit 2). The old password stops working, the new
// one logs in.
func TestPlatformPasswordChange(t *testing.T) {
	p := findPlatform(t)
	ca, err := os.ReadFile(p.caFile)
	if err != nil {
		t.Fatal(err)
	}
	admin, err := client.New(client.Options{URL: p.url, Token: p.adminToken, CA: ca})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	c := testcluster.Connect(t)
	user := "pw-" + randomSuffix()
	const first, second, third = "first long password", "second long password", "third long password"
	if _, err := admin.CreateUser(context.Background(), api.CreateUserRequest{Name: user, Password: first}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = admin.DeleteUser(context.Background(), user)
		_ = c.Clientset.CoreV1().Namespaces().Delete(context.Background(), user, metav1.DeleteOptions{})
	})
	u := newPlatformUser(t)
	run := func(stdin string, env []string, args ...string) (string, error) {
		cmd := exec.Command(devtoolBin, args...)
		cmd.Dir = u.dir
		cmd.Env = append([]string{"HOME=" + u.home, "DEVTOOL_HOME=" + u.home, "PATH=" + os.Getenv("PATH"), "NO_COLOR=1", "BROWSER=/bin/false"}, env...)
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		t.Logf("$ devtool %s\n%s", strings.Join(args, " "), out)
		return string(out), err
	}
	login := func(password string) error {
		_, err := run(password+"\n", nil, "context", "use", p.url, "--ca-cert", p.caFile, "--user", user, "--password-stdin")
		return err
	}
	if err := login(first); err != nil {
		t.Fatalf("login with the first password: %v", err)
	}

	// From a pipe: a wrong current password changes nothing.
	if out, err := run("not it\n"+second+"\n", nil, "context", "password", "--password-stdin"); err == nil || !strings.Contains(out, "current password is wrong") {
		t.Fatalf("wrong current password: exit %d\n%s", exitCode(err), out)
	}
	if err := login(first); err != nil {
		t.Fatalf("the first password after a refused change: %v", err)
	}
	if out, err := run(first+"\n"+second+"\n", nil, "context", "password", "--password-stdin"); err != nil || !strings.Contains(out, "Password changed") {
		t.Fatalf("change from a pipe: %v\n%s", err, out)
	}
	if err := login(first); exitCode(err) != errs.ExitAuth {
		t.Fatalf("the old password after the change: exit %d", exitCode(err))
	}
	if err := login(second); err != nil {
		t.Fatalf("the new password: %v", err)
	}

	// Nothing is asked without a terminal or with CI, and one line is not enough.
	for _, env := range [][]string{nil, {"CI=true"}} {
		if out, err := run("", env, "context", "password"); exitCode(err) != errs.ExitUsage || !strings.Contains(out, "--password-stdin") {
			t.Errorf("no terminal, env %v: exit %d\n%s", env, exitCode(err), out)
		}
	}
	if out, err := run(second+"\n", nil, "context", "password", "--password-stdin"); exitCode(err) != errs.ExitUsage {
		t.Errorf("one line on stdin: exit %d\n%s", exitCode(err), out)
	}

	// On a terminal: asked without echo; a mismatch is refused, then the change is made.
	answer := func(r *ptyRun, prompt *regexp.Regexp, text string) {
		t.Helper()
		r.waitFor(t, prompt, time.Minute)
		if _, err := r.tty.Write([]byte(text + "\r")); err != nil {
			t.Fatal(err)
		}
	}
	r := u.startOnPTY("context", "password")
	answer(r, regexp.MustCompile(`Current password at \S+`), second)
	answer(r, regexp.MustCompile(`New password: `), third)
	answer(r, regexp.MustCompile(`New password again: `), third+"x")
	if err, out := r.wait(t, time.Minute); exitCode(err) != errs.ExitUsage || !strings.Contains(out, "differ") {
		t.Fatalf("mismatched new passwords: exit %d\n%s", exitCode(err), out)
	}
	r = u.startOnPTY("context", "password")
	answer(r, regexp.MustCompile(`Current password at \S+`), second)
	answer(r, regexp.MustCompile(`New password: `), third)
	answer(r, regexp.MustCompile(`New password again: `), third)
	err, out := r.wait(t, time.Minute)
	if err != nil || !strings.Contains(out, "Password changed") {
		t.Fatalf("change on a terminal: %v\n%s", err, out)
	}
	for _, pw := range []string{second, third} {
		if strings.Contains(out, pw) {
			t.Fatalf("a password was echoed:\n%s", out)
		}
	}
	if err := login(third); err != nil {
		t.Fatalf("the password set on a terminal: %v", err)
	}
}

package pipeline

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/devtool/devtool/internal/contexts"
	"github.com/devtool/devtool/internal/errs"
	"github.com/devtool/devtool/internal/platform/api"
	"github.com/devtool/devtool/internal/platform/client/clienttest"
)

// TestDeployInterruptedWhileStarting: Ctrl-C while the platform is answering the run's POST leaves
// the run's state unknown to the CLI: it says so and how to look, within a second, and exits with
// the interruption.
func TestDeployInterruptedWhileStarting(t *testing.T) {
	fk := clienttest.New(t)
	alice := fk.AddUser("alice", false)
	started, release := make(chan struct{}, 1), make(chan struct{})
	t.Cleanup(func() { close(release) }) // before the server closes
	inner := fk.Server.Config.Handler
	fk.Server.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/pipelines") {
			started <- struct{}{}
			select { // the platform is slow to answer: the run may or may not be recorded
			case <-r.Context().Done():
			case <-release:
			}
			// never an answer: returning would send an empty 200, which a loaded
			// machine can deliver before the client's cancellation closes the connection
			panic(http.ErrAbortHandler)
		}
		inner.ServeHTTP(w, r)
	})
	f, errOut := factory(t, nil)
	if err := contexts.SavePlatform(contexts.NewStore(f.Getenv("DEVTOOL_HOME")), &contexts.Context{Name: fk.URL(), Token: alice,
		Certificate: string(fk.CAPEM), Username: "alice", Namespace: "alice"}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-started
		cancel()
	}()
	cmd := NewDeployCmd(f, api.ActionDeploy, nil)
	cmd.SetArgs([]string{"--repository", "https://git.example.com/a/shop.git", "--wait"})
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	var err error
	select {
	case err = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the interrupted deploy did not return")
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want the interruption", err)
	}
	if want := "devtool pipeline logs --name shop --namespace alice"; !strings.Contains(errOut.String(), "may have started") || !strings.Contains(errOut.String(), want) {
		t.Fatalf("stderr %q: want it to say the run may have started and %q", errOut.String(), want)
	}
}

// TestLogsNeedsANamespace: a platform context without a namespace (DEVTOOL_URL and DEVTOOL_TOKEN,
// no DEVTOOL_NAMESPACE) and no --namespace is a usage error naming the flag, before any request
// (as for deploy).
func TestLogsNeedsANamespace(t *testing.T) {
	fk := clienttest.New(t)
	alice := fk.AddUser("alice", false)
	ca := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(ca, fk.CAPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	f, _ := factory(t, map[string]string{api.EnvURL: fk.URL(), api.EnvToken: alice, api.EnvCACert: ca})
	seen := len(fk.RequestsSeen())
	for _, cmd := range []*cobra.Command{NewLogsCmd(f, nil), NewDeployCmd(f, api.ActionDestroy, nil)} {
		err := execute(cmd, "--name", "shop")
		if err == nil || !strings.Contains(err.Error(), "--namespace") || errs.ExitCode(err) != errs.ExitUsage {
			t.Fatalf("%s: %v (exit %d), want a usage error naming --namespace", cmd.Name(), err, errs.ExitCode(err))
		}
	}
	for _, r := range fk.RequestsSeen()[seen:] {
		if strings.Contains(r, "pipelines") {
			t.Fatalf("a request was sent: %s", r)
		}
	}
}

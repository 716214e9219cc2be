package preview

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/devtool/devtool/internal/cmdutil"
	"github.com/devtool/devtool/internal/contexts"
	"github.com/devtool/devtool/internal/iostreams"
	"github.com/devtool/devtool/internal/platform/api"
	"github.com/devtool/devtool/internal/platform/client/clienttest"
)

// interrupted runs the command that build makes with args against a platform whose routes are
// answered by route (false: the fake's own answer), cancelling its context as soon as a request
// satisfies cancelOn; it returns the command's stderr and error.
func interrupted(t *testing.T, build func(*cmdutil.Factory) *cobra.Command, args []string,
	route func(w http.ResponseWriter, r *http.Request, release <-chan struct{}) bool, cancelOn func(*http.Request) bool) (string, error) {
	t.Helper()
	fk := clienttest.New(t)
	alice := fk.AddUser("alice", false)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) }) // before the server closes
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	inner := fk.Server.Config.Handler
	fk.Server.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if cancelOn(r) {
			cancel()
		}
		if !route(w, r, release) {
			inner.ServeHTTP(w, r)
		}
	})
	home := t.TempDir()
	env := map[string]string{"DEVTOOL_HOME": filepath.Join(home, "devtool"), "HOME": home}
	if err := contexts.SavePlatform(contexts.NewStore(env["DEVTOOL_HOME"]), &contexts.Context{Name: fk.URL(), Token: alice,
		Certificate: string(fk.CAPEM), Username: "alice", Namespace: "alice"}); err != nil {
		t.Fatal(err)
	}
	ios, _, _, errOut := iostreams.Test()
	cmd := build(&cmdutil.Factory{IOStreams: ios, Getenv: func(k string) string { return env[k] }, WorkDir: t.TempDir()})
	cmd.SetArgs(args)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	select {
	case err := <-done:
		return errOut.String(), err
	case <-time.After(20 * time.Second):
		t.Fatal("the interrupted command did not return")
	}
	return "", nil
}

// hangOn is a route that never answers the requests match takes (a platform slow to answer): the
// request ends, without an answer, when the client gives up or the test ends.
func hangOn(match func(*http.Request) bool) func(http.ResponseWriter, *http.Request, <-chan struct{}) bool {
	return func(w http.ResponseWriter, r *http.Request, release <-chan struct{}) bool {
		if !match(r) {
			return false
		}
		select {
		case <-r.Context().Done():
		case <-release:
		}
		// Returning would send an empty 200 (CI once saw the destroy take it for
		// the platform's acceptance): the connection is dropped instead.
		panic(http.ErrAbortHandler)
	}
}

// TestInterruptedSaysWhatIsLeft: Ctrl-C while the platform answers a preview deploy or destroy, or
// while destroy waits for the namespace to go, returns the interruption and says what may go on
// and how to look at it.
func TestInterruptedSaysWhatIsLeft(t *testing.T) {
	t.Run("deploy", func(t *testing.T) {
		stderr, err := interrupted(t, func(f *cmdutil.Factory) *cobra.Command { return NewDeployCmd(f, nil) },
			[]string{"pr-1", "--repository", "https://git.example.com/a/shop.git", "--branch", "main", "--wait"},
			hangOn(func(r *http.Request) bool { return r.Method == http.MethodPost && r.URL.Path == api.Prefix+"/previews" }),
			func(r *http.Request) bool { return r.Method == http.MethodPost })
		if !errors.Is(err, context.Canceled) || !strings.Contains(stderr, "may have started") || !strings.Contains(stderr, "devtool pipeline logs --name pr-1 --namespace pr-1 -f") {
			t.Fatalf("err %v, stderr %q", err, stderr)
		}
	})
	t.Run("destroy request", func(t *testing.T) {
		stderr, err := interrupted(t, func(f *cmdutil.Factory) *cobra.Command { return NewDestroyCmd(f, nil) }, []string{"pr-1"},
			hangOn(func(r *http.Request) bool { return r.Method == http.MethodDelete }),
			func(r *http.Request) bool { return r.Method == http.MethodDelete })
		if !errors.Is(err, context.Canceled) || !strings.Contains(stderr, "destroy may have started") || !strings.Contains(stderr, "devtool preview list") {
			t.Fatalf("err %v, stderr %q", err, stderr)
		}
	})
	t.Run("destroy waiting for the namespace", func(t *testing.T) {
		pv := api.Preview{Name: "pr-1", Namespace: "pr-1", Scope: api.PreviewPersonal, Status: api.PreviewDestroying}
		stderr, err := interrupted(t, func(f *cmdutil.Factory) *cobra.Command { return NewDestroyCmd(f, nil) }, []string{"pr-1"},
			func(w http.ResponseWriter, r *http.Request, _ <-chan struct{}) bool {
				if strings.HasPrefix(r.URL.Path, api.Prefix+"/previews/pr-1") {
					w.Header().Set("Content-Type", "application/json")
					if r.Method == http.MethodDelete {
						w.WriteHeader(http.StatusAccepted)
					}
					_ = json.NewEncoder(w).Encode(pv) // still there
					return true
				}
				return false
			},
			func(r *http.Request) bool {
				return r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, api.Prefix+"/previews/pr-1")
			})
		if !errors.Is(err, context.Canceled) || !strings.Contains(stderr, "goes on removing preview pr-1") {
			t.Fatalf("err %v, stderr %q", err, stderr)
		}
	})
}

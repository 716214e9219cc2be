package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/devtool/devtool/internal/cmdutil"
	"github.com/devtool/devtool/internal/errs"
	"github.com/devtool/devtool/internal/iostreams"
	"github.com/devtool/devtool/internal/platform/api"
	"github.com/devtool/devtool/internal/platform/runspec"
)

// factory has a kubeconfig with a plain Kubernetes context and an empty devtool home.
func factory(t *testing.T, extra map[string]string) (*cmdutil.Factory, *bytes.Buffer) {
	t.Helper()
	dir := t.TempDir()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["local"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:1"}
	cfg.AuthInfos["me"] = &clientcmdapi.AuthInfo{Token: "t"}
	cfg.Contexts["kube-a"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: "me", Namespace: "web"}
	cfg.CurrentContext = "kube-a"
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, kubeconfig); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"KUBECONFIG": kubeconfig, "DEVTOOL_HOME": filepath.Join(dir, "home"), "HOME": dir}
	for k, v := range extra {
		env[k] = v
	}
	ios, _, _, errOut := iostreams.Test()
	return &cmdutil.Factory{IOStreams: ios, Getenv: func(k string) string { return env[k] }, WorkDir: dir}, errOut
}

func execute(cmd *cobra.Command, args ...string) error {
	cmd.SetArgs(args)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	return cmd.ExecuteContext(context.Background())
}

func TestDeployFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string // "" = accepted
	}{
		{[]string{"--repository", "https://git.example.com/a/shop.git", "--var", "MODE=test", "--timeout", "90s", "--wait"}, ""},
		{[]string{"--repository", "git@github.com:a/b.git"}, "must be an https:// URL"},
		{[]string{"--repository", "https://tok@github.com/a/b"}, "store the token as the secret GIT_TOKEN_GITHUB_COM"},
		{[]string{"--timeout", "0s"}, "--timeout must be between 1s and 24h"},
		{[]string{"--var", "NOEQUALS"}, "expected NAME=value"},
		{[]string{"--var", "DEVTOOL_NAMESPACE=x"}, "reserved"},
		{[]string{"--name", "Bad_Name"}, "--name"},
		{[]string{"--branch", "a..b"}, "not a valid branch name"},
		{[]string{"--file", "../../etc/passwd"}, "leaves the repository"},
		{[]string{"--namespace", "Bad_NS"}, `--namespace "Bad_NS"`},
		{[]string{"--repository", "file:///etc"}, "must be an https:// URL"},
	} {
		f, _ := factory(t, nil)
		var got *DeployOptions
		err := execute(NewDeployCmd(f, api.ActionDeploy, func(_ context.Context, o *DeployOptions) error { got = o; return nil }), c.args...)
		if c.want == "" {
			if err != nil || got == nil || got.Timeout != 90*time.Second || !got.Wait || got.Vars[0] != "MODE=test" {
				t.Errorf("%v: %v %+v", c.args, err, got)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.want) || errs.ExitCode(err) != errs.ExitUsage {
			t.Errorf("%v: %v (exit %d), want a usage error saying %q", c.args, err, errs.ExitCode(err), c.want)
		}
	}
	f, errOut := factory(t, nil)
	if err := execute(NewDeployCmd(f, api.ActionDeploy, func(context.Context, *DeployOptions) error { return nil }), "--repository", "http://10.0.0.5/a.git"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(errOut.String(), "plain HTTP") {
		t.Errorf("no warning for http: %q", errOut)
	}
	// destroy has --volumes, no --repository
	f, _ = factory(t, nil)
	if err := execute(NewDeployCmd(f, api.ActionDestroy, nil), "--repository", "https://x/y"); err == nil || !strings.Contains(err.Error(), "unknown flag") {
		t.Errorf("destroy --repository: %v", err)
	}
}

func TestNeedsLogin(t *testing.T) {
	// a plain Kubernetes context: exit 4, saying why and how to log in
	f, _ := factory(t, nil)
	err := execute(NewDeployCmd(f, api.ActionDeploy, nil), "--repository", "https://git.example.com/a/b.git")
	if errs.ExitCode(err) != errs.ExitAuth || !strings.Contains(err.Error(), "plain Kubernetes context") ||
		!strings.Contains(errs.Hint(err), "devtool context use https://<platform> --token") {
		t.Fatalf("plain context: %v (exit %d, hint %q)", err, errs.ExitCode(err), errs.Hint(err))
	}
	// DEVTOOL_URL without a token
	f, _ = factory(t, map[string]string{api.EnvURL: "https://devtool.example.com"})
	err = execute(NewLogsCmd(f, nil), "--name", "shop")
	if errs.ExitCode(err) != errs.ExitAuth || !strings.Contains(err.Error(), "has no API token") {
		t.Fatalf("no token: %v (exit %d)", err, errs.ExitCode(err))
	}
}

func TestResult(t *testing.T) {
	now := time.Now()
	later := now.Add(42 * time.Second)
	r := &api.PipelineRun{Name: "shop", Number: 3, Action: api.ActionDeploy, Created: now, Finished: &later}
	r.Phase = api.PhaseSucceeded
	if err := cmdutil.RunResult(r); err != nil {
		t.Fatal(err)
	}
	r.Phase, r.FailedStep, r.Message = api.PhaseFailed, api.StepDeploy, "run | boom\nError: deploying shop: command failed"
	if err := cmdutil.RunResult(r); err == nil || !strings.Contains(err.Error(), "pipeline shop (run #3) failed in step deploy in 42s; its last output:\n  run | boom\n  Error:") {
		t.Fatalf("failed: %v", err)
	}
	r.Phase, r.Message = api.PhaseTimedOut, "the run timed out: it did not finish within 5m0s (--timeout)"
	if err := cmdutil.RunResult(r); err == nil || !strings.Contains(err.Error(), "timed out in 42s: the run timed out: it did not finish within 5m0s (--timeout)") {
		t.Fatalf("timed out: %v", err)
	}
}

func TestWriteResultFits(t *testing.T) {
	path := filepath.Join(t.TempDir(), "termination-log")
	tail := strings.Repeat("a line of output that goes on\n", 400)
	if err := writeResult(path, runspec.Result{Step: "deploy", Commit: strings.Repeat("c", 40), Tail: tail}); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	var got runspec.Result
	if len(b) > runspec.MaxResultBytes || json.Unmarshal(b, &got) != nil || got.Step != "deploy" ||
		!strings.HasPrefix(got.Tail, "a line") || !strings.HasSuffix(tail, got.Tail) {
		t.Fatalf("%d bytes: %q", len(b), b[:min(len(b), 200)])
	}
}

func TestLogsFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--name", "shop", "-n", "web", "--run", "3"}, ""},
		{[]string{"--name", "shop", "-n", "Web!"}, "--namespace"},
		{[]string{"--name", "shop", "--run", "0"}, "--run"},
	} {
		f, _ := factory(t, nil)
		err := execute(NewLogsCmd(f, func(context.Context, *LogsOptions) error { return nil }), c.args...)
		if c.want == "" {
			if err != nil {
				t.Errorf("%v: %v", c.args, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.want) || errs.ExitCode(err) != errs.ExitUsage {
			t.Errorf("%v: %v, want a usage error naming %s", c.args, err, c.want)
		}
	}
}

// Package runner is what a pipeline run's Job executes (`devtool pipeline runner`): it clones the
// repository with go-git (https with the token the platform handed it, http without credentials;
// never ssh, never a prompt), writes a kubeconfig with the triggering user's token, and runs
// `devtool deploy --wait` or `devtool destroy` in the clone, bounded by the run's deadline. Its
// output is the run's log: step lines ("==> ..."), git's progress and devtool's output, with
// stored secrets and tokens masked. It returns a runspec.Result, which the command leaves as the
// container's termination message for the platform.
//
// It never exits or prints beyond Out; the command package reads the files and writes the result.
package runner

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/devtool/devtool/internal/platform/api"
	"github.com/devtool/devtool/internal/platform/runspec"
	"github.com/devtool/devtool/internal/safefile"
)

// Options are the run and the runner's surroundings.
type Options struct {
	Spec runspec.Spec
	// CA is trusted for https clones besides the system's roots (PEM; may be empty); CAFile holds
	// it for the runner's git (DEVTOOL_RUNNER_CA_FILE).
	CA     []byte
	CAFile string
	// APIServer is the Kubernetes API's address (https://host:port), KubeCAFile its CA file and
	// TokenFile the user's token.
	APIServer, KubeCAFile, TokenFile string
	// BuilderCert, BuilderKey and BuilderCA are the files of the hosted BuildKit's client
	// certificate, its key and its CA (used when Spec.Builder is set).
	BuilderCert, BuilderKey, BuilderCA string
	// WorkDir receives the clone (WorkDir/src), the kubeconfig and the Docker config.
	WorkDir string
	// Devtool is the devtool binary that deploys (this one).
	Devtool string
	// Environ is the environment the deploy starts from (PATH, HOME, ...).
	Environ []string
	Out     io.Writer
	Now     func() time.Time
	// Grace is how much before the deadline the runner stops by itself (default 10s), so it can
	// say which step timed out before the Job's deadline stops the pod.
	Grace time.Duration
}

// StepError is a failed step.
type StepError struct {
	Step string
	Err  error
}

func (e *StepError) Error() string { return e.Step + ": " + e.Err.Error() }
func (e *StepError) Unwrap() error { return e.Err }

// Run runs the pipeline. The Result is set whether or not it fails.
func Run(ctx context.Context, o Options) (res runspec.Result, err error) {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Grace == 0 {
		o.Grace = 10 * time.Second
	}
	s := o.Spec
	token, err := safefile.Read(o.TokenFile, 64<<10)
	if err != nil {
		return runspec.Result{Step: api.StepStart}, fmt.Errorf("reading the run's token: %w", err)
	}
	secrets := []string{strings.TrimSpace(string(token)), s.GitToken}
	for _, v := range s.Secrets {
		secrets = append(secrets, v)
	}
	mask := NewMasker(o.Out, secrets)
	defer mask.Flush()
	out := io.Writer(mask)
	start := o.Now()
	if !s.Deadline.IsZero() {
		// stop a little before the Job's deadline, to say which step timed out (at most a fifth
		// of a short run's time)
		grace := min(o.Grace, s.Deadline.Sub(start)/5)
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, s.Deadline.Add(-grace))
		defer cancel()
	}
	fmt.Fprintf(out, "==> %s of %s in namespace %s (run #%d, as %s)\n", s.Action, s.Name, s.Namespace, s.Number, s.User)

	// clone
	step := api.StepClone
	branch := s.Branch
	if branch == "" {
		branch = "the default branch"
	}
	fmt.Fprintf(out, "==> clone %s (%s)\n", s.Repository, branch)
	if strings.HasPrefix(s.Repository, "http://") {
		fmt.Fprintf(out, "warning: %s is plain HTTP: the clone is neither encrypted nor authenticated, and no credentials are sent\n", s.Repository)
	}
	src := filepath.Join(o.WorkDir, "src")
	t0 := o.Now()
	tail := &lineTail{max: 2 << 10}
	ca := o.CA
	if s.GitCA != "" {
		ca = append(append(append([]byte(nil), ca...), '\n'), s.GitCA...)
	}
	cl, err := Clone(ctx, CloneOptions{URL: s.Repository, Branch: s.Branch, Dir: src, CA: ca,
		Username: s.GitUsername, Token: s.GitToken, Progress: io.MultiWriter(out, tail)})
	res.CloneMillis = o.Now().Sub(t0).Milliseconds()
	if err != nil {
		fmt.Fprintf(out, "error: %v\n", err)
		mask.Flush()
		tail = &lineTail{max: 2 << 10}
		fmt.Fprint(tail, err.Error())
		return fail(ctx, res, step, tail, err, mask)
	}
	res.Commit, res.Branch = cl.Commit, cl.Branch
	fmt.Fprintf(out, "==> cloned %s (branch %s) in %.2fs\n", short(cl.Commit), cl.Branch, float64(res.CloneMillis)/1000)

	// deploy or destroy
	step = s.Action
	kubeconfig := filepath.Join(o.WorkDir, ".kube", "config")
	if err := writeKubeconfig(kubeconfig, o.APIServer, o.KubeCAFile, o.TokenFile, s.Namespace); err != nil {
		return fail(ctx, res, step, tail, err, mask)
	}
	dir := src
	if s.File != "" {
		dir = filepath.Dir(filepath.Join(src, filepath.FromSlash(s.File)))
	}
	hosted, err := hostedBuildEnv(o, s, strings.TrimSpace(string(token)))
	if err != nil {
		return fail(ctx, res, step, tail, err, mask)
	}
	if s.Builder != "" {
		fmt.Fprintf(out, "==> builder: the platform's build service (%s), images pushed to %s as %s\n", s.Builder, s.Registry, s.User)
	}
	env := buildEnv(o.Environ, kubeconfig, s, dotEnvNames(filepath.Join(dir, ".env")), hosted)
	if o.CAFile != "" {
		env = append(env, "DEVTOOL_RUNNER_CA_FILE="+o.CAFile)
	}
	remaining := time.Duration(0)
	if dl, ok := ctx.Deadline(); ok {
		remaining = time.Until(dl).Round(time.Second)
		if remaining < time.Second {
			return fail(ctx, res, step, tail, context.DeadlineExceeded, mask)
		}
	}
	args := deployArgs(s, remaining)
	fmt.Fprintf(out, "==> devtool %s\n", strings.Join(printable(args, s), " "))
	tail = &lineTail{max: 2 << 10}
	cmd := exec.CommandContext(ctx, o.Devtool, args...)
	cmd.Dir = src
	cmd.Env = env
	w := io.MultiWriter(out, tail)
	cmd.Stdout, cmd.Stderr = w, w
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) } // devtool cleans up (its lock) on SIGTERM
	cmd.WaitDelay = o.Grace / 2
	deployStart := o.Now()
	if err := cmd.Run(); err != nil {
		mask.Flush()
		if remaining > 0 && o.Now().Sub(deployStart) >= remaining-2*time.Second {
			// devtool stopped itself at its --timeout, which is the run's
			err = fmt.Errorf("%w (%v)", context.DeadlineExceeded, err)
		}
		return fail(ctx, res, step, tail, err, mask)
	}
	mask.Flush()
	fmt.Fprintf(out, "==> %s of %s done in %s\n", s.Action, s.Name, o.Now().Sub(start).Round(100*time.Millisecond))
	return res, nil
}

// fail fills the result of a failed step.
func fail(ctx context.Context, res runspec.Result, step string, tail *lineTail, err error, m *Masker) (runspec.Result, error) {
	res.Step = step
	res.Tail = string(m.Mask([]byte(tail.String())))
	if errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) {
		res.TimedOut = true
		err = fmt.Errorf("the run timed out during step %s", step)
	}
	return res, &StepError{Step: step, Err: err}
}

func short(commit string) string {
	if len(commit) > 12 {
		return commit[:12]
	}
	return commit
}

// deployArgs is devtool's command line for the run.
func deployArgs(s runspec.Spec, timeout time.Duration) []string {
	args := []string{s.Action, "--namespace", s.Namespace, "--name", s.Name}
	if s.File != "" {
		args = append(args, "--file", s.File)
	}
	if s.Action == api.ActionDeploy {
		args = append(args, "--wait")
	}
	if s.Action == api.ActionDestroy && s.Volumes {
		args = append(args, "--volumes")
	}
	if timeout > 0 {
		args = append(args, "--timeout", timeout.String())
	}
	names := make([]string, 0, len(s.Vars))
	for k := range s.Vars {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		args = append(args, "--var", k+"="+s.Vars[k])
	}
	return args
}

// printable is args with the variables' values left out.
func printable(args []string, s runspec.Spec) []string {
	out := append([]string(nil), args...)
	for i := 1; i < len(out); i++ {
		if out[i-1] == "--var" {
			name, _, _ := strings.Cut(out[i], "=")
			out[i] = name + "=…"
		}
	}
	return out
}

// buildEnv is the deploy's environment: the runner's own, the kubeconfig, no prompts, then the
// stored secrets the project's .env does not set (shell > .env > stored secrets; the run's
// variables come as --var, above all).
func buildEnv(base []string, kubeconfig string, s runspec.Spec, dotEnv map[string]bool, hosted []string) []string {
	set := map[string]string{}
	var order []string
	add := func(k, v string) {
		if _, ok := set[k]; !ok {
			order = append(order, k)
		}
		set[k] = v
	}
	for _, kv := range base {
		if k, v, ok := strings.Cut(kv, "="); ok {
			add(k, v)
		}
	}
	names := make([]string, 0, len(s.Secrets))
	for k := range s.Secrets {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if _, inShell := set[k]; !inShell && !dotEnv[k] {
			add(k, s.Secrets[k])
		}
	}
	if s.ClusterDomain != "" {
		add("DEVTOOL_CLUSTER_DOMAIN", s.ClusterDomain)
	}
	if s.Registry != "" {
		add("DEVTOOL_REGISTRY", s.Registry)
	}
	if s.IngressClass != "" {
		add("DEVTOOL_INGRESS_CLASS", s.IngressClass)
	}
	if s.EndpointPort != 0 {
		add("DEVTOOL_ENDPOINT_PORT", strconv.Itoa(s.EndpointPort))
	}
	for _, kv := range hosted {
		k, v, _ := strings.Cut(kv, "=")
		add(k, v)
	}
	add("KUBECONFIG", kubeconfig)
	add("GIT_TERMINAL_PROMPT", "0")
	add("DEVTOOL_PIPELINE", s.Name)
	out := make([]string, 0, len(order))
	for _, k := range order {
		out = append(out, k+"="+set[k])
	}
	return out
}

// hostedBuildEnv is the environment of a run on a platform with a hosted build service: BUILDKIT_HOST
// the platform's BuildKit with DEVTOOL_BUILDKIT_CERT/KEY/CA (the client certificate the platform
// signed for the run's user), and DOCKER_CONFIG a Docker config (written in WorkDir, 0600) whose
// credentials for the platform's registry are the user's token, so the registry lets the run push
// only where the user may. None without a builder.
func hostedBuildEnv(o Options, s runspec.Spec, token string) ([]string, error) {
	if s.Builder == "" {
		return nil, nil
	}
	if o.BuilderCert == "" || o.BuilderKey == "" || o.BuilderCA == "" {
		return nil, errors.New("the platform named a build service but gave no client certificate for it")
	}
	env := []string{"BUILDKIT_HOST=" + s.Builder, "DEVTOOL_BUILDKIT_CERT=" + o.BuilderCert,
		"DEVTOOL_BUILDKIT_KEY=" + o.BuilderKey, "DEVTOOL_BUILDKIT_CA=" + o.BuilderCA}
	if s.Registry == "" {
		return env, nil
	}
	dir := filepath.Join(o.WorkDir, ".docker")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	auth := base64.StdEncoding.EncodeToString([]byte(s.User + ":" + token))
	cfg, err := json.Marshal(map[string]any{"auths": map[string]any{s.Registry: map[string]string{"auth": auth}}})
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), cfg, 0o600); err != nil {
		return nil, fmt.Errorf("writing the registry's credentials: %w", err)
	}
	return append(env, "DOCKER_CONFIG="+dir), nil
}

// dotEnvNames reads the names a .env file sets (NAME=..., export NAME=...) from its first MiB; none
// when it is absent or not a regular file (never blocking on a FIFO).
func dotEnvNames(path string) map[string]bool {
	out := map[string]bool{}
	f, err := safefile.Open(path)
	if err != nil {
		return out
	}
	defer f.Close()
	sc := bufio.NewScanner(io.LimitReader(f, 1<<20))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		line = strings.TrimPrefix(line, "export ")
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if k, _, ok := strings.Cut(line, "="); ok {
			out[strings.TrimSpace(k)] = true
		}
	}
	return out
}

// writeKubeconfig writes a kubeconfig that reaches the API server with the user's token file.
func writeKubeconfig(path, server, caFile, tokenFile, ns string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: cluster
  cluster:
    server: %q
    certificate-authority: %q
users:
- name: pipeline
  user:
    tokenFile: %q
contexts:
- name: pipeline
  context: {cluster: cluster, user: pipeline, namespace: %q}
current-context: pipeline
`, server, caFile, tokenFile, ns)
	return os.WriteFile(path, []byte(cfg), 0o600)
}

// lineTail keeps the last max bytes written, cut to whole lines.
type lineTail struct {
	max     int
	buf     []byte
	dropped bool
}

func (t *lineTail) Write(p []byte) (int, error) {
	t.buf = append(t.buf, p...)
	if len(t.buf) > 2*t.max {
		t.buf = append([]byte(nil), t.buf[len(t.buf)-t.max:]...)
		t.dropped = true
	}
	return len(p), nil
}

func (t *lineTail) String() string {
	b := t.buf
	if len(b) > t.max || t.dropped {
		b = b[max(len(b)-t.max, 0):]
		if i := bytes.IndexByte(b, '\n'); i >= 0 && i < len(b)-1 {
			b = b[i+1:]
		}
	}
	// git's progress redraws with \r: keep the last state of each line
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	for i, l := range lines {
		if j := strings.LastIndex(strings.TrimRight(l, "\r"), "\r"); j >= 0 {
			lines[i] = l[j+1:]
		}
		lines[i] = strings.TrimRight(lines[i], "\r")
	}
	return strings.Join(lines, "\n")
}

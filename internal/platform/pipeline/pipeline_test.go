package pipeline

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	kfake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/devtool/devtool/internal/deploy"
	"github.com/devtool/devtool/internal/platform/api"
	"github.com/devtool/devtool/internal/platform/pki"
	"github.com/devtool/devtool/internal/platform/runspec"
	"github.com/devtool/devtool/internal/platform/store"
	"github.com/devtool/devtool/internal/platform/store/storetest"
)

// fixture is a Manager on fake clients (no RBAC: the cluster tests prove who may do what) with
// users alice (owner of namespace alice) and bob (viewer there).
type fixture struct {
	m     *Manager
	st    *store.Store
	kc    *kfake.Clientset
	alice *store.User
	bob   *store.User
	c     *controller
	ctx   context.Context
}

func newFixture(t *testing.T, opts ...func(*Options)) *fixture {
	t.Helper()
	st, kc := storetest.New(t, map[schema.GroupVersionResource]string{RunResource: "PipelineRunList"})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	for _, u := range []string{"alice", "bob"} {
		if _, _, err := st.CreateUser(ctx, u, false, ""); err != nil {
			t.Fatal(err)
		}
	}
	o := Options{Store: st, RunnerImage: "registry.local/runner:1", CA: []byte("CA PEM"), KeepRuns: 3}
	for _, f := range opts {
		f(&o)
	}
	m := New(o)
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	alice, _ := st.GetUser("alice")
	if err := st.Share(ctx, "alice", "alice", "bob", api.RoleViewer); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return st.RoleIn("bob", "alice") == api.RoleViewer })
	bob, _ := st.GetUser("bob")
	f := informers.NewSharedInformerFactory(kc, 0)
	ji := f.Batch().V1().Jobs()
	c := &controller{m: m, jobs: ji.Lister(), queue: workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())}
	t.Cleanup(c.queue.ShutDown)
	f.Start(ctx.Done())
	cache.WaitForCacheSync(ctx.Done(), ji.Informer().HasSynced)
	return &fixture{m: m, st: st, kc: kc, alice: alice, bob: bob, c: c, ctx: ctx}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// finishJob makes the run's Job finished (as the Job controller would) with a pod whose runner
// container ended with code and the termination message res.
func (f *fixture) finishJob(t *testing.T, r *Run, code int32, res runspec.Result, cond batchv1.JobConditionType, reason string) {
	t.Helper()
	msg, _ := json.Marshal(res)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: r.Job + "-abcde", Namespace: r.Namespace, Labels: map[string]string{labelJobName: r.Job}},
		Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: runspec.Container, State: corev1.ContainerState{
			Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Message: string(msg), StartedAt: metav1.Now()}}}}}}
	if _, err := f.kc.CoreV1().Pods(r.Namespace).Create(f.ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	job, err := f.kc.BatchV1().Jobs(r.Namespace).Get(f.ctx, r.Job, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	job.Status.Conditions = append(job.Status.Conditions, batchv1.JobCondition{Type: cond, Status: corev1.ConditionTrue, Reason: reason})
	if _, err := f.kc.BatchV1().Jobs(r.Namespace).UpdateStatus(f.ctx, job, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		j, err := f.c.jobs.Jobs(r.Namespace).Get(r.Job)
		done, _, _, _ := jobDoneOrNil(j, err)
		return done
	})
	if err := f.c.process(f.ctx, ID(r.Namespace, r.Name, r.Number)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		cur := f.m.cached(r.Namespace, r.Name, r.Number)
		return cur == nil || api.Finished(cur.Phase)
	})
}

func jobDoneOrNil(j *batchv1.Job, err error) (bool, bool, string, string) {
	if err != nil {
		return false, false, "", ""
	}
	return jobDone(j)
}

func TestSubmitRunsAsTheUserAndOneAtATime(t *testing.T) {
	f := newFixture(t)
	secrets := map[string]string{"DB_PASSWORD": "pw-1234", runspec.GitTokenSecret("git.example.com"): "ghp_token"}
	req := api.PipelineRequest{Name: "shop", Repository: "https://git.example.com/acme/shop.git", Branch: "main",
		Vars: []api.Var{{Name: "MODE", Value: "test"}, {Name: "API_KEY", Value: "k-secret"}}, TimeoutSeconds: 120}
	r, err := f.m.Submit(f.ctx, f.alice, "alice", req, SubmitOptions{Secrets: secrets})
	if err != nil {
		t.Fatal(err)
	}
	if r.Number != 1 || r.Phase != api.PhaseRunning || r.User != "alice" || r.Job != "devtool-run-shop-1" ||
		strings.Join(r.VarNames, ",") != "API_KEY,MODE" {
		t.Fatalf("run %+v", r)
	}
	job, err := f.kc.BatchV1().Jobs("alice").Get(f.ctx, r.Job, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ps := job.Spec.Template.Spec
	if *job.Spec.ActiveDeadlineSeconds != 120 || *job.Spec.BackoffLimit != 0 || *ps.AutomountServiceAccountToken ||
		ps.Containers[0].Image != "registry.local/runner:1" || ps.Volumes[0].Secret.SecretName != r.Job {
		t.Fatalf("job spec: deadline %d backoff %d automount %v image %s", *job.Spec.ActiveDeadlineSeconds, *job.Spec.BackoffLimit,
			*ps.AutomountServiceAccountToken, ps.Containers[0].Image)
	}
	specText, _ := json.Marshal(job.Spec)
	for _, secret := range []string{"pw-1234", "ghp_token", "k-secret"} {
		if strings.Contains(string(specText), secret) {
			t.Fatalf("the Job's spec holds the secret %q", secret)
		}
	}
	sec, err := f.kc.CoreV1().Secrets("alice").Get(f.ctx, r.Job, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var spec runspec.Spec
	if err := json.Unmarshal(sec.Data[runspec.SpecFile], &spec); err != nil {
		t.Fatal(err)
	}
	if spec.GitToken != "ghp_token" || spec.GitUsername != runspec.DefaultGitUsername || spec.Vars["API_KEY"] != "k-secret" ||
		spec.Secrets["DB_PASSWORD"] != "pw-1234" || string(sec.Data[runspec.CAFile]) != "CA PEM" || spec.Deadline.Sub(r.Created) != 120*time.Second {
		t.Fatalf("the run's Secret: %+v", spec)
	}
	if len(sec.OwnerReferences) != 1 || sec.OwnerReferences[0].Kind != "Job" || sec.OwnerReferences[0].Name != r.Job {
		t.Fatalf("the Secret is not owned by the Job: %+v", sec.OwnerReferences)
	}
	if _, err := f.kc.CoreV1().Secrets(store.DefaultNamespace).Get(f.ctx, r.Anchor, metav1.GetOptions{}); err != nil {
		t.Fatalf("the token's anchor: %v", err)
	}

	// a second run while the first goes on is refused, naming it
	_, err = f.m.Submit(f.ctx, f.alice, "alice", req, SubmitOptions{})
	if !errors.Is(err, store.ErrConflict) || !strings.Contains(err.Error(), "run #1 (deploy), started by alice") {
		t.Fatalf("second run: %v", err)
	}
	// a viewer may not run one; a stranger does not see the namespace
	if _, err := f.m.Submit(f.ctx, f.bob, "alice", api.PipelineRequest{Name: "other", Repository: req.Repository}, SubmitOptions{}); !errors.Is(err, store.ErrForbidden) {
		t.Fatalf("viewer: %v", err)
	}
	if _, err := f.m.Submit(f.ctx, f.alice, "bob", req, SubmitOptions{}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("stranger: %v", err)
	}

	f.finishJob(t, r, 0, runspec.Result{Commit: strings.Repeat("a", 40), Branch: "main", CloneMillis: 420}, batchv1.JobComplete, "")
	done := f.m.cached("alice", "shop", 1)
	if done.Phase != api.PhaseSucceeded || done.Commit != strings.Repeat("a", 40) || done.CloneMillis != 420 || done.Started == nil {
		t.Fatalf("finished run %+v", done.API())
	}
	if _, err := f.kc.CoreV1().Secrets(store.DefaultNamespace).Get(f.ctx, r.Anchor, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the anchor (the token) outlived the run: %v", err)
	}
	if _, err := f.kc.CoreV1().Secrets("alice").Get(f.ctx, r.Job, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the token's Secret outlived the run: %v", err)
	}
	p, err := f.m.Pipeline(f.bob, "alice", "shop") // viewers see pipelines
	if err != nil || p.Status != api.PhaseSucceeded || p.Commit != done.Commit || p.Repository != req.Repository || len(p.Runs) != 1 {
		t.Fatalf("pipeline %+v %v", p, err)
	}

	// the next run is #2; a destroy without a repository takes the last run's
	d, err := f.m.Submit(f.ctx, f.alice, "alice", api.PipelineRequest{Name: "shop", Action: api.ActionDestroy, Volumes: true}, SubmitOptions{})
	if err != nil || d.Number != 2 || d.Repository != req.Repository || d.Branch != "main" || !d.Volumes {
		t.Fatalf("destroy %+v %v", d, err)
	}
	f.finishJob(t, d, 1, runspec.Result{Step: api.StepDestroy, Tail: "error: boom"}, batchv1.JobFailed, batchv1.JobReasonBackoffLimitExceeded)
	failed := f.m.cached("alice", "shop", 2)
	if failed.Phase != api.PhaseFailed || failed.FailedStep != api.StepDestroy || failed.Message != "error: boom" || failed.ExitCode != 1 {
		t.Fatalf("failed run %+v", failed.API())
	}
}

// TestSubmitHostedBuild: on a platform with a build service, the run's Secret holds a client
// certificate of the builder CA for the run's user (valid as long as the run's token), the spec
// names the builder and registry, and the Job runs the loopback relay as a native sidecar.
func TestSubmitHostedBuild(t *testing.T) {
	now := time.Now()
	ca, _, err := pki.NewCA("builder CA", now)
	if err != nil {
		t.Fatal(err)
	}
	forwards := []string{"127.0.0.1:31234=devtool-buildkit.devtool-system.svc.cluster.local:1234"}
	f := newFixture(t, func(o *Options) {
		o.Builder, o.BuilderCA, o.Registry = "tcp://127.0.0.1:31234", ca, "127.0.0.1:31500"
		o.Forwards, o.ForwardImage = forwards, "registry.local/platform:1"
	})
	r, err := f.m.Submit(f.ctx, f.alice, "alice", api.PipelineRequest{Name: "web", Repository: "https://x.example/web", TimeoutSeconds: 3600}, SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sec, err := f.kc.CoreV1().Secrets("alice").Get(f.ctx, r.Job, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var spec runspec.Spec
	if err := json.Unmarshal(sec.Data[runspec.SpecFile], &spec); err != nil {
		t.Fatal(err)
	}
	if spec.Builder != "tcp://127.0.0.1:31234" || spec.Registry != "127.0.0.1:31500" {
		t.Fatalf("spec: builder %q registry %q", spec.Builder, spec.Registry)
	}
	cert, err := pki.ParseCertificate(sec.Data[runspec.BuilderCertFile])
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Fatalf("the run's certificate is not the builder CA's: %v", err)
	}
	if cert.Subject.CommonName != "alice" || cert.NotAfter.Before(now.Add(time.Hour)) || cert.NotAfter.After(now.Add(2*time.Hour)) {
		t.Fatalf("certificate for %q until %s (the run: 1h)", cert.Subject.CommonName, cert.NotAfter)
	}
	if _, err := tls.X509KeyPair(sec.Data[runspec.BuilderCertFile], sec.Data[runspec.BuilderKeyFile]); err != nil {
		t.Fatalf("certificate and key: %v", err)
	}
	if string(sec.Data[runspec.BuilderCAFile]) != string(ca.CertPEM) {
		t.Fatal("the Secret's builder CA is not the platform's")
	}
	job, err := f.kc.BatchV1().Jobs("alice").Get(f.ctx, r.Job, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ics := job.Spec.Template.Spec.InitContainers
	if len(ics) != 1 || ics[0].Image != "registry.local/platform:1" || ics[0].RestartPolicy == nil ||
		*ics[0].RestartPolicy != corev1.ContainerRestartPolicyAlways || strings.Join(ics[0].Args, " ") != "forward "+forwards[0] {
		t.Fatalf("the Job's sidecars: %+v", ics)
	}

	// without a build service: no certificate, no sidecar
	g := newFixture(t)
	r, err = g.m.Submit(g.ctx, g.alice, "alice", api.PipelineRequest{Name: "web", Repository: "https://x.example/web"}, SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sec, _ = g.kc.CoreV1().Secrets("alice").Get(g.ctx, r.Job, metav1.GetOptions{})
	job, _ = g.kc.BatchV1().Jobs("alice").Get(g.ctx, r.Job, metav1.GetOptions{})
	if _, ok := sec.Data[runspec.BuilderCertFile]; ok || len(job.Spec.Template.Spec.InitContainers) != 0 {
		t.Fatalf("a run without a build service got a certificate or a sidecar")
	}
}

func TestTimedOutAndPruned(t *testing.T) {
	f := newFixture(t)
	req := api.PipelineRequest{Name: "app", Repository: "http://10.244.91.1:8080/app.git", TimeoutSeconds: 30}
	var runs []*Run
	for i := 0; i < 5; i++ {
		r, err := f.m.Submit(f.ctx, f.alice, "alice", req, SubmitOptions{})
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, r)
		if i == 0 {
			f.finishJob(t, r, 137, runspec.Result{Step: api.StepDeploy, TimedOut: true, Tail: "waiting for web"}, batchv1.JobFailed, batchv1.JobReasonDeadlineExceeded)
			to := f.m.cached("alice", "app", 1)
			if to.Phase != api.PhaseTimedOut || !strings.Contains(to.Message, "did not finish within 30s (--timeout)") ||
				!strings.Contains(to.Message, "during step deploy") || !strings.Contains(to.Message, "waiting for web") {
				t.Fatalf("timed out run: %+v", to.API())
			}
			continue
		}
		f.finishJob(t, r, 0, runspec.Result{}, batchv1.JobComplete, "")
	}
	waitFor(t, func() bool { rs, _ := f.m.cachedRuns("alice", "app"); return len(rs) == 3 })
	rs, _ := f.m.cachedRuns("alice", "app")
	if rs[0].Number != 5 || rs[2].Number != 3 {
		t.Fatalf("kept runs %d..%d, want 5..3", rs[0].Number, rs[2].Number)
	}
	if _, err := f.kc.BatchV1().Jobs("alice").Get(f.ctx, runs[0].Job, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the pruned run's Job (and its log) is still there: %v", err)
	}
	if _, err := f.m.Get(f.alice, "alice", "app", "1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("pruned run: %v", err)
	}
}

func TestSkipIfExists(t *testing.T) {
	f := newFixture(t)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: deploy.StateName("web"), Namespace: "alice"},
		Data: map[string]string{"status": deploy.StatusDeployed, "branch": "main"}}
	if _, err := f.kc.CoreV1().ConfigMaps("alice").Create(f.ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	r, err := f.m.Submit(f.ctx, f.alice, "alice", api.PipelineRequest{Name: "web", Repository: "https://x.example/web", SkipIfExists: true}, SubmitOptions{})
	if err != nil || !r.Skipped {
		t.Fatalf("%+v %v", r, err)
	}
	if l, _ := f.kc.BatchV1().Jobs("alice").List(f.ctx, metav1.ListOptions{}); len(l.Items) != 0 {
		t.Fatal("a skipped run started a Job")
	}
	if envStatePrefix+"web" != deploy.StateName("web") || envStatusDeployed != deploy.StatusDeployed {
		t.Fatal("the environment record's name or status differs from internal/deploy's")
	}
}

func TestCheckRequest(t *testing.T) {
	for _, c := range []struct {
		req   api.PipelineRequest
		field string
	}{
		{api.PipelineRequest{Name: "Bad_Name", Repository: "https://x/y"}, "name"},
		{api.PipelineRequest{Name: "a", Repository: "git@github.com:x/y.git"}, "repository"},
		{api.PipelineRequest{Name: "a", Repository: "https://tok@github.com/x/y"}, "repository"},
		{api.PipelineRequest{Name: "a"}, "repository"},
		{api.PipelineRequest{Name: "a", Repository: "https://x/y", Branch: "a..b"}, "branch"},
		{api.PipelineRequest{Name: "a", Repository: "https://x/y", File: "../etc/passwd"}, "file"},
		{api.PipelineRequest{Name: "a", Repository: "https://x/y", Vars: []api.Var{{Name: "1X"}}}, "vars"},
		// names the deploy sets itself: refused here, not by the run's deploy after its Job started
		{api.PipelineRequest{Name: "a", Repository: "https://x/y", Vars: []api.Var{{Name: "DEVTOOL_NAMESPACE", Value: "x"}}}, "vars"},
		{api.PipelineRequest{Name: "a", Repository: "https://x/y", Vars: []api.Var{{Name: "devtool_git_commit", Value: "x"}}}, "vars"},
		{api.PipelineRequest{Name: "a", Repository: "https://x/y", TimeoutSeconds: 86401}, "timeoutSeconds"},
		{api.PipelineRequest{Name: "a", Repository: "https://x/y", Action: "up"}, "action"},
	} {
		var in *store.InputError
		if err := checkRequest(&c.req); !errors.As(err, &in) || in.Field != c.field {
			t.Errorf("%+v: %v, want a bad %s", c.req, err, c.field)
		}
	}
	ok := api.PipelineRequest{Name: "a", Repository: "https://x/y", Action: api.ActionDestroy}
	if err := checkRequest(&ok); err != nil || ok.TimeoutSeconds != 300 {
		t.Fatalf("%v %d", err, ok.TimeoutSeconds)
	}
}

func TestNamesAndTail(t *testing.T) {
	long := strings.Repeat("a", 63)
	if n := JobName(long, 12); len(n) > 63 || !strings.HasSuffix(n, "-12") || n == JobName(strings.Repeat("a", 62)+"b", 12) {
		t.Fatalf("job name %q", n)
	}
	tb := &TailBuffer{Max: 10}
	tb.Write([]byte("0123456789abc"))
	tb.Write([]byte("de"))
	if string(tb.Bytes()) != "56789abcde" || tb.Dropped != 5 {
		t.Fatalf("tail %q dropped %d", tb.Bytes(), tb.Dropped)
	}
}

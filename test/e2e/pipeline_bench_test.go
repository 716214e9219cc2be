//go:build integration

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devtool/devtool/internal/platform/api"
)

// TestPipelineDeployBenchmark: `devtool pipeline deploy --wait` of examples/hello (served by the
// test's git server) against a local `devtool deploy --wait` of a checkout of the same repository,
// as the same platform user, in the same run, alternating which goes first, each into a namespace
// it has to itself and destroyed (volumes too, waited for) after each round. Logs the medians of
// each, their ratio (target ≤ 1.5), and of the pipeline's time the Job's start (the run recorded
// until its runner's container started) and the clone, apart. A test, not a Go benchmark, so the
// platform users and the git server are made once (DEVTOOL_BENCH_ROUNDS, default 3).
//
//	DEVTOOL_BENCH=1 DEVTOOL_TEST_PLATFORM_DIR=/tmp/devtool-platform-x go test -tags integration -run TestPipelineDeployBenchmark -v ./test/e2e/
func TestPipelineDeployBenchmark(t *testing.T) {
	if os.Getenv("DEVTOOL_BENCH") == "" {
		t.Skip("a benchmark: set DEVTOOL_BENCH=1")
	}
	rounds := 3
	if n, err := strconv.Atoi(os.Getenv("DEVTOOL_BENCH_ROUNDS")); err == nil && n > 0 {
		rounds = n
	}
	b := t
	l := newPipelineLab(b)
	alice, token := l.user("alice", false)
	pc := clientFor(b, l, token)
	pipelineNS := "alice-" + l.suffix
	localNS := "hello-local-" + l.suffix
	l.namespaces = append(l.namespaces, localNS)
	alice.mustRun("namespace", "create", localNS)

	_, here, _, _ := runtime.Caller(0)
	hello := filepath.Join(filepath.Dir(here), "..", "..", "examples", "hello")
	files := map[string]string{}
	if err := filepath.WalkDir(hello, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		rel, _ := filepath.Rel(hello, p)
		files[rel] = string(data)
		return err
	}); err != nil {
		b.Fatal(err)
	}
	repo := l.repo("hello", files, false)
	checkout := filepath.Join(b.TempDir(), "hello")
	if out, err := exec.Command("git", "clone", "-q", repo, checkout).CombinedOutput(); err != nil {
		b.Fatalf("git clone: %v\n%s", err, out)
	}
	alice.dir = checkout

	var local, pipeline, jobStart, clone []time.Duration
	timed := func(args ...string) time.Duration {
		start := time.Now()
		alice.mustRun(args...)
		return time.Since(start)
	}
	// destroy returns before the claims are gone; a deploy right after would apply a claim being
	// deleted (and its pod wait for ever): wait until the namespace has none
	destroy := func(ns string) {
		alice.mustRun("destroy", "--volumes", "--namespace", ns)
		deadline := time.Now().Add(2 * time.Minute)
		for {
			pvcs, err := l.cluster.Clientset.CoreV1().PersistentVolumeClaims(ns).List(context.Background(), metav1.ListOptions{})
			if err == nil && len(pvcs.Items) == 0 {
				return
			}
			if time.Now().After(deadline) {
				b.Fatalf("the claims of %s are still there 2m after destroy", ns)
			}
			time.Sleep(time.Second)
		}
	}
	deployLocal := func() {
		local = append(local, timed("deploy", "--wait", "--namespace", localNS))
		destroy(localNS)
	}
	var runner []time.Duration
	deployPipeline := func() {
		start := time.Now()
		out, _ := alice.mustRun("pipeline", "deploy", "--repository", repo, "--namespace", pipelineNS, "--wait")
		pipeline = append(pipeline, time.Since(start))
		// the runner's own time, from its last line: "==> deploy of hello done in 9.8s"
		if m := regexp.MustCompile(`==> deploy of hello done in (\S+)`).FindStringSubmatch(out); m != nil {
			d, _ := time.ParseDuration(m[1])
			runner = append(runner, d)
		}
		r, err := pc.PipelineRun(context.Background(), pipelineNS, "hello", "latest", 0)
		if err != nil || r.Phase != api.PhaseSucceeded || r.Started == nil {
			b.Fatalf("run %+v %v", r, err)
		}
		jobStart = append(jobStart, r.Started.Sub(r.Created))
		clone = append(clone, time.Duration(r.CloneMillis)*time.Millisecond)
		destroy(pipelineNS)
	}
	for i := 0; i < rounds; i++ {
		if i%2 == 0 {
			deployLocal()
			deployPipeline()
		} else {
			deployPipeline()
			deployLocal()
		}
	}
	med := func(ds []time.Duration) float64 {
		s := append([]time.Duration(nil), ds...)
		sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
		return s[len(s)/2].Seconds()
	}
	t.Logf("BENCH pipeline deploy --wait of examples/hello, median of %d rounds: local %.2fs, pipeline %.2fs, ratio %.2f (target <= 1.5); of the pipeline: job start %.2fs, clone %.2fs",
		rounds, med(local), med(pipeline), med(pipeline)/med(local), med(jobStart), med(clone))
	t.Logf("rounds: local %v, pipeline %v (job start %v, clone %v, the runner from its start to its end %v)", local, pipeline, jobStart, clone, runner)
}

// TestPreviewWakeBenchmark: the first request to a sleeping preview (the ingress asks the platform
// to wake it and holds the request until a pod is ready) against the same pods' plain start (the
// Deployment scaled from 0 to 1 by hand, then the same request), in the same run, alternating
// which goes first. Needs a platform whose previews sleep soon (install with
// PLATFORM_PREVIEW_SLEEP_AFTER=75s, as hack/test.sh does). DEVTOOL_BENCH_ROUNDS, default 2.
//
//	DEVTOOL_BENCH=1 go test -tags integration -run TestPreviewWakeBenchmark -v ./test/e2e/
func TestPreviewWakeBenchmark(t *testing.T) {
	if os.Getenv("DEVTOOL_BENCH") == "" {
		t.Skip("a benchmark: set DEVTOOL_BENCH=1")
	}
	rounds := 2
	if n, err := strconv.Atoi(os.Getenv("DEVTOOL_BENCH_ROUNDS")); err == nil && n > 0 {
		rounds = n
	}
	l := newPipelineLab(t)
	if l.info.PreviewSleepSeconds <= 0 || l.info.PreviewSleepSeconds > 120 || l.info.IngressClass == "" {
		t.Skipf("the platform's previews sleep after %ds and its ingress class is %q: install with PLATFORM_PREVIEW_SLEEP_AFTER=75s",
			l.info.PreviewSleepSeconds, l.info.IngressClass)
	}
	ctx := context.Background()
	alice, _ := l.user("alice", false)
	repo := l.repo("wake-"+l.suffix, map[string]string{"compose.yml": webCompose}, false)
	ns := "wake-" + l.suffix + "-main"
	l.namespaces = append(l.namespaces, ns)
	alice.mustRun("preview", "deploy", "--repository", repo, "--branch", "main", "--public", "--wait")
	defer alice.mustRun("preview", "destroy", ns)
	url := "https://web-" + ns + "." + l.info.Domain + "/"
	if l.info.EndpointPort != 0 && l.info.EndpointPort != 443 {
		url = fmt.Sprintf("https://web-%s.%s:%d/", ns, l.info.Domain, l.info.EndpointPort)
	}
	deployments := l.cluster.Clientset.AppsV1().Deployments(ns)
	asleep := func() {
		deadline := time.Now().Add(time.Duration(l.info.PreviewSleepSeconds)*time.Second + 3*time.Minute)
		for {
			d, err := deployments.Get(ctx, "web", metav1.GetOptions{})
			pods, perr := l.cluster.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			// scaled to zero and no pod running or starting (the pipeline run's pod that deployed it
			// stays, Succeeded; a terminating pod may still answer)
			if err == nil && perr == nil && d.Spec.Replicas != nil && *d.Spec.Replicas == 0 {
				live := false
				for _, p := range pods.Items {
					live = live || p.Status.Phase == "Running" || p.Status.Phase == "Pending"
				}
				if !live {
					return
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("the preview %s is not asleep", ns)
			}
			time.Sleep(time.Second)
		}
	}
	served := func(what string) {
		if status, body := l.get(t, url); status != http.StatusOK || !strings.Contains(body, "hello from a preview") {
			t.Fatalf("%s: %d %q", what, status, body)
		}
	}
	wake := func() time.Duration {
		asleep()
		start := time.Now()
		served("the first request to the sleeping preview")
		return time.Since(start)
	}
	plain := func() time.Duration {
		asleep()
		start := time.Now()
		if _, err := deployments.UpdateScale(ctx, "web", &autoscalingv1.Scale{
			ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns}, Spec: autoscalingv1.ScaleSpec{Replicas: 1},
		}, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		for {
			d, err := deployments.Get(ctx, "web", metav1.GetOptions{})
			if err == nil && d.Status.ReadyReplicas >= 1 {
				break
			}
			if time.Since(start) > 3*time.Minute {
				t.Fatal("the scaled Deployment has no ready pod after 3m")
			}
			time.Sleep(100 * time.Millisecond)
		}
		served("the first request after a plain start")
		took := time.Since(start)
		// the platform still counts it asleep (it scaled it down itself and would not again): a
		// command on it tells it that it is awake, so that it goes to sleep for the next round
		alice.mustRun("preview", "endpoints", ns)
		return took
	}
	var woken, started []time.Duration
	for i := 0; i < rounds; i++ {
		if i%2 == 0 {
			woken = append(woken, wake())
			started = append(started, plain())
		} else {
			started = append(started, plain())
			woken = append(woken, wake())
		}
	}
	med := func(ds []time.Duration) float64 {
		s := append([]time.Duration(nil), ds...)
		sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
		return s[len(s)/2].Seconds()
	}
	t.Logf("BENCH first request to a sleeping preview vs a plain start of the same pods (scale 0->1, ready, the same request), median of %d rounds: woken %.2fs, plain %.2fs, ratio %.2f; rounds: woken %v, plain %v",
		rounds, med(woken), med(started), med(woken)/med(started), woken, started)
}

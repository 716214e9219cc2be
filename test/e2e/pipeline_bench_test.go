//go:build integration

package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"testing"
	"time"

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

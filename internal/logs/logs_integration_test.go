//go:build integration

package logs

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/devtool/devtool/internal/testcluster"
)

const image = "docker.io/library/busybox:local"

// deployment is a Deployment labelled like a devtool Compose service of environment env (no env:
// not part of any environment) whose container runs script.
func deployment(name, env string, replicas int32, script string) *appsv1.Deployment {
	sel := map[string]string{"app": name}
	labels := map[string]string{"app": name}
	if env != "" {
		labels["dev.devtool/deployed-by"] = env
		labels["app.kubernetes.io/name"] = name
	}
	zero := int64(0)
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: sel},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: &zero,
					Containers: []corev1.Container{{
						Name: "main", Image: image, ImagePullPolicy: corev1.PullIfNotPresent,
						Command: []string{"sh", "-c", script},
					}},
				},
			},
		},
	}
}

// counter prints "<name> line N" every 200 ms.
func counter(name string) string {
	return fmt.Sprintf(`i=0; while true; do i=$((i+1)); echo "%s line $i"; sleep 0.2; done`, name)
}

// collector gathers the lines Follow writes.
type collector struct {
	mu sync.Mutex
	b  strings.Builder
}

func (c *collector) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.b.Write(p)
}

func (c *collector) lines() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := strings.TrimSuffix(c.b.String(), "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// run is one Follow in the background.
type run struct {
	out    *collector
	cancel context.CancelFunc
	done   chan error
	notes  chan string
}

func start(t *testing.T, o Options) *run {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &run{out: &collector{}, cancel: cancel, done: make(chan error, 1), notes: make(chan string, 10)}
	o.Out = r.out
	o.Notify = func(s string) { r.notes <- s }
	go func() { r.done <- Follow(ctx, o) }()
	t.Cleanup(cancel)
	return r
}

// stop cancels and checks Follow returns nil promptly.
func (r *run) stop(t *testing.T) {
	t.Helper()
	began := time.Now()
	r.cancel()
	select {
	case err := <-r.done:
		if err != nil {
			t.Errorf("Follow returned %v after cancel", err)
		}
		if d := time.Since(began); d > 2*time.Second {
			t.Errorf("Follow took %s to return after cancel", d)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Follow did not return within 2s of cancel")
	}
}

// waitFor polls the output until cond holds, failing after timeout.
func (r *run) waitFor(t *testing.T, what string, timeout time.Duration, cond func([]string) bool) []string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		l := r.out.lines()
		if cond(l) {
			return l
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s; output:\n%s", what, strings.Join(l, "\n"))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

var lineRE = regexp.MustCompile(`^\[([a-z0-9-]+)/main\] ([a-z]+) line (\d+)$`)

// byPrefix groups parsed lines: prefix -> numbers in order; it fails on any malformed line or a
// line whose text names another service than its prefix.
func byPrefix(t *testing.T, lines []string) map[string][]int {
	t.Helper()
	m := map[string][]int{}
	for _, l := range lines {
		g := lineRE.FindStringSubmatch(l)
		if g == nil {
			t.Fatalf("malformed line %q", l)
		}
		if !strings.HasPrefix(g[1], g[2]+"-") {
			t.Fatalf("line %q: prefix does not name service %s", l, g[2])
		}
		n, _ := strconv.Atoi(g[3])
		m[g[1]] = append(m[g[1]], n)
	}
	return m
}

func services(m map[string][]int) map[string]int {
	s := map[string]int{}
	for p := range m {
		s[p[:strings.IndexByte(p, '-')]]++
	}
	return s
}

func create(t *testing.T, cs kubernetes.Interface, ns string, d *appsv1.Deployment) {
	t.Helper()
	if _, err := cs.AppsV1().Deployments(ns).Create(context.Background(), d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestFollowTwoServices(t *testing.T) {
	c := testcluster.Connect(t)
	ns := c.Namespace(t)
	cs := c.Clientset
	base := Options{Client: cs, Namespace: ns, Environment: "env", Tail: -1}

	// Started before the pods exist: says so once, then follows them as they appear.
	all := start(t, base)
	select {
	case n := <-all.notes:
		if !strings.Contains(n, "dev.devtool/deployed-by=env") {
			t.Errorf("note %q does not name the selector", n)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no note saying no pods match yet")
	}
	create(t, cs, ns, deployment("a", "env", 1, counter("a")))
	create(t, cs, ns, deployment("b", "env", 1, counter("b")))
	create(t, cs, ns, deployment("other", "", 1, counter("other")))

	all.waitFor(t, "lines of a and b", 90*time.Second, func(l []string) bool {
		s := services(byPrefix(t, l))
		return s["a"] == 1 && s["b"] == 1
	})

	// A pod that appears later is followed too, from its first line.
	d, err := cs.AppsV1().Deployments(ns).Get(context.Background(), "a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	two := int32(2)
	d.Spec.Replicas = &two
	if _, err := cs.AppsV1().Deployments(ns).Update(context.Background(), d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	lines := all.waitFor(t, "lines of the second a pod", 60*time.Second, func(l []string) bool {
		return services(byPrefix(t, l))["a"] == 2
	})
	all.stop(t)
	for p, nums := range byPrefix(t, lines) {
		if nums[0] != 1 {
			t.Errorf("%s starts at line %d, want 1 (tail -1, started with the pod)", p, nums[0])
		}
		for i := 1; i < len(nums); i++ {
			if nums[i] != nums[i-1]+1 {
				t.Errorf("%s: line %d follows %d (lost or repeated lines)", p, nums[i], nums[i-1])
				break
			}
		}
		if strings.HasPrefix(p, "other-") {
			t.Errorf("%s is not part of the environment", p)
		}
	}
	time.Sleep(2 * time.Second) // let every container print more than the tail below

	t.Run("tail", func(t *testing.T) {
		o := base
		o.Tail = 3
		r := start(t, o)
		r.waitFor(t, "lines of 3 pods", 20*time.Second, func(l []string) bool { return len(byPrefix(t, l)) == 3 })
		r.stop(t)
		for p, nums := range byPrefix(t, r.out.lines()) {
			if nums[0] < 5 {
				t.Errorf("%s: first line %d with --tail 3 after more than 10 lines were printed", p, nums[0])
			}
		}
	})
	t.Run("prefix", func(t *testing.T) {
		o := base
		o.Tail = 1
		o.Filter.Include, _ = CompilePrefix("b")
		r := start(t, o)
		r.waitFor(t, "lines of b", 20*time.Second, func(l []string) bool { return services(byPrefix(t, l))["b"] == 1 })
		time.Sleep(time.Second)
		r.stop(t)
		if s := services(byPrefix(t, r.out.lines())); len(s) != 1 {
			t.Errorf("services %v, want only b", s)
		}
	})
	t.Run("exclude all namespace", func(t *testing.T) {
		o := base
		o.Tail = 1
		o.All, o.Environment = true, ""
		o.Filter.Exclude, _ = CompilePrefix("a")
		r := start(t, o)
		r.waitFor(t, "lines of b and other", 20*time.Second, func(l []string) bool {
			s := services(byPrefix(t, l))
			return s["b"] == 1 && s["other"] == 1
		})
		time.Sleep(time.Second)
		r.stop(t)
		if s := services(byPrefix(t, r.out.lines())); s["a"] != 0 {
			t.Errorf("services %v: a is excluded", s)
		}
	})
}

// A container that exits and restarts is picked up again: the new instance's lines arrive, the old
// instance's lines are not repeated.
func TestFollowContainerRestart(t *testing.T) {
	c := testcluster.Connect(t)
	ns := c.Namespace(t)
	d := deployment("r", "env", 1, `for i in 1 2 3 4 5; do echo "r line $i"; sleep 0.2; done; exit 1`)
	create(t, c.Clientset, ns, d)
	r := start(t, Options{Client: c.Clientset, Namespace: ns, Environment: "env", Tail: -1})
	lines := r.waitFor(t, "lines of two runs", 90*time.Second, func(l []string) bool {
		return strings.Count(strings.Join(l, "\n"), "r line 5") >= 2
	})
	r.stop(t)
	nums := byPrefix(t, lines)
	if len(nums) != 1 {
		t.Fatalf("prefixes %v, want one pod", nums)
	}
	for _, ns := range nums {
		want := []int{1, 2, 3, 4, 5, 1, 2, 3, 4, 5}
		if len(ns) < len(want) || fmt.Sprint(ns[:10]) != fmt.Sprint(want) {
			t.Errorf("lines %v, want two runs of 1..5 without repeats", ns)
		}
	}
}

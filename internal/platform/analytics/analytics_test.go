package analytics

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/devtool/devtool/internal/platform/api"
)

func event(command string, ok bool, install int) api.AnalyticsEvent {
	return api.AnalyticsEvent{Command: command, DurationMs: 1500, Success: ok, Version: "v1.2.3", OS: "linux", Arch: "amd64",
		InstallID: fmt.Sprintf("%08x-0000-4000-8000-000000000000", install)}
}

func TestCheckRefusesWhatIsNotDocumented(t *testing.T) {
	good := event("namespace create", true, 1)
	if err := Check(good); err != nil {
		t.Fatal(err)
	}
	for field, bad := range map[string]func(*api.AnalyticsEvent){
		"command":    func(e *api.AnalyticsEvent) { e.Command = "deploy /home/me/project" },
		"durationMs": func(e *api.AnalyticsEvent) { e.DurationMs = -1 },
		"version":    func(e *api.AnalyticsEvent) { e.Version = strings.Repeat("1", 65) },
		"os":         func(e *api.AnalyticsEvent) { e.OS = "Linux Mint" },
		"arch":       func(e *api.AnalyticsEvent) { e.Arch = "" },
		"installId":  func(e *api.AnalyticsEvent) { e.InstallID = "alice@example.com" },
	} {
		e := good
		bad(&e)
		err := Check(e)
		if ie, ok := err.(*InputError); !ok || ie.Field != field {
			t.Errorf("%s: %v", field, err)
		}
	}
}

func newAggregator(t *testing.T, cs *fake.Clientset, now time.Time) *Aggregator {
	t.Helper()
	a := &Aggregator{Kube: cs, Namespace: "devtool-system", Now: func() time.Time { return now }}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); a.Wait() })
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	return a
}

// TestTwoReplicasAddUpInOneDay: two replicas count events in memory, store them in the same day's
// ConfigMap (one write each per flush, however many events), and either replica's report shows the
// sum; the object holds counts and a sketch, no install id.
func TestTwoReplicasAddUpInOneDay(t *testing.T) {
	cs := fake.NewClientset()
	now := time.Date(2026, 5, 9, 12, 0, 0, 0, time.UTC)
	a, b := newAggregator(t, cs, now), newAggregator(t, cs, now)
	for i := range 100 {
		if err := a.Record(event("deploy", true, i%10)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 50 {
		b.Record(event("deploy", i%2 == 0, 100+i%5))
	}
	writesBefore := countWrites(cs)
	ctx := context.Background()
	if err := a.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if w := countWrites(cs) - writesBefore; w != 2 {
		t.Errorf("%d writes for 150 events and two flushes, want 2", w)
	}
	cm, err := cs.CoreV1().ConfigMaps("devtool-system").Get(ctx, "devtool-analytics-2026-05-09", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(cm.Data["counts"], "0000-4000-8000") || len(cm.Data["installs"]) > 400 {
		t.Errorf("the stored day holds install ids or more than a sketch: %v", cm.Data)
	}
	var rep api.AnalyticsReport
	deadline := time.Now().Add(5 * time.Second)
	for {
		rep, err = b.Report(1)
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Days) == 1 && total(rep.Days[0]) == 150 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond) // the informer catches up
	}
	if len(rep.Days) != 1 || rep.Days[0].Date != "2026-05-09" {
		t.Fatalf("report %+v", rep)
	}
	d := rep.Days[0]
	want := []api.AnalyticsCount{
		{Command: "deploy", Version: "v1.2.3", OS: "linux", Arch: "amd64", Success: false, Count: 25, TotalDurationMs: 25 * 1500},
		{Command: "deploy", Version: "v1.2.3", OS: "linux", Arch: "amd64", Success: true, Count: 125, TotalDurationMs: 125 * 1500},
	}
	if fmt.Sprint(d.Counts) != fmt.Sprint(want) {
		t.Errorf("counts %+v, want %+v", d.Counts, want)
	}
	if d.Installs < 14 || d.Installs > 16 {
		t.Errorf("installs estimated %d, want about 15", d.Installs)
	}
	// Pending counts show in the report of the replica that has them before they are stored.
	a.Record(event("up", true, 1))
	if rep, _ := a.Report(1); !strings.Contains(fmt.Sprint(rep), "up v1.2.3") {
		t.Errorf("pending count missing from the report: %+v", rep)
	}
}

func total(d api.AnalyticsDay) (n int64) {
	for _, c := range d.Counts {
		n += c.Count
	}
	return n
}

func countWrites(cs *fake.Clientset) int {
	n := 0
	for _, a := range cs.Actions() {
		if a.GetResource().Resource == "configmaps" && (a.GetVerb() == "create" || a.GetVerb() == "update") {
			n++
		}
	}
	return n
}

// TestRowsBounded: a day keeps at most MaxKeysPerDay rows; the rest is counted as "(other)".
func TestRowsBounded(t *testing.T) {
	a := &Aggregator{Now: time.Now}
	for i := range MaxKeysPerDay + 500 {
		ev := event("deploy", true, 1)
		ev.Version = fmt.Sprintf("v0.0.%d", i)
		if err := a.Record(ev); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := a.Report(1)
	if err != nil {
		t.Fatal(err)
	}
	counts := rep.Days[0].Counts
	if len(counts) != MaxKeysPerDay+1 || counts[0].Command != OtherCommand || counts[0].Count != 500 {
		t.Errorf("%d rows, first %+v", len(counts), counts[0])
	}
}

func TestSettings(t *testing.T) {
	cs := fake.NewClientset()
	a := newAggregator(t, cs, time.Now())
	a.Default = true
	if !a.Enabled() {
		t.Fatal("the install's default is not used")
	}
	if err := a.SetEnabled(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for a.Enabled() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if a.Enabled() {
		t.Error("the admin's choice is not used")
	}
}

func TestPruneOldDays(t *testing.T) {
	now := time.Date(2026, 5, 9, 0, 0, 0, 0, time.UTC)
	old := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: DayPrefix + "2026-01-01", Namespace: "devtool-system", Labels: map[string]string{Label: "day"}}}
	recent := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: DayPrefix + "2026-05-01", Namespace: "devtool-system", Labels: map[string]string{Label: "day"}}}
	cs := fake.NewClientset(old, recent)
	a := newAggregator(t, cs, now)
	a.prune(context.Background())
	if _, err := cs.CoreV1().ConfigMaps("devtool-system").Get(context.Background(), old.Name, metav1.GetOptions{}); err == nil {
		t.Error("a day older than the retention is kept")
	}
	if _, err := cs.CoreV1().ConfigMaps("devtool-system").Get(context.Background(), recent.Name, metav1.GetOptions{}); err != nil {
		t.Errorf("a recent day was deleted: %v", err)
	}
}

func TestSketchEstimate(t *testing.T) {
	for _, n := range []int{0, 1, 10, 100, 1000, 20000} {
		var s sketch
		for i := range n {
			s.add(fmt.Sprintf("id-%d", i))
			s.add(fmt.Sprintf("id-%d", i)) // twice: counted once
		}
		got := s.estimate()
		if diff := float64(got - int64(n)); diff < -0.2*float64(n)-1 || diff > 0.2*float64(n)+1 {
			t.Errorf("%d ids estimated as %d", n, got)
		}
	}
}

// TestWithoutRBACStillServes: when the analytics ConfigMaps cannot be listed (an older Role), Start
// returns after its timeout and analytics stay off instead of blocking the platform's start.
func TestWithoutRBACStillServes(t *testing.T) {
	cs := fake.NewClientset()
	cs.PrependReactor("list", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(corev1.Resource("configmaps"), "", errors.New("no RBAC"))
	})
	a := &Aggregator{Kube: cs, Namespace: "devtool-system", Default: true, SyncTimeout: 300 * time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); a.Wait() }()
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if a.Enabled() {
		t.Error("analytics on without their store")
	}
}

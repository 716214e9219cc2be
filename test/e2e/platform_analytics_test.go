//go:build integration

package e2e

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devtool/devtool/internal/platform/analytics"
	"github.com/devtool/devtool/internal/platform/api"
	"github.com/devtool/devtool/internal/platform/client"
	"github.com/devtool/devtool/internal/testcluster"
)

// TestPlatformAnalytics is issue 19's "analytics received only when enabled by both", end to end:
// the built CLI, logged in to the platform on the local cluster (2 replicas), runs `namespace list`
// once while the admin does not allow analytics, once while the user has them disabled, and twice
// with both allowing. The admin's daily counts for that command grow by exactly 2 (read until the
// other replica's counts are stored, then once more a minute later), and what the platform stored
// in its day's ConfigMap is counts and a sketch only: no user name, no install id.
func TestPlatformAnalytics(t *testing.T) {
	p := findPlatform(t)
	c := testcluster.Connect(t)
	ctx := context.Background()
	admin := p.adminClient(t)
	if _, err := admin.AnalyticsReport(ctx, 1); client.IsNotFound(err) {
		msg := "the platform at " + p.url + " predates analytics (install this tree's: hack/platform.sh up, DEVTOOL_TEST_PLATFORM_DIR)"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	settings := func(on bool) {
		t.Helper()
		if err := admin.SetAnalyticsSettings(ctx, on); err != nil {
			t.Fatal(err)
		}
		// Each replica reads the setting through its informer: wait until answers agree for a while.
		deadline, agree := time.Now().Add(30*time.Second), 0
		for agree < 6 {
			info, err := admin.Info(ctx)
			if err == nil && info.Analytics == on {
				agree++
			} else {
				agree = 0
			}
			if time.Now().After(deadline) {
				t.Fatalf("info.analytics is not %v after 30 s", on)
			}
			time.Sleep(250 * time.Millisecond)
		}
	}
	initial, err := admin.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.SetAnalyticsSettings(context.Background(), initial.Analytics) })

	name := "an-" + randomSuffix()
	r, err := admin.CreateUser(ctx, api.CreateUserRequest{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	removePlatformUserAfter(t, admin, name)
	u := newPlatformUser(t)
	u.mustRun("context", "use", p.url, "--token", r.Token, "--ca-cert", p.caFile)
	count := func() int64 {
		t.Helper()
		rep, err := admin.AnalyticsReport(ctx, 2)
		if err != nil {
			t.Fatal(err)
		}
		var n int64
		for _, d := range rep.Days {
			for _, c := range d.Counts {
				if c.Command == "namespace list" {
					n += c.Count
				}
			}
		}
		return n
	}
	// (A run of this test less than a minute before would still have counts pending on a replica.)
	before := count()

	settings(false)
	u.mustRun("namespace", "list") // the admin does not allow analytics
	settings(true)
	u.mustRun("analytics", "--disable")
	u.mustRun("namespace", "list") // the user does not
	u.mustRun("analytics", "--enable")
	u.mustRun("namespace", "list")
	u.mustRun("namespace", "list")

	deadline := time.Now().Add(3 * analytics.FlushInterval)
	for count()-before < 2 && time.Now().Before(deadline) {
		time.Sleep(2 * time.Second)
	}
	if got := count() - before; got != 2 {
		t.Fatalf("namespace list counted %d more times, want 2", got)
	}
	time.Sleep(analytics.FlushInterval + 10*time.Second) // every replica has stored its counts
	if got := count() - before; got != 2 {
		t.Errorf("after every replica stored its counts: %d more, want 2", got)
	}
	day := analytics.DayPrefix + time.Now().UTC().Format(time.DateOnly)
	cm, err := c.Clientset.CoreV1().ConfigMaps(platformNamespace(t, c, p)).Get(ctx, day, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the day's ConfigMap: %v", err)
	}
	if len(cm.Data) != 2 || cm.Data["counts"] == "" || cm.Data["installs"] == "" {
		t.Errorf("the day's ConfigMap holds %v", cm.Data)
	}
	if strings.Contains(cm.Data["counts"], name) {
		t.Errorf("the stored counts name the user: %s", cm.Data["counts"])
	}
}

// platformNamespace is the namespace of the platform p points at (PLATFORM_NAMESPACE of its install):
// the one whose Service has p's NodePort.
func platformNamespace(t testing.TB, c *testcluster.Cluster, p platformFiles) string {
	t.Helper()
	port := p.url[strings.LastIndex(p.url, ":")+1:]
	svcs, err := c.Clientset.CoreV1().Services("").List(context.Background(), metav1.ListOptions{FieldSelector: "metadata.name=devtool-platform"})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range svcs.Items {
		for _, sp := range s.Spec.Ports {
			if sp.NodePort != 0 && strings.TrimSpace(port) == strconv.Itoa(int(sp.NodePort)) {
				return s.Namespace
			}
		}
	}
	t.Fatalf("no devtool-platform Service with NodePort %s", port)
	return ""
}

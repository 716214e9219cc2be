//go:build integration

package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devtool/devtool/internal/deploy"
	"github.com/devtool/devtool/internal/kube"
	"github.com/devtool/devtool/internal/testcluster"
)

// gitRepo makes a local git repository on branch main holding files, committed once.
func gitRepo(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{
		{"init", "-q", "-b", "main"},
		{"add", "."},
		{"-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "init"},
	} {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	return dir
}

// TestManifestDependencyDeployedOnce: a dependency (a local git repository with its own
// devtool.yml) is cloned and deployed with its variables the first time, and not the second;
// --dependencies deploys it again; destroy --all removes both environments.
func TestManifestDependencyDeployedOnce(t *testing.T) {
	c := testcluster.Connect(t)
	ns := c.Namespace(t)
	u := newUser(t, c)
	// Each deploy of the dependency leaves one run-<n> ConfigMap: they count its deploys.
	repo := gitRepo(t, map[string]string{"devtool.yml": `deploy:
  - name: create
    command: kubectl create configmap payments --from-literal=mode="$MODE" --from-literal=branch="$DEVTOOL_GIT_BRANCH" --dry-run=client -o yaml | kubectl apply -f -
  - name: count
    command: kubectl create configmap "run-$(date +%s%N)"
`})
	runs := func() int {
		l, err := c.Clientset.CoreV1().ConfigMaps(ns).List(context.Background(), metav1.ListOptions{LabelSelector: kube.LabelDeployedBy + "=payments"})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, cm := range l.Items {
			if strings.HasPrefix(cm.Name, "run-") {
				n++
			}
		}
		return n
	}
	u.write("devtool.yml", `name: front
dependencies:
  payments:
    repository: `+repo+`
    branch: main
    variables: {MODE: test}
    wait: true
deploy:
  - name: front
    command: kubectl create configmap front --dry-run=client -o yaml | kubectl apply -f -
`)
	ctx := context.Background()
	cs := c.Clientset
	u.mustRun("deploy", "--namespace", ns)
	cm, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "payments", metav1.GetOptions{})
	if err != nil || cm.Data["mode"] != "test" || cm.Data["branch"] != "main" || cm.Labels[kube.LabelDeployedBy] != "payments" {
		t.Fatalf("the dependency's configmap: %v %v %v", err, cm.Data, cm.Labels)
	}
	if cm, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "front", metav1.GetOptions{}); err != nil || cm.Labels[kube.LabelDeployedBy] != "front" {
		t.Fatalf("front configmap: %v", err)
	}
	_, errOut, err := u.run("deploy", "--namespace", ns)
	if err != nil || !strings.Contains(errOut, "Dependency payments is already deployed") {
		t.Fatalf("second deploy: %v\n%s", err, errOut)
	}
	if n := runs(); n != 1 {
		t.Errorf("the dependency was deployed %d times by two deploys, want 1", n)
	}
	u.mustRun("deploy", "--namespace", ns, "--dependencies")
	if n := runs(); n != 2 {
		t.Errorf("--dependencies did not deploy the dependency again (%d deploys, want 2)", n)
	}
	states := &deploy.StateStore{Clientset: cs, Namespace: ns}
	for _, n := range []string{"payments", "front"} {
		if st, err := states.Get(ctx, n); err != nil || st == nil || st.Status != deploy.StatusDeployed {
			t.Errorf("state of %s: %v %+v", n, err, st)
		}
	}
	u.mustRun("destroy", "--namespace", ns, "--all")
	if n := runs(); n != 0 {
		t.Errorf("%d run configmaps of the dependency left after destroy --all", n)
	}
	for _, n := range []string{"payments", "front"} {
		if _, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, n, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("configmap %s after destroy --all: %v", n, err)
		}
		if st, _ := states.Get(ctx, n); st != nil {
			t.Errorf("state of %s after destroy --all", n)
		}
	}
}

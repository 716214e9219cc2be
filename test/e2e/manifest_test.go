//go:build integration

package e2e

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devtool/devtool/internal/deploy"
	"github.com/devtool/devtool/internal/kube"
	"github.com/devtool/devtool/internal/testcluster"
)

const k8sObjects = `apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
data:
  mode: plain
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: precious
  annotations:
    dev.devtool/policy: keep
data: {a: b}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: api
spec:
  replicas: 1
  selector:
    matchLabels: {app: api}
  template:
    metadata:
      labels: {app: api}
    spec:
      terminationGracePeriodSeconds: 0
      containers:
        - name: api
          image: docker.io/library/busybox:local
          imagePullPolicy: IfNotPresent
          command: [sleep, "3600"]
`

const commandsManifest = `name: shop
deploy:
  commands:
    - name: apply
      command: kubectl apply -f k8s/
    - name: token
      command: echo "TOKEN=t-$DEVTOOL_NAME" >> "$DEVTOOL_ENV"
    - name: handoff
      command: kubectl create configmap handoff --from-literal=token="$TOKEN" --from-literal=mode="$MODE" --from-literal=ns="$DEVTOOL_NAMESPACE"
    - name: rollout
      command: kubectl rollout status deployment/api --timeout=240s
  endpoints:
    shop:
      - {path: /, service: api, port: 8080}
destroy:
  - name: goodbye
    command: echo "bye $DEVTOOL_NAME"
`

// TestManifestCommandsLifecycle deploys a devtool.yml whose commands kubectl-apply plain
// manifests (labelled through the proxy), hand a variable on through DEVTOOL_ENV and read a
// --var; destroy runs the destroy commands and removes everything but the kept object.
func TestManifestCommandsLifecycle(t *testing.T) {
	c := testcluster.Connect(t)
	ns := c.Namespace(t)
	u := newUser(t, c)
	u.write("devtool.yml", commandsManifest)
	u.write("k8s/objects.yaml", k8sObjects)
	ctx := context.Background()
	cs := c.Clientset

	u.extra = []string{"DEVTOOL_CLUSTER_DOMAIN=devtool.test"}
	out, errOut, err := u.run("deploy", "--namespace", ns, "--var", "MODE=test", "--timeout", "4m")
	if err != nil {
		t.Fatalf("deploy: %v", err)
	}
	if want := "https://shop-" + ns + ".devtool.test/"; !strings.Contains(out, want) {
		t.Errorf("deploy output %q lacks the endpoint %s of deploy.endpoints", out, want)
	}
	if ing, err := cs.NetworkingV1().Ingresses(ns).Get(ctx, "shop", metav1.GetOptions{}); err != nil || ing.Labels[kube.LabelDeployedBy] != "shop" {
		t.Errorf("ingress shop: %v", err)
	}
	if !strings.Contains(errOut, "apply | ") || !strings.Contains(errOut, "rollout | ") {
		t.Errorf("the commands' output is not streamed with their names:\n%s", errOut)
	}
	for _, n := range []string{"settings", "precious", "handoff"} {
		cm, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, n, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("configmap %s: %v", n, err)
		}
		if cm.Labels[kube.LabelDeployedBy] != "shop" {
			t.Errorf("configmap %s labels %v: no deployed-by=shop", n, cm.Labels)
		}
		if n == "handoff" && (cm.Data["token"] != "t-shop" || cm.Data["mode"] != "test" || cm.Data["ns"] != ns) {
			t.Errorf("handoff data %v: want token t-shop (DEVTOOL_ENV), mode test (--var), ns %s", cm.Data, ns)
		}
	}
	dep, err := cs.AppsV1().Deployments(ns).Get(ctx, "api", metav1.GetOptions{})
	if err != nil || dep.Labels[kube.LabelDeployedBy] != "shop" || dep.Spec.Template.Labels[kube.LabelDeployedBy] != "shop" {
		t.Fatalf("deployment api: %v (labels %v)", err, dep.Labels)
	}
	st, err := (&deploy.StateStore{Clientset: cs, Namespace: ns}).Get(ctx, "shop")
	if err != nil || st == nil || st.Status != deploy.StatusDeployed || !strings.Contains(st.Output, "handoff | configmap/handoff created") {
		t.Fatalf("state: %v %+v", err, st)
	}
	if _, err := cs.CoordinationV1().Leases(ns).Get(ctx, deploy.LockName("shop"), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the lock is still there after the deploy: %v", err)
	}

	_, errOut, err = u.run("destroy", "--namespace", ns, "--wait")
	if err != nil {
		t.Fatalf("destroy: %v", err)
	}
	if !strings.Contains(errOut, "goodbye | bye shop") {
		t.Errorf("destroy did not run the destroy command:\n%s", errOut)
	}
	for _, n := range []string{"settings", "handoff"} {
		if _, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, n, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("configmap %s after destroy: %v", n, err)
		}
	}
	if _, err := cs.AppsV1().Deployments(ns).Get(ctx, "api", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("deployment api after destroy: %v", err)
	}
	if _, err := cs.NetworkingV1().Ingresses(ns).Get(ctx, "shop", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("ingress shop after destroy: %v", err)
	}
	if _, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "precious", metav1.GetOptions{}); err != nil {
		t.Errorf("the policy keep configmap was deleted: %v", err)
	}
	if st, _ := (&deploy.StateStore{Clientset: cs, Namespace: ns}).Get(ctx, "shop"); st != nil {
		t.Errorf("state left after destroy: %+v", st)
	}
}

// TestManifestFailingCommand: a failing command stops the deploy with status error; the next
// command does not run. A reserved --var is a flag error.
func TestManifestFailingCommand(t *testing.T) {
	c := testcluster.Connect(t)
	ns := c.Namespace(t)
	u := newUser(t, c)
	u.write("devtool.yml", `name: broken
deploy:
  - name: boom
    command: echo about to fail; exit 7
  - name: after
    command: kubectl create configmap after
`)
	ctx := context.Background()
	_, errOut, err := u.run("deploy", "--namespace", ns)
	if err == nil || !strings.Contains(errOut, `command "boom" failed`) {
		t.Fatalf("deploy: err %v, stderr:\n%s", err, errOut)
	}
	if _, err := c.Clientset.CoreV1().ConfigMaps(ns).Get(ctx, "after", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the command after the failing one ran: %v", err)
	}
	st, err := (&deploy.StateStore{Clientset: c.Clientset, Namespace: ns}).Get(ctx, "broken")
	if err != nil || st == nil || st.Status != deploy.StatusError || !strings.Contains(st.Output, "boom | about to fail") {
		t.Fatalf("state: %v %+v", err, st)
	}
	if _, errOut, err := u.run("deploy", "--namespace", ns, "--var", "DEVTOOL_NAME=x"); err == nil || !strings.Contains(errOut, "reserved") {
		t.Errorf("a reserved --var was accepted: %v\n%s", err, errOut)
	}
}

// TestManifestLock: two deploys of one environment at once; the second fails naming the lock.
func TestManifestLock(t *testing.T) {
	c := testcluster.Connect(t)
	ns := c.Namespace(t)
	u := newUser(t, c)
	u.write("devtool.yml", `name: slow
deploy:
  - name: wait
    command: for i in $(seq 1 100); do [ -e "$STOP" ] && exit 0; sleep 0.2; done
`)
	stop := filepath.Join(t.TempDir(), "stop")
	u.extra = []string{"STOP=" + stop}
	var wg sync.WaitGroup
	var firstErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, _, firstErr = u.run("deploy", "--namespace", ns)
	}()
	// Wait until the first holds the lock.
	if err := exec.Command("kubectl", "--kubeconfig", c.Kubeconfig, "-n", ns, "wait", "--for=create", "lease/"+deploy.LockName("slow"), "--timeout=60s").Run(); err != nil {
		t.Fatalf("the first deploy never took the lock: %v", err)
	}
	_, errOut, err := u.run("deploy", "--namespace", ns)
	if err == nil || !strings.Contains(errOut, "locked by another deploy") || !strings.Contains(errOut, "pid") {
		t.Errorf("second deploy: err %v, stderr:\n%s", err, errOut)
	}
	_ = exec.Command("touch", stop).Run()
	wg.Wait()
	if firstErr != nil {
		t.Errorf("first deploy: %v", firstErr)
	}
}

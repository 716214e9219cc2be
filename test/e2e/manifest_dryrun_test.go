//go:build integration

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devtool/devtool/internal/deploy"
	"github.com/devtool/devtool/internal/testcluster"
)

const dryRunManifest = `name: planned
build:
  web:
    context: web
deploy:
  commands:
    - name: touch
      command: touch ran && kubectl create configmap from-command --from-literal=image=$DEVTOOL_BUILD_WEB_IMAGE
    - name: show
      command: echo "$DEVTOOL_NAMESPACE uses $DB_PASSWORD"
  compose: compose.yml
  endpoints:
    shop:
      - {path: /, service: web, port: 8080}
`

const dryRunCompose = `services:
  web:
    build: web
    ports: ["8080"]
    volumes: ["./static:/srv"]
  cache:
    image: docker.io/library/busybox:local
    command: sleep 3600
`

// TestManifestDryRun: deploy --dry-run of a devtool.yml prints the objects of its compose and
// endpoints parts on stdout and the plan on stderr (images as deploy names them, commands with
// variables expanded and the secret masked), with and without a reachable cluster, and leaves
// the cluster and the folder untouched.
func TestManifestDryRun(t *testing.T) {
	c := testcluster.Connect(t)
	ns := c.Namespace(t)
	u := newUser(t, c)
	u.extra = []string{"DEVTOOL_REGISTRY=127.0.0.1:25000"}
	u.write("devtool.yml", dryRunManifest)
	u.write("compose.yml", dryRunCompose)
	u.write("web/Dockerfile", "FROM docker.io/library/busybox:local\n")
	u.write("static/index.html", "hello\n")
	check := func(out, errOut, nsWant string) {
		t.Helper()
		for _, want := range []string{"kind: Deployment", "name: web", "name: cache", "kind: Ingress", "image: 127.0.0.1:25000/" + nsWant + "/planned-web:"} {
			if !strings.Contains(out, want) {
				t.Errorf("stdout lacks %q", want)
			}
		}
		for _, want := range []string{"image for web: 127.0.0.1:25000/" + nsWant + "/planned-web:", "would run: touch ran && kubectl create configmap from-command --from-literal=image=127.0.0.1:25000/" + nsWant + "/planned-web:",
			`would run: echo "` + nsWant + ` uses ******"`, "  DB_PASSWORD=******", "a deploy copies host folder"} {
			if !strings.Contains(errOut, want) {
				t.Errorf("stderr lacks %q", want)
			}
		}
		if strings.Contains(out+errOut, "s3cr3t-value") {
			t.Error("the secret was printed")
		}
	}
	out, errOut, err := u.run("deploy", "--namespace", ns, "--dry-run", "--var", "DB_PASSWORD=s3cr3t-value")
	if err != nil {
		t.Fatalf("dry run: %v", err)
	}
	check(out, errOut, ns)

	// Without a reachable cluster (no kubeconfig at all) it renders for --namespace.
	u.extra = append(u.extra, "KUBECONFIG="+filepath.Join(u.home, "missing-kubeconfig"))
	out, errOut, err = u.run("deploy", "--namespace", "elsewhere", "--dry-run", "--var", "DB_PASSWORD=s3cr3t-value")
	if err != nil {
		t.Fatalf("dry run without a cluster: %v", err)
	}
	check(out, errOut, "elsewhere")

	if _, err := os.Stat(filepath.Join(u.dir, "ran")); err == nil {
		t.Error("a dry run ran a deploy command")
	}
	ctx := context.Background()
	cs := c.Clientset
	if l, err := cs.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{}); err != nil || len(l.Items) != 0 {
		t.Errorf("dry run created deployments: %v %d", err, len(l.Items))
	}
	if l, err := cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{}); err != nil {
		t.Error(err)
	} else {
		for _, cm := range l.Items {
			if cm.Name != "kube-root-ca.crt" {
				t.Errorf("dry run left configmap %s", cm.Name)
			}
		}
	}
	if _, err := cs.CoordinationV1().Leases(ns).Get(ctx, deploy.LockName("planned"), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("dry run took the lock: %v", err)
	}
	objs, err := c.Objects()
	if err != nil {
		t.Fatal(err)
	}
	if items, err := objs.ListLabelled(ctx, ns, "dev.devtool/deployed-by"); err != nil || len(items) != 0 {
		t.Errorf("labelled objects after a dry run: %v %d", err, len(items))
	}
}

// TestManifestDropsComposeSection: a redeploy of a devtool.yml whose compose and endpoints
// sections are gone removes what they made (the volume is kept); what its commands made stays.
func TestManifestDropsComposeSection(t *testing.T) {
	c := testcluster.Connect(t)
	ns := c.Namespace(t)
	u := newUser(t, c)
	u.write("compose.yml", `services:
  web:
    image: docker.io/library/busybox:local
    command: sleep 3600
    ports: ["8080"]
    volumes: ["data:/data"]
volumes:
  data: {}
`) // a StatefulSet: its claim comes from the named volume
	u.write("devtool.yml", `name: dropper
deploy:
  commands:
    - kubectl create configmap from-command --dry-run=client -o yaml | kubectl apply -f -
  compose: compose.yml
  endpoints:
    shop:
      - {path: /, service: web, port: 8080}
`)
	ctx := context.Background()
	cs := c.Clientset
	u.mustRun("deploy", "--namespace", ns, "--timeout", "4m")
	if _, err := cs.AppsV1().StatefulSets(ns).Get(ctx, "web", metav1.GetOptions{}); err != nil {
		t.Fatalf("statefulset web: %v", err)
	}
	if _, err := cs.NetworkingV1().Ingresses(ns).Get(ctx, "shop", metav1.GetOptions{}); err != nil {
		t.Fatalf("ingress shop: %v", err)
	}
	u.write("devtool.yml", `name: dropper
deploy:
  commands:
    - kubectl create configmap from-command --dry-run=client -o yaml | kubectl apply -f -
`)
	_, errOut, err := u.run("deploy", "--namespace", ns, "--timeout", "4m")
	if err != nil {
		t.Fatalf("redeploy: %v\n%s", err, errOut)
	}
	if _, err := cs.AppsV1().StatefulSets(ns).Get(ctx, "web", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("statefulset web was not pruned: %v", err)
	}
	if _, err := cs.CoreV1().Services(ns).Get(ctx, "web", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("service web was not pruned: %v", err)
	}
	if _, err := cs.NetworkingV1().Ingresses(ns).Get(ctx, "shop", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("ingress shop was not pruned: %v", err)
	}
	pvcs, err := cs.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{LabelSelector: "dev.devtool/deployed-by=dropper"})
	if err != nil || len(pvcs.Items) != 1 {
		t.Errorf("the volume should be kept: %v %d", err, len(pvcs.Items))
	}
	if !strings.Contains(errOut, "kept (destroy --volumes removes it)") {
		t.Errorf("no word about the kept volume:\n%s", errOut)
	}
	if _, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "from-command", metav1.GetOptions{}); err != nil {
		t.Errorf("the command's configmap was pruned: %v", err)
	}
	u.mustRun("destroy", "--namespace", ns, "--volumes", "--wait")
}

// TestManifestDestroyCommandsSeeBuildVariables: destroy commands get DEVTOOL_BUILD_<SERVICE>_*
// named as a deploy names the images, without building them.
func TestManifestDestroyCommandsSeeBuildVariables(t *testing.T) {
	c := testcluster.Connect(t)
	ns := c.Namespace(t)
	u := newUser(t, c)
	u.extra = []string{"DEVTOOL_REGISTRY=127.0.0.1:25000"}
	u.write("web/Dockerfile", "FROM docker.io/library/busybox:local\n")
	// Deployed without a build section (nothing to build here), destroyed with one.
	u.write("devtool.yml", "name: builtvars\ndeploy:\n  - kubectl create configmap marker\n")
	u.mustRun("deploy", "--namespace", ns)
	u.write("devtool.yml", `name: builtvars
build:
  web: {context: web}
  tools: {image: 127.0.0.1:25000/e2e/tools:1.2, context: web}
deploy:
  - kubectl create configmap marker
destroy:
  - echo "$DEVTOOL_BUILD_WEB_IMAGE|$DEVTOOL_BUILD_TOOLS_REPOSITORY|$DEVTOOL_BUILD_TOOLS_TAG" > destroy.out
`)
	u.mustRun("destroy", "--namespace", ns)
	got := strings.TrimSpace(readFile(t, filepath.Join(u.dir, "destroy.out")))
	parts := strings.Split(got, "|")
	if len(parts) != 3 || !strings.HasPrefix(parts[0], "127.0.0.1:25000/"+ns+"/builtvars-web:") || len(parts[0]) <= len("127.0.0.1:25000/"+ns+"/builtvars-web:") ||
		parts[1] != "e2e/tools" || parts[2] != "1.2" {
		t.Errorf("destroy commands saw %q", got)
	}
	// The same name the dry run of a deploy shows.
	_, errOut, err := u.run("deploy", "--namespace", ns, "--dry-run")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(errOut, "image for web: "+parts[0]+" ") {
		t.Errorf("dry run names the image differently from destroy (%s):\n%s", parts[0], errOut)
	}
}

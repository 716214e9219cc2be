//go:build integration

package e2e

import (
	"bytes"
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devtool/devtool/internal/kube"
	"github.com/devtool/devtool/internal/testcluster"
)

// A Compose file written for Okteto, using each of its extensions devtool reads (issue 22).
// busybox has no curl: api becomes Ready only because its curl healthcheck is an httpGet probe.
const oktetoCompose = `
services:
  api:
    image: docker.io/library/busybox:local
    command: sh -c 'mkdir -p /tmp/www/healthz && echo ok > /tmp/www/healthz/index.html && exec httpd -f -p 4572 -h /tmp/www'
    healthcheck:
      test: curl -fsS http://localhost:4572/healthz/ || exit 1
      interval: 1s
      x-devtool-liveness: true
    user: {runAsUser: 1000, runAsGroup: 2000}
    resources: {cpu: 10m, memory: 32Mi, storage: {size: 64Mi, class: local-path}}
    envFile: api.env
    stopGracePeriod: 2s
    volumes: ["data:/data", "/cache"]
  worker:
    image: docker.io/library/busybox:local
    command: sleep 3600
    workdir: /data
    stopGracePeriod: 1s
    depends_on: [api]
    volumes: ["data:/data"]
volumes:
  data:
    labels: {team: data}
    annotations: {backup.example.com/schedule: daily}
    size: 64Mi
    class: local-path
`

// TestComposeOktetoExtensions deploys that file and checks what each extension became on the
// cluster: the probes, the security context, the environment, the claims and the co-scheduling.
func TestComposeOktetoExtensions(t *testing.T) {
	c := testcluster.Connect(t)
	ns := c.Namespace(t)
	u := newUser(t, c)
	u.write("compose.yml", oktetoCompose)
	u.write("api.env", "MODE=okteto\n")
	ctx := context.Background()
	cs := c.Clientset

	_, errOut, err := u.run("deploy", "--namespace", ns, "--name", "okteto", "--wait", "--timeout", "3m")
	if err != nil {
		t.Fatalf("deploy: %v\n%s", err, errOut)
	}
	for _, want := range []string{"envFile is Okteto's spelling; read as env_file", "workdir is Okteto's spelling; read as working_dir"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("deploy's warnings do not say %q:\n%s", want, errOut)
		}
	}

	api, err := cs.AppsV1().StatefulSets(ns).Get(ctx, "api", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("api statefulset: %v", err)
	}
	if api.Status.ReadyReplicas != 1 {
		t.Fatalf("api is not ready after deploy --wait: %+v", api.Status)
	}
	ctr := api.Spec.Template.Spec.Containers[0]
	for name, p := range map[string]*corev1.Probe{"readiness": ctr.ReadinessProbe, "liveness": ctr.LivenessProbe} {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Port.IntValue() != 4572 || p.HTTPGet.Path != "/healthz/" || p.Exec != nil {
			t.Errorf("api %s probe = %+v, want httpGet :4572/healthz/", name, p)
		}
	}
	if sc := ctr.SecurityContext; sc == nil || sc.RunAsUser == nil || *sc.RunAsUser != 1000 || sc.RunAsGroup == nil || *sc.RunAsGroup != 2000 {
		t.Errorf("api security context = %+v, want runAsUser 1000, runAsGroup 2000", sc)
	}
	if q := ctr.Resources.Requests[corev1.ResourceCPU]; q.String() != "10m" {
		t.Errorf("api cpu request = %s, want 10m", q.String())
	}
	if g := api.Spec.Template.Spec.TerminationGracePeriodSeconds; g == nil || *g != 2 {
		t.Errorf("api terminationGracePeriodSeconds = %v, want 2", g)
	}
	if len(api.Spec.VolumeClaimTemplates) != 1 {
		t.Fatalf("api claim templates = %d, want 1 (/cache)", len(api.Spec.VolumeClaimTemplates))
	}
	tpl := api.Spec.VolumeClaimTemplates[0].Spec
	if q := tpl.Resources.Requests[corev1.ResourceStorage]; tpl.StorageClassName == nil || *tpl.StorageClassName != "local-path" || q.String() != "64Mi" {
		t.Errorf("api claim template = class %v size %s, want local-path 64Mi", tpl.StorageClassName, q.String())
	}

	pvc, err := cs.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("claim data: %v", err)
	}
	if pvc.Annotations["team"] != "data" || pvc.Annotations["backup.example.com/schedule"] != "daily" {
		t.Errorf("claim data annotations = %v, want the volume's labels and annotations", pvc.Annotations)
	}
	if pvc.Spec.StorageClassName == nil || *pvc.Spec.StorageClassName != "local-path" || pvc.Status.Phase != corev1.ClaimBound {
		t.Errorf("claim data: class %v, phase %s; want local-path, Bound", pvc.Spec.StorageClassName, pvc.Status.Phase)
	}

	worker, err := cs.AppsV1().StatefulSets(ns).Get(ctx, "worker", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("worker statefulset: %v", err)
	}
	aff := worker.Spec.Template.Spec.Affinity
	if aff == nil || aff.PodAffinity == nil || len(aff.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution) != 1 ||
		aff.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution[0].TopologyKey != "kubernetes.io/hostname" {
		t.Errorf("worker affinity = %+v, want one required term on kubernetes.io/hostname", aff)
	}
	if wd := worker.Spec.Template.Spec.Containers[0].WorkingDir; wd != "/data" {
		t.Errorf("worker workingDir = %q, want /data", wd)
	}

	apiPod := readyPod(t, c.Client, ns, "api")
	workerPod := readyPod(t, c.Client, ns, "worker")
	if apiPod.Spec.NodeName != workerPod.Spec.NodeName {
		t.Errorf("api runs on %s, worker on %s: the pods sharing data must share a node", apiPod.Spec.NodeName, workerPod.Spec.NodeName)
	}
	var out, errb bytes.Buffer
	err = c.Exec(ctx, kube.ExecOptions{Namespace: ns, Pod: apiPod.Name, Container: apiPod.Spec.Containers[0].Name,
		Command: []string{"sh", "-c", `echo "$MODE"; command -v curl || echo no-curl`}, Stdout: &out, Stderr: &errb})
	if err != nil {
		t.Fatalf("exec in api: %v\n%s", err, errb.String())
	}
	if got := out.String(); got != "okteto\nno-curl\n" {
		t.Errorf("api: MODE and curl = %q, want MODE=okteto and no curl in the image", got)
	}

	u.mustRun("destroy", "--namespace", ns, "--name", "okteto", "--volumes", "--wait")
}

// readyPod is the ready pod of a service of the environment "okteto".
func readyPod(t *testing.T, c *kube.Client, ns, service string) *corev1.Pod {
	t.Helper()
	pods, err := c.Clientset.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=" + service + ",dev.devtool/deployed-by=okteto"})
	if err != nil {
		t.Fatalf("pods of %s: %v", service, err)
	}
	for i := range pods.Items {
		if kube.PodReady(&pods.Items[i]) {
			return &pods.Items[i]
		}
	}
	t.Fatalf("no ready pod for %s after deploy --wait", service)
	return nil
}

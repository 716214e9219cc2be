package translate

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/devtool/devtool/internal/compose"
)

// Issue 11: Compose files Docker Compose accepts, from YAML to objects.

func translateYAML(t *testing.T, src string) (*Result, error) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "compose.yml")
	p, err := compose.LoadBytes(compose.LoadOptions{File: file, Environ: map[string]string{}, HomeDir: "/home/dev"}, []byte(src))
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	return Translate(p, defaultOpts)
}

func mustTranslate(t *testing.T, src string) *Result {
	t.Helper()
	res, err := translateYAML(t, src)
	if err != nil {
		t.Fatalf("translate: %v", err)
	}
	return res
}

// object finds the object of a kind and name.
func object(t *testing.T, res *Result, kind, name string) runtime.Object {
	t.Helper()
	for _, o := range res.Objects {
		m, _ := meta.Accessor(o)
		if o.GetObjectKind().GroupVersionKind().Kind == kind && m.GetName() == name {
			return o
		}
	}
	t.Fatalf("no %s %s among %d objects", kind, name, len(res.Objects))
	return nil
}

func hasWarning(res *Result, parts ...string) bool {
	for _, w := range res.Warnings {
		ok := true
		for _, p := range parts {
			ok = ok && strings.Contains(w, p)
		}
		if ok {
			return true
		}
	}
	return false
}

func TestCompletedDependencyBecomesJob(t *testing.T) {
	for _, tc := range []struct {
		name     string
		restart  string
		wantKind string
		wantWarn bool
		wantErr  string
	}{
		{name: "no restart policy", wantKind: KindJob, wantWarn: true},
		{name: "empty restart from an unset variable", restart: "    restart: ${RESTART:-}\n", wantKind: KindJob, wantWarn: true},
		{name: "restart no", restart: "    restart: \"no\"\n", wantKind: KindJob},
		{name: "explicit restart always", restart: "    restart: always\n", wantErr: "never completes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := translateYAML(t, "services:\n  migrate:\n    image: m\n"+tc.restart+
				"  web:\n    image: w\n    depends_on:\n      migrate: {condition: service_completed_successfully}\n")
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			job := object(t, res, "Job", "migrate").(*batchv1.Job)
			if job.Spec.Template.Spec.RestartPolicy != corev1.RestartPolicyNever {
				t.Errorf("restartPolicy = %s", job.Spec.Template.Spec.RestartPolicy)
			}
			if got := hasWarning(res, `"migrate" runs as a Job`, "web waits for it"); got != tc.wantWarn {
				t.Errorf("warning = %v, want %v (%q)", got, tc.wantWarn, res.Warnings)
			}
		})
	}
}

func TestJobAnonymousVolumeGetsAClaim(t *testing.T) {
	res := mustTranslate(t, "services:\n  seed:\n    image: s\n    restart: \"no\"\n    volumes: [/cache]\n")
	pvc := object(t, res, "PersistentVolumeClaim", "seed-anon-cache").(*corev1.PersistentVolumeClaim)
	if pvc.Namespace != defaultOpts.Namespace || pvc.Labels[LabelDeployedBy] != defaultOpts.Name {
		t.Errorf("pvc meta = %+v", pvc.ObjectMeta)
	}
	job := object(t, res, "Job", "seed").(*batchv1.Job)
	v := job.Spec.Template.Spec.Volumes[0]
	if v.PersistentVolumeClaim == nil || v.PersistentVolumeClaim.ClaimName != "seed-anon-cache" {
		t.Errorf("job volume = %+v", v)
	}
}

func TestTmpfsIsMemoryEmptyDir(t *testing.T) {
	res := mustTranslate(t, "services:\n  web:\n    image: w\n    tmpfs: /run\n    volumes:\n      - {type: tmpfs, target: /tmp, tmpfs: {size: 64m}}\n")
	d := object(t, res, "Deployment", "web").(*appsv1.Deployment)
	vols := d.Spec.Template.Spec.Volumes
	if len(vols) != 2 || vols[0].EmptyDir == nil || vols[0].EmptyDir.Medium != corev1.StorageMediumMemory ||
		vols[1].EmptyDir.SizeLimit == nil || vols[1].EmptyDir.SizeLimit.String() != "64Mi" {
		t.Fatalf("volumes = %+v", vols)
	}
	if ms := d.Spec.Template.Spec.Containers[0].VolumeMounts; len(ms) != 2 || ms[0].MountPath != "/run" || ms[1].MountPath != "/tmp" {
		t.Errorf("mounts = %+v", ms)
	}
	if len(d.Spec.Template.Spec.InitContainers) != 0 {
		t.Errorf("a tmpfs is never seeded from the image")
	}
}

func TestFieldsBeyondTheSpec(t *testing.T) {
	res := mustTranslate(t, `services:
  web:
    image: w
    user: "1000:2000"
    expose: ["3000", 9090/udp]
    cpus: 1.5
    mem_limit: 512m
    mem_reservation: 256m
    annotations: {team: a}
    labels: {tier: front}
    deploy:
      replicas: 3
      labels: {owner: b}
      endpoint_mode: dnsrr
  cache:
    image: c
    cpu_count: 2
    resources: {cpu: 250m, memory: 128Mi, storage: 5Gi}
    volumes: [/data]
  db:
    image: d
    resources: {requests: {storage: 2Gi}}
    volumes: [pg:/var/lib/pg]
volumes:
  pg:
    size: 3Gi
    class: fast
    annotations: {backup: daily}
`)
	d := object(t, res, "Deployment", "web").(*appsv1.Deployment)
	c := d.Spec.Template.Spec.Containers[0]
	if *d.Spec.Replicas != 3 {
		t.Errorf("replicas = %d", *d.Spec.Replicas)
	}
	if sc := c.SecurityContext; sc == nil || *sc.RunAsUser != 1000 || *sc.RunAsGroup != 2000 {
		t.Errorf("securityContext = %+v", sc)
	}
	if c.Resources.Limits.Cpu().String() != "1500m" || c.Resources.Limits.Memory().String() != "512Mi" || c.Resources.Requests.Memory().String() != "256Mi" {
		t.Errorf("resources = %+v", c.Resources)
	}
	for _, a := range []map[string]string{d.Annotations, d.Spec.Template.Annotations} {
		if a["team"] != "a" || a["tier"] != "front" || a["owner"] != "b" {
			t.Errorf("annotations = %v", a)
		}
	}
	svc := object(t, res, "Service", "web").(*corev1.Service)
	if svc.Spec.ClusterIP != corev1.ClusterIPNone || len(svc.Spec.Ports) != 2 || svc.Spec.Ports[1].Protocol != corev1.ProtocolUDP {
		t.Errorf("service = %+v", svc.Spec)
	}
	for _, o := range res.Objects {
		if o.GetObjectKind().GroupVersionKind().Kind == "Ingress" {
			t.Errorf("expose made a public port")
		}
	}

	cache := object(t, res, "StatefulSet", "cache").(*appsv1.StatefulSet)
	cc := cache.Spec.Template.Spec.Containers[0]
	if cc.Resources.Limits.Cpu().String() != "2" || cc.Resources.Requests.Cpu().String() != "250m" || cc.Resources.Requests.Memory().String() != "128Mi" {
		t.Errorf("cache resources = %+v", cc.Resources)
	}
	if q := cache.Spec.VolumeClaimTemplates[0].Spec.Resources.Requests[corev1.ResourceStorage]; q.String() != "5Gi" {
		t.Errorf("cache claim size = %s", q.String())
	}
	pvc := object(t, res, "PersistentVolumeClaim", "pg").(*corev1.PersistentVolumeClaim)
	if q := pvc.Spec.Resources.Requests[corev1.ResourceStorage]; q.String() != "3Gi" || *pvc.Spec.StorageClassName != "fast" || pvc.Annotations["backup"] != "daily" {
		t.Errorf("pvc = %+v", pvc)
	}
}

func TestSecretsAndConfigs(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "db_password.txt"), "s3cret\n")
	write(t, filepath.Join(dir, "nginx.conf"), "server {}\n")
	p, err := compose.LoadBytes(compose.LoadOptions{File: filepath.Join(dir, "compose.yml"), Environ: map[string]string{"API_KEY": "k-123"}}, []byte(`services:
  web:
    image: w
    secrets:
      - db_password
      - {source: api_key, target: api.key, mode: 0400}
      - {source: tls, target: /etc/tls/cert.pem}
    configs:
      - nginx_conf
      - {source: inline, target: /etc/app/app.ini}
secrets:
  db_password: {file: ./db_password.txt}
  api_key: {environment: API_KEY}
  tls: {external: true}
configs:
  nginx_conf: {file: ./nginx.conf}
  inline: {content: "a=1"}
`))
	if err != nil {
		t.Fatal(err)
	}
	res, err := Translate(p, defaultOpts)
	if err != nil {
		t.Fatal(err)
	}
	if sec := object(t, res, "Secret", "db-password").(*corev1.Secret); string(sec.Data["db_password"]) != "s3cret\n" || sec.Labels[LabelDeployedBy] != "shop" {
		t.Errorf("secret = %+v", sec)
	}
	if sec := object(t, res, "Secret", "api-key").(*corev1.Secret); string(sec.Data["api_key"]) != "k-123" {
		t.Errorf("secret api-key = %+v", sec.Data)
	}
	if cm := object(t, res, "ConfigMap", "nginx-conf").(*corev1.ConfigMap); cm.Data["nginx_conf"] != "server {}\n" {
		t.Errorf("configmap = %+v", cm.Data)
	}
	for _, o := range res.Objects {
		if m, _ := meta.Accessor(o); m.GetName() == "tls" {
			t.Errorf("an external secret is created")
		}
	}
	d := object(t, res, "Deployment", "web").(*appsv1.Deployment)
	got := map[string]string{}
	for _, m := range d.Spec.Template.Spec.Containers[0].VolumeMounts {
		got[m.MountPath] = m.Name + "/" + m.SubPath
		if !m.ReadOnly {
			t.Errorf("%s is writable", m.MountPath)
		}
	}
	want := map[string]string{
		"/run/secrets/db_password": "secret-db-password/db_password",
		"/run/secrets/api.key":     "secret-api-key-400/api_key",
		"/etc/tls/cert.pem":        "secret-tls/tls",
		"/nginx_conf":              "config-nginx-conf/nginx_conf",
		"/etc/app/app.ini":         "config-inline/inline",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("mounts:\n got %v\nwant %v", got, want)
	}
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Name == "secret-api-key-400" && (v.Secret == nil || *v.Secret.DefaultMode != 0o400) {
			t.Errorf("volume = %+v", v)
		}
	}
	if len(d.Spec.Template.Spec.InitContainers) != 0 {
		t.Errorf("secrets are never seeded")
	}
	if !hasWarning(&Result{Warnings: p.Warnings}, `secret "tls" is external`, `a Secret named "tls" must exist`) {
		t.Errorf("warnings = %q", p.Warnings)
	}
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestLongDependencyChainOrder: ordering is linear-ish in services and edges (a heap, not a
// rescan per service), so 50,000 chained services (written last first) order quickly.
func TestLongDependencyChainOrder(t *testing.T) {
	const n = 50000
	p := &compose.Project{}
	for i := n - 1; i >= 0; i-- {
		s := &compose.Service{Name: fmt.Sprintf("s%d", i), Image: "x", Scale: 1}
		if i > 0 {
			s.DependsOn = []compose.Dependency{{Service: fmt.Sprintf("s%d", i-1), Condition: compose.ConditionStarted}}
		}
		p.Services = append(p.Services, s)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		order, err := dependencyOrder(p)
		if err != nil || len(order) != n || order[0].Name != "s0" || order[n-1].Name != fmt.Sprintf("s%d", n-1) {
			t.Errorf("order: %v, %d services", err, len(order))
		}
	}()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("ordering 50,000 services did not finish in 60s")
	}
}

func TestTranslateCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	p := &compose.Project{Services: []*compose.Service{{Name: "a", Image: "x", Scale: 1}}}
	if _, err := TranslateContext(ctx, p, defaultOpts); !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v", err)
	}
}

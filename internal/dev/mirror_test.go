package dev

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/devtool/devtool/internal/compose"
	"github.com/devtool/devtool/internal/manifest"
)

var update = flag.Bool("update", false, "rewrite golden files")

func ptr[T any](v T) *T { return &v }

func sampleTemplate() corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app.kubernetes.io/name": "web", "dev.devtool/deployed-by": "hello"},
			Annotations: map[string]string{"a": "b"}},
		Spec: corev1.PodSpec{
			ServiceAccountName: "web-sa",
			NodeSelector:       map[string]string{"disk": "ssd"},
			Tolerations:        []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists}},
			InitContainers:     []corev1.Container{{Name: "init", Image: "busybox", Command: []string{"true"}}},
			Volumes: []corev1.Volume{
				{Name: "secret", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s"}}},
				{Name: "code", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			},
			Containers: []corev1.Container{
				{
					Name: "web", Image: "web:1", Command: []string{"httpd"}, Args: []string{"-f"}, WorkingDir: "/srv",
					Env:            []corev1.EnvVar{{Name: "A", Value: "1"}, {Name: "B", Value: "2"}},
					EnvFrom:        []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "s"}}}},
					Resources:      corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}},
					ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}},
					LivenessProbe:  &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}},
					VolumeMounts:   []corev1.VolumeMount{{Name: "secret", MountPath: "/etc/s"}, {Name: "code", MountPath: "/app"}},
				},
				{
					Name: "sidecar", Image: "side:1",
					ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}},
				},
			},
		},
	}
}

func sampleDeployment() *appsv1.Deployment {
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "uid-1", Labels: map[string]string{"dev.devtool/deployed-by": "hello"}},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr(int32(3)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": "web", "dev.devtool/deployed-by": "hello"}},
			Template: sampleTemplate(),
		},
	}
}

func sampleStatefulSet() *appsv1.StatefulSet {
	return &appsv1.StatefulSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"},
		ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "ns"},
		Spec: appsv1.StatefulSetSpec{
			Replicas:             ptr(int32(1)),
			ServiceName:          "db",
			Selector:             &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": "web", "dev.devtool/deployed-by": "hello"}},
			Template:             sampleTemplate(),
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "code"}}},
		},
	}
}

func fullDev() *manifest.Dev {
	return &manifest.Dev{
		Name: "web", Container: "web", Image: "dev:1",
		Command:          []string{"npm", "start"},
		Sync:             []manifest.Sync{{Local: "/src", Remote: "/app"}, {Local: "/src/lib", Remote: "/usr/lib/x/"}},
		Environment:      map[string]string{"B": "dev", "C": "3"},
		Resources:        compose.Resources{Limits: compose.ResourceList{Memory: "1Gi"}},
		SecurityContext:  &manifest.SecurityContext{RunAsUser: ptr(int64(1000)), FSGroup: ptr(int64(2000)), CapAdd: []string{"SYS_PTRACE"}},
		PersistentVolume: &manifest.PersistentVolume{Enabled: true, Size: "3Gi", StorageClass: "fast"},
	}
}

func golden(t *testing.T, name string, v any) {
	t.Helper()
	got, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(file, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if string(got) != string(want) {
		t.Errorf("%s differs from the golden file (run with -update after checking):\n%s", name, got)
	}
}

func TestMirrorDeploymentGolden(t *testing.T) {
	orig := Workload{Deployment: sampleDeployment()}
	before := orig.Deployment.DeepCopy()
	m, err := Mirror(orig, fullDev(), MirrorOptions{Env: map[string]string{"C": "flag", "D": "4"}})
	if err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(before, orig.Deployment) {
		t.Fatal("Mirror modified the original")
	}
	golden(t, "mirror-deployment.yaml", m.Deployment)
	pvc, err := VolumeClaim(orig, fullDev())
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "volume.yaml", pvc)

	d := m.Deployment
	c := d.Spec.Template.Spec.Containers[0]
	if d.Name != "web-devtool" || *d.Spec.Replicas != 1 || d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
		t.Errorf("name/replicas/strategy: %s %d %s", d.Name, *d.Spec.Replicas, d.Spec.Strategy.Type)
	}
	if d.Labels["dev.devtool/deployed-by"] != "hello" || len(d.OwnerReferences) != 1 || d.OwnerReferences[0].Name != "web" ||
		d.OwnerReferences[0].Controller != nil {
		t.Errorf("the mirror carries the environment label (destroy finds it) and is owned, not controlled, by the original (prune skips it): %v %v", d.Labels, d.OwnerReferences)
	}
	for k, v := range orig.Deployment.Spec.Template.Labels {
		if d.Spec.Template.Labels[k] != v {
			t.Errorf("pod label %s lost", k)
		}
	}
	if d.Spec.Template.Labels[LabelDev] != "web" || d.Spec.Selector.MatchLabels[LabelDev] != "web" {
		t.Error("dev label missing on pods or selector")
	}
	if c.Image != "dev:1" || c.WorkingDir != "/app" || c.ReadinessProbe != nil || c.LivenessProbe != nil || c.Args != nil {
		t.Errorf("dev container: %+v", c)
	}
	if !strings.Contains(c.Command[2], "devtool-agent serve --home /devtool --addr 127.0.0.1:2222") {
		t.Errorf("launcher: %q", c.Command)
	}
	if d.Spec.Template.Spec.Containers[1].ReadinessProbe == nil {
		t.Error("the sidecar's probe must be kept")
	}
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	if env["A"] != "1" || env["B"] != "dev" || env["C"] != "flag" || env["D"] != "4" {
		t.Errorf("env %v", env)
	}
	if len(c.EnvFrom) != 1 || d.Spec.Template.Spec.ServiceAccountName != "web-sa" || len(d.Spec.Template.Spec.InitContainers) != 1 ||
		len(d.Spec.Template.Spec.Tolerations) != 1 || d.Spec.Template.Spec.NodeSelector["disk"] != "ssd" {
		t.Error("inherited pod settings lost")
	}
	if *c.SecurityContext.RunAsUser != 1000 || *d.Spec.Template.Spec.SecurityContext.FSGroup != 2000 {
		t.Error("security context not applied")
	}
	if _, ok := c.Resources.Requests[corev1.ResourceCPU]; ok {
		t.Error("resources set in the manifest replace the original's")
	}
	mounts := map[string]corev1.VolumeMount{}
	for _, m := range c.VolumeMounts {
		mounts[m.MountPath] = m
	}
	if mounts["/app"].Name != homeVolume || mounts["/app"].SubPath != "folders/app" || mounts["/usr/lib/x"].SubPath != "folders/usr/lib/x" ||
		mounts["/devtool"].Name != homeVolume || mounts["/etc/s"].Name != "secret" {
		t.Errorf("mounts %+v", c.VolumeMounts)
	}
}

func TestMirrorKeepsResourcesAndDefaults(t *testing.T) {
	orig := Workload{Deployment: sampleDeployment()}
	m, err := Mirror(orig, &manifest.Dev{Name: "web", Container: "web"}, MirrorOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := m.Deployment.Spec.Template.Spec.Containers[0]
	if c.Image != "web:1" || c.WorkingDir != "/srv" {
		t.Errorf("image/workdir %s %s", c.Image, c.WorkingDir)
	}
	if q := c.Resources.Requests[corev1.ResourceCPU]; q.String() != "100m" {
		t.Errorf("original resources lost: %v", c.Resources)
	}
	pvc, _ := VolumeClaim(orig, &manifest.Dev{Name: "web"})
	if q := pvc.Spec.Resources.Requests[corev1.ResourceStorage]; q.String() != "5Gi" || pvc.Spec.StorageClassName != nil {
		t.Errorf("default volume %v", pvc.Spec)
	}
	off, _ := VolumeClaim(orig, &manifest.Dev{Name: "web", PersistentVolume: &manifest.PersistentVolume{}})
	if off != nil {
		t.Error("disabled volume should give no claim")
	}
}

func TestMirrorStatefulSetGolden(t *testing.T) {
	orig := Workload{StatefulSet: sampleStatefulSet()}
	m, err := Mirror(orig, &manifest.Dev{Name: "db", Container: "web", Sync: []manifest.Sync{{Local: "/x", Remote: "/src"}}}, MirrorOptions{})
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "mirror-statefulset.yaml", m.StatefulSet)
	s := m.StatefulSet
	if s.Name != "db-devtool" || s.Spec.ServiceName != "db" || len(s.Spec.VolumeClaimTemplates) != 0 {
		t.Errorf("statefulset mirror %s %s %d", s.Name, s.Spec.ServiceName, len(s.Spec.VolumeClaimTemplates))
	}
	var claim string
	for _, v := range s.Spec.Template.Spec.Volumes {
		if v.Name == "code" {
			if v.PersistentVolumeClaim == nil || v.EmptyDir != nil {
				t.Fatalf("code volume %+v", v)
			}
			claim = v.PersistentVolumeClaim.ClaimName
		}
	}
	if claim != "code-db-0" {
		t.Errorf("the mirror should use the original's claim code-db-0, got %q", claim)
	}
}

func TestMirrorErrors(t *testing.T) {
	orig := Workload{Deployment: sampleDeployment()}
	_, err := Mirror(orig, &manifest.Dev{Name: "web"}, MirrorOptions{})
	if err == nil || !strings.Contains(err.Error(), "has 2 containers (web, sidecar)") || !strings.Contains(err.Error(), "dev.web.container") {
		t.Errorf("several containers: %v", err)
	}
	_, err = Mirror(orig, &manifest.Dev{Name: "web", Container: "nope"}, MirrorOptions{})
	if err == nil || !strings.Contains(err.Error(), `no container "nope"`) {
		t.Errorf("unknown container: %v", err)
	}
}

func TestSpecDigestIgnoresReplicas(t *testing.T) {
	a := sampleDeployment()
	b := a.DeepCopy()
	b.Spec.Replicas = ptr(int32(0))
	if SpecDigest(Workload{Deployment: a}) != SpecDigest(Workload{Deployment: b}) {
		t.Error("replicas changed the digest")
	}
	b.Spec.Template.Spec.Containers[0].Image = "web:2"
	if SpecDigest(Workload{Deployment: a}) == SpecDigest(Workload{Deployment: b}) {
		t.Error("a template change kept the digest")
	}
}

func TestFromCompose(t *testing.T) {
	d := FromCompose(&compose.Service{Name: "web", WorkingDir: "/app",
		Volumes: []compose.VolumeMount{{Kind: compose.VolumeHost, Source: "/home/me/web", Target: "/app"}, {Kind: compose.VolumeNamed, Source: "data", Target: "/data"}},
		Ports:   []compose.Port{{ContainerPort: 8080, HostPort: 9090}, {ContainerPort: 53, HostPort: 53, Protocol: "UDP"}, {ContainerPort: 9000}}})
	if d.Name != "web" || len(d.Sync) != 1 || d.Sync[0] != (manifest.Sync{Local: "/home/me/web", Remote: "/app"}) ||
		len(d.Forward) != 1 || d.Forward[0] != (manifest.Forward{Local: 9090, Remote: 8080}) || d.Workdir != "/app" {
		t.Errorf("%+v", d)
	}
	if d.Command != nil {
		t.Errorf("no command in the file: dev command %q, want none (a shell)", d.Command)
	}
	d = FromCompose(&compose.Service{Name: "web", Entrypoint: []string{"sh", "-c"}, Command: []string{"exec httpd -f -h /app"}})
	if strings.Join(d.Command, "|") != "sh|-c|exec httpd -f -h /app" {
		t.Errorf("dev command %q, want the entrypoint then the command", d.Command)
	}
}

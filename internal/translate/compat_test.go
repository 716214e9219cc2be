package translate

import (
	"path/filepath"
	"strings"
	"testing"

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
			if got := hasWarning(res, `"migrate" runs as a Job`, "web wait"); got != tc.wantWarn {
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

package pipeline

import (
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devtool/devtool/internal/platform/runspec"
)

// jobTTL deletes a finished Job (and, through its owner reference, what is left of its Secret) when
// the platform is not there to prune it: the leader keeps the last KeepRuns runs of a pipeline.
const jobTTL = int32(7 * 24 * 3600)

func runLabels(r *Run) map[string]string {
	l := map[string]string{
		LabelPipeline: r.Name, LabelRun: itoa(r.Number),
		"app.kubernetes.io/managed-by": "devtool", "app.kubernetes.io/name": "devtool-pipeline",
	}
	if r.Preview != "" {
		l[LabelPreview] = r.Preview
	}
	return l
}

// job is the run's Job: one pod, never retried, stopped by activeDeadlineSeconds at the run's
// timeout, running the runner image as nobody with a read-only root, no ServiceAccount token of
// its own, the run's Secret and the cluster's CA mounted read-only.
func (m *Manager) job(r *Run) *batchv1.Job {
	no, yes := false, true
	uid := int64(65534)
	backoff := int32(0)
	deadline := r.TimeoutSeconds
	ttl := jobTTL
	mode := int32(0o440)
	labels := runLabels(r)
	var sidecars []corev1.Container
	if len(m.o.Forwards) > 0 && m.o.ForwardImage != "" {
		// the builder's and registry's loopback addresses, relayed to their Services (a native
		// sidecar: started before the runner, stopped when it ends, the Job's result the runner's)
		always := corev1.ContainerRestartPolicyAlways
		sidecars = append(sidecars, corev1.Container{
			Name: "forward", Image: m.o.ForwardImage, ImagePullPolicy: corev1.PullIfNotPresent,
			Args: append([]string{"forward"}, m.o.Forwards...), RestartPolicy: &always,
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("5m"), corev1.ResourceMemory: resource.MustParse("16Mi")},
				Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")}},
			SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: &no, ReadOnlyRootFilesystem: &yes,
				Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
		})
	}
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name: r.Job, Namespace: r.Namespace, Labels: labels,
			Annotations: map[string]string{
				"devtool.dev/pipeline-user": r.User, "devtool.dev/pipeline-action": r.Action,
				"devtool.dev/pipeline-repository": r.Repository,
			},
		},
		Spec: batchv1.JobSpec{
			BackoffLimit:            &backoff,
			ActiveDeadlineSeconds:   &deadline,
			TTLSecondsAfterFinished: &ttl,
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					RestartPolicy:                corev1.RestartPolicyNever,
					InitContainers:               sidecars,
					AutomountServiceAccountToken: &no,
					EnableServiceLinks:           &no,
					SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: &yes, RunAsUser: &uid, RunAsGroup: &uid, FSGroup: &uid,
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
					Containers: []corev1.Container{{
						Name: runspec.Container, Image: m.o.RunnerImage, ImagePullPolicy: corev1.PullIfNotPresent,
						Args:       []string{"pipeline", "runner"},
						WorkingDir: runspec.WorkDir,
						Env: []corev1.EnvVar{
							{Name: "HOME", Value: runspec.WorkDir},
							{Name: "TMPDIR", Value: "/tmp"},
							{Name: "GIT_TERMINAL_PROMPT", Value: "0"},
						},
						TerminationMessagePath:   runspec.TerminationLog,
						TerminationMessagePolicy: corev1.TerminationMessageReadFile,
						Resources: corev1.ResourceRequirements{
							Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
							Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")},
						},
						SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: &no, ReadOnlyRootFilesystem: &yes,
							Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
						VolumeMounts: []corev1.VolumeMount{
							{Name: "run", MountPath: runspec.MountDir, ReadOnly: true},
							{Name: "kube-ca", MountPath: runspec.KubeCADir, ReadOnly: true},
							{Name: "work", MountPath: runspec.WorkDir},
							{Name: "tmp", MountPath: "/tmp"},
						},
					}},
					Volumes: []corev1.Volume{
						{Name: "run", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: r.Job, DefaultMode: &mode}}},
						{Name: "kube-ca", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
							LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"},
							Items:                []corev1.KeyToPath{{Key: "ca.crt", Path: runspec.KubeCAFile}},
						}}},
						{Name: "work", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
						{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
					},
				},
			},
		},
	}
}

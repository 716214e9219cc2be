package translate

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/devtool/devtool/internal/compose"
)

// LabelInitVolumes, set to "false" as a service label, turns the volume-seeding init container off
// (for images without a shell, such as scratch or distroless images, where it cannot run).
const LabelInitVolumes = "dev.devtool/init-volumes"

// InitVolumesContainer is the name of the init container that seeds volumes.
const InitVolumesContainer = "devtool-init-volumes"

// initVolumesContainer seeds empty volumes with what the image has at the mount path, as Docker
// does for a new volume: without it, mounting a volume over /usr/share/nginx/html or a database's
// preloaded directory would hide the image's files. It runs the service's own image (the files
// are in it), mounts each writable volume under /devtool-init/<n>, and copies only when the
// volume is empty (ignoring the lost+found of a fresh filesystem), so data written later is never
// overwritten and no marker file is left behind in the user's volume. A copy that fails (a
// non-root image, a path the image lacks) is not an error: the volume then simply starts empty.
func initVolumesContainer(s *compose.Service, main corev1.Container, seed []corev1.VolumeMount) *corev1.Container {
	if len(seed) == 0 || s.Labels[LabelInitVolumes] == "false" {
		return nil
	}
	var script []string
	var mounts []corev1.VolumeMount
	for i, m := range seed {
		dst := fmt.Sprintf("/devtool-init/%d", i)
		mounts = append(mounts, corev1.VolumeMount{Name: m.Name, MountPath: dst})
		src, d := shellQuote(m.MountPath), shellQuote(dst)
		script = append(script, fmt.Sprintf(
			`if [ -d %[1]s ] && [ -z "$(ls -A %[2]s | grep -vx lost+found)" ]; then echo devtool: seeding %[1]s from the image; cp -a %[1]s/. %[2]s/ || true; fi`,
			src, d))
	}
	return &corev1.Container{
		Name:            InitVolumesContainer,
		Image:           main.Image,
		ImagePullPolicy: main.ImagePullPolicy,
		Command:         []string{"sh", "-c", strings.Join(script, "\n")},
		VolumeMounts:    mounts,
		// The same resources and security context as the main container: quotas and pod security
		// admission then judge the pod the same way with or without it.
		Resources:       *main.Resources.DeepCopy(),
		SecurityContext: main.SecurityContext.DeepCopy(),
	}
}

// shellQuote quotes a string for sh: single quotes, with each ' written as '\”.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

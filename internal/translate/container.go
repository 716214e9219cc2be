package translate

import (
	"fmt"
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	"github.com/devtool/devtool/internal/compose"
)

// container is the service's main container.
func (t *translator) container(s *compose.Service) (corev1.Container, error) {
	image := s.Image
	if image == "" {
		// Build without image: the build package tags its result with DefaultImage, so the
		// reference is known before anything is built.
		image = DefaultImage(t.opts.Name, s.Name)
		t.warnf("service %q has no image: it will use %q, the image devtool builds from its build section", s.Name, image)
	}
	res, err := resources(s)
	if err != nil {
		return corev1.Container{}, err
	}
	c := corev1.Container{
		Name:  s.Name,
		Image: image,
		// Compose's entrypoint is the image ENTRYPOINT (Kubernetes command); command is the CMD (args).
		Command:         slices.Clone(s.Entrypoint),
		Args:            slices.Clone(s.Command),
		WorkingDir:      s.WorkingDir,
		Env:             env(s.Environment),
		Ports:           containerPorts(s),
		Resources:       res,
		SecurityContext: securityContext(s),
		// IfNotPresent: images built by devtool are tagged by content, so a present tag is the
		// right image, and clusters without internet access can run preloaded images.
		ImagePullPolicy: corev1.PullIfNotPresent,
	}
	if c.ReadinessProbe, c.LivenessProbe, err = probes(s); err != nil {
		return corev1.Container{}, err
	}
	return c, nil
}

// env sorts variables by name: Go maps have no order and the output must be deterministic.
func env(m map[string]string) []corev1.EnvVar {
	if len(m) == 0 {
		return nil
	}
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	out := make([]corev1.EnvVar, 0, len(names))
	for _, n := range names {
		out = append(out, corev1.EnvVar{Name: n, Value: m[n]})
	}
	return out
}

// securityContext: capabilities, and user's numeric uid:gid as runAsUser/runAsGroup.
func securityContext(s *compose.Service) *corev1.SecurityContext {
	if len(s.CapAdd) == 0 && len(s.CapDrop) == 0 && s.RunAsUser == nil && s.RunAsGroup == nil {
		return nil
	}
	sc := &corev1.SecurityContext{}
	if len(s.CapAdd) > 0 || len(s.CapDrop) > 0 {
		caps := &corev1.Capabilities{}
		for _, c := range s.CapAdd {
			caps.Add = append(caps.Add, corev1.Capability(c))
		}
		for _, c := range s.CapDrop {
			caps.Drop = append(caps.Drop, corev1.Capability(c))
		}
		sc.Capabilities = caps
	}
	if s.RunAsUser != nil {
		sc.RunAsUser = ptr.To(*s.RunAsUser)
	}
	if s.RunAsGroup != nil {
		sc.RunAsGroup = ptr.To(*s.RunAsGroup)
	}
	return sc
}

// resources parses requests and limits. Both Compose notations arrive unified from the loader,
// so they translate identically. A request above its limit is rejected here, with the service
// named, rather than by the API server halfway through a deploy.
func resources(s *compose.Service) (corev1.ResourceRequirements, error) {
	var out corev1.ResourceRequirements
	var err error
	if out.Requests, err = resourceList(s, "requests", s.Resources.Requests); err != nil {
		return out, err
	}
	if out.Limits, err = resourceList(s, "limits", s.Resources.Limits); err != nil {
		return out, err
	}
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		req, hasReq := out.Requests[name]
		if lim, ok := out.Limits[name]; ok && hasReq && req.Cmp(lim) > 0 {
			return out, errorAt(s.Pos, "service %q: %s request %s is more than its limit %s", s.Name, name, req.String(), lim.String())
		}
	}
	return out, nil
}

func resourceList(s *compose.Service, what string, l compose.ResourceList) (corev1.ResourceList, error) {
	out := corev1.ResourceList{}
	for _, r := range []struct {
		name  corev1.ResourceName
		value string
	}{{corev1.ResourceCPU, l.CPU}, {corev1.ResourceMemory, l.Memory}} {
		if r.value == "" {
			continue
		}
		q, err := resource.ParseQuantity(r.value)
		if err != nil {
			return nil, errorAt(s.Pos, "service %q: %s %s %q is not a quantity (like 500m, 0.5, 512Mi): %v", s.Name, what, r.name, r.value, err)
		}
		if q.Sign() < 0 {
			return nil, errorAt(s.Pos, "service %q: %s %s %q is negative", s.Name, what, r.name, r.value)
		}
		out[r.name] = q
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

// containerPorts lists each container port once (a port written twice, e.g. "80" and "8080:80",
// is one container port), in file order.
func containerPorts(s *compose.Service) []corev1.ContainerPort {
	var out []corev1.ContainerPort
	seen := map[string]bool{}
	for _, p := range s.Ports {
		proto := protocol(p)
		key := fmt.Sprint(p.ContainerPort, proto)
		if seen[key] {
			continue
		}
		seen[key] = true
		out = append(out, corev1.ContainerPort{ContainerPort: p.ContainerPort, Protocol: proto})
	}
	return out
}

// tcpContainerPorts are the ports deploy can dial to check service_healthy without a healthcheck.
func tcpContainerPorts(s *compose.Service) []int32 {
	var out []int32
	for _, p := range containerPorts(s) {
		if p.Protocol == corev1.ProtocolTCP {
			out = append(out, p.ContainerPort)
		}
	}
	return out
}

func protocol(p compose.Port) corev1.Protocol {
	if p.Protocol == "UDP" || p.Protocol == "udp" {
		return corev1.ProtocolUDP
	}
	return corev1.ProtocolTCP
}

package translate

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/devtool/devtool/internal/compose"
)

// serviceNetwork is the Kubernetes Service of a Compose service with ports.
type serviceNetwork struct {
	ports []corev1.ServicePort
}

// hasPort reports whether the Service listens on a TCP port (what an Ingress backend can use).
func (n *serviceNetwork) hasPort(port int32) bool {
	for _, p := range n.ports {
		if p.Port == port && p.Protocol == corev1.ProtocolTCP {
			return true
		}
	}
	return false
}

// network computes the Service ports: one per container port (so other services reach it on the
// port the container listens on, as in Compose), plus, for each host:container pair whose host
// port differs, the host port mapped to the container port (so a URL written with the host port
// works inside the cluster too). nil when the service has no ports.
func (t *translator) network(s *compose.Service) (*serviceNetwork, error) {
	if len(s.Ports) == 0 {
		return nil, nil
	}
	n := &serviceNetwork{}
	target := map[string]int32{} // "port/proto" -> target port already in the Service
	add := func(port, targetPort int32, proto corev1.Protocol) {
		key := fmt.Sprint(port, "/", proto)
		if prev, ok := target[key]; ok {
			if prev != targetPort {
				t.warnf("service %q: port %d/%s is mapped to container ports %d and %d; the Service keeps %d", s.Name, port, proto, prev, targetPort, prev)
			}
			return
		}
		target[key] = targetPort
		n.ports = append(n.ports, corev1.ServicePort{
			Name:       servicePortName(port, proto),
			Port:       port,
			TargetPort: intstr.FromInt32(targetPort),
			Protocol:   proto,
		})
	}
	for _, p := range s.Ports {
		if err := checkPort(s, p.ContainerPort, "container"); err != nil {
			return nil, err
		}
		add(p.ContainerPort, p.ContainerPort, protocol(p))
	}
	for _, p := range s.Ports {
		if p.HostPort == 0 || p.HostPort == p.ContainerPort {
			continue
		}
		if err := checkPort(s, p.HostPort, "host"); err != nil {
			return nil, err
		}
		add(p.HostPort, p.ContainerPort, protocol(p))
	}
	return n, nil
}

func checkPort(s *compose.Service, port int32, what string) error {
	if port < 1 || port > 65535 {
		return errorAt(s.Pos, "service %q: %s port %d is not between 1 and 65535", s.Name, what, port)
	}
	return nil
}

// servicePortName: "p-8080", "p-53-udp". Unique within the Service because (port, protocol) is.
func servicePortName(port int32, proto corev1.Protocol) string {
	name := fmt.Sprintf("p-%d", port)
	if proto != corev1.ProtocolTCP {
		name += "-" + strings.ToLower(string(proto))
	}
	return name
}

// service is the ClusterIP Service, named like the Compose service so other services reach it by
// the same host name they use under Compose.
func (t *translator) service(s *compose.Service, n *serviceNetwork) *corev1.Service {
	return &corev1.Service{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{
			Name:        s.Name,
			Namespace:   t.opts.Namespace,
			Labels:      t.serviceLabels(s.Name),
			Annotations: keepPolicy(s),
		},
		Spec: t.serviceSpec(s, n),
	}
}

// serviceSpec: ClusterIP; deploy.endpoint_mode: dnsrr makes it headless (clusterIP None), so
// the name resolves to every pod's address, as Swarm's DNS round robin does.
func (t *translator) serviceSpec(s *compose.Service, n *serviceNetwork) corev1.ServiceSpec {
	spec := corev1.ServiceSpec{
		Type:     corev1.ServiceTypeClusterIP,
		Selector: t.selectorLabels(s.Name),
		Ports:    n.ports,
	}
	if s.Headless {
		spec.ClusterIP = corev1.ClusterIPNone
	}
	return spec
}

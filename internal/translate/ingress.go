package translate

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/devtool/devtool/internal/compose"
)

// ingressSpec is one Ingress before it becomes an object: a name, annotations and its routes.
type ingressSpec struct {
	name        string
	annotations map[string]string
	routes      []compose.Route
	origin      string // what asked for it, for collision errors
	pos         compose.Position
}

// ingresses makes the public routes: one Ingress per public port, then one per endpoint.
//
// A port is public when written host:container over TCP and the container port is not in
// NeverPublicPorts. A service with one public port gets an Ingress named like the service; with
// several, one per port named <service>-<container port>, so each has its own host (two Ingresses
// on one host and path would fight over it). The host is <ingress name>-<namespace>.<cluster_domain>.
//
// Endpoints (A4): the list notation is one Ingress named after the environment, the map notation
// one per key, each with a path per route.
func (t *translator) ingresses() ([]runtime.Object, []Endpoint, error) {
	var specs []ingressSpec
	for _, s := range t.order {
		ports := t.publicPorts(s)
		for _, port := range ports {
			name := s.Name
			if len(ports) > 1 {
				name = fmt.Sprintf("%s-%d", s.Name, port)
			}
			specs = append(specs, ingressSpec{
				name:        name,
				annotations: keepPolicy(s),
				routes:      []compose.Route{{Path: "/", Service: s.Name, Port: port, Pos: s.Pos}},
				origin:      fmt.Sprintf("public port %d of service %q", port, s.Name),
				pos:         s.Pos,
			})
		}
	}
	for _, e := range t.p.Endpoints {
		if e == nil {
			continue
		}
		spec := ingressSpec{
			name: e.Name,
			// Endpoint labels become annotations, like every Compose label (A1): ingress
			// controllers are configured through annotations (TLS, auth, rewrites), and the
			// Ingress's own labels stay the devtool ones that destroy and prune rely on.
			annotations: annotationsFrom(e.Labels),
			routes:      e.Rules,
			origin:      fmt.Sprintf("endpoint %q", e.Name),
			pos:         e.Pos,
		}
		if e.Name == "" {
			spec.name = t.opts.Name
			spec.origin = "the endpoints list"
		}
		if k, why := checkAnnotationKeys(e.Labels); k != "" {
			return nil, nil, errorAt(e.Pos, "%s: label %q cannot become a Kubernetes annotation: %s", spec.origin, k, why)
		}
		specs = append(specs, spec)
	}

	var objs []runtime.Object
	var endpoints []Endpoint
	names := map[string]string{}
	for _, sp := range specs {
		if prev, ok := names[sp.name]; ok {
			return nil, nil, errorAt(sp.pos, "%s and %s both need an Ingress named %q (and the same host): rename one", prev, sp.origin, sp.name)
		}
		names[sp.name] = sp.origin
		ing, eps, err := t.ingress(sp)
		if err != nil {
			return nil, nil, err
		}
		objs = append(objs, ing)
		endpoints = append(endpoints, eps...)
	}
	if len(objs) > 0 && t.opts.ClusterDomain == "" {
		t.warnf("endpoints have no URL because no cluster domain is configured (set it in the context or in DEVTOOL_CLUSTER_DOMAIN): their Ingresses answer on any host")
	}
	return objs, endpoints, nil
}

// publicPorts are the container ports of s that get an Ingress, each once, in file order.
func (t *translator) publicPorts(s *compose.Service) []int32 {
	var out []int32
	seen := map[int32]bool{}
	for _, p := range s.Ports {
		if p.HostPort == 0 || seen[p.ContainerPort] {
			continue
		}
		seen[p.ContainerPort] = true
		if protocol(p) != corev1.ProtocolTCP {
			t.warnf("service %q: port %d/%s is not made public: an Ingress carries HTTP only", s.Name, p.ContainerPort, protocol(p))
			continue
		}
		if product, never := NeverPublicPorts[p.ContainerPort]; never {
			t.warnf("service %q: port %d (%s) is never made public; it stays reachable inside the cluster, and an endpoint can expose it on purpose", s.Name, p.ContainerPort, product)
			continue
		}
		out = append(out, p.ContainerPort)
	}
	return out
}

func (t *translator) ingress(sp ingressSpec) (*networkingv1.Ingress, []Endpoint, error) {
	if errs := validation.IsDNS1123Label(sp.name); len(errs) > 0 {
		return nil, nil, errorAt(sp.pos, "%s: %q is not a valid Ingress name: %s", sp.origin, sp.name, strings.Join(errs, "; "))
	}
	if len(sp.routes) == 0 {
		return nil, nil, errorAt(sp.pos, "%s has no routes", sp.origin)
	}
	host := ""
	if t.opts.ClusterDomain != "" {
		label := sp.name + "-" + t.opts.Namespace
		if errs := validation.IsDNS1123Label(label); len(errs) > 0 {
			return nil, nil, errorAt(sp.pos, "%s: host name %q (name-namespace) is not a valid DNS label: %s", sp.origin, label, strings.Join(errs, "; "))
		}
		host = label + "." + t.opts.ClusterDomain
	}

	prefix := networkingv1.PathTypePrefix
	var paths []networkingv1.HTTPIngressPath
	var endpoints []Endpoint
	seenPath := map[string]bool{}
	for _, r := range sp.routes {
		if err := t.checkRoute(sp, r); err != nil {
			return nil, nil, err
		}
		if seenPath[r.Path] {
			return nil, nil, errorAt(r.Pos, "%s routes path %s twice", sp.origin, r.Path)
		}
		seenPath[r.Path] = true
		paths = append(paths, networkingv1.HTTPIngressPath{
			Path:     r.Path,
			PathType: &prefix,
			Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
				Name: r.Service,
				Port: networkingv1.ServiceBackendPort{Number: r.Port},
			}},
		})
		url := ""
		if host != "" {
			url = EndpointURL(host, t.opts.EndpointPort, r.Path)
		}
		endpoints = append(endpoints, Endpoint{Name: sp.name, URL: url, Host: host, Path: r.Path, Service: r.Service, Port: r.Port})
	}
	ing := &networkingv1.Ingress{
		TypeMeta: metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "Ingress"},
		ObjectMeta: metav1.ObjectMeta{
			Name:        sp.name,
			Namespace:   t.opts.Namespace,
			Labels:      t.objectLabels(),
			Annotations: sp.annotations,
		},
		Spec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{
			Host:             host,
			IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: paths}},
		}}},
	}
	if c := t.opts.IngressClass; c != "" {
		ing.Spec.IngressClassName = &c
	}
	return ing, endpoints, nil
}

// checkRoute: a route must reach a TCP port of a Service this translation creates.
func (t *translator) checkRoute(sp ingressSpec, r compose.Route) error {
	if !strings.HasPrefix(r.Path, "/") {
		return errorAt(r.Pos, "%s: path %q must start with /", sp.origin, r.Path)
	}
	if !t.known[r.Service] { // a map: one route per public port of thousands of services stays linear
		return errorAt(r.Pos, "%s routes %s to service %q, which is not a service of this file", sp.origin, r.Path, r.Service)
	}
	net := t.services[r.Service]
	if net == nil {
		return errorAt(r.Pos, "%s routes %s to service %q, which has no ports", sp.origin, r.Path, r.Service)
	}
	if !net.hasPort(r.Port) {
		return errorAt(r.Pos, "%s routes %s to port %d of service %q, which does not expose it over TCP", sp.origin, r.Path, r.Port, r.Service)
	}
	return nil
}

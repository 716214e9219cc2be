package deploy

import (
	"fmt"
	"maps"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/devtool/devtool/internal/compose"
	"github.com/devtool/devtool/internal/translate"
)

// EndpointIngresses makes the Ingresses of a manifest's deploy.endpoints, shaped as translate
// makes a Compose file's (same names, hosts <name>-<namespace>.<domain>, Prefix paths, labels
// as annotations). Unlike a Compose file's, the routes may name Services that the deploy
// commands create, so they are not checked against a Compose project.
// o gives the namespace, the domain, the ingress class and the endpoints' port (its Name is unused: env).
func EndpointIngresses(env string, o translate.Options, eps []*compose.Endpoint) ([]runtime.Object, []translate.Endpoint, error) {
	namespace, clusterDomain := o.Namespace, o.ClusterDomain
	var objs []runtime.Object
	var out []translate.Endpoint
	seen := map[string]bool{}
	prefix := networkingv1.PathTypePrefix
	for _, e := range eps {
		if e == nil {
			continue
		}
		name, origin := e.Name, fmt.Sprintf("endpoint %q", e.Name)
		if name == "" {
			name, origin = env, "the endpoints list"
		}
		if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
			return nil, nil, fmt.Errorf("%s: %s: %q is not a valid Ingress name: %s", e.Pos, origin, name, strings.Join(errs, "; "))
		}
		if seen[name] {
			return nil, nil, fmt.Errorf("%s: two endpoints need an Ingress named %q: rename one", e.Pos, name)
		}
		seen[name] = true
		if len(e.Rules) == 0 {
			return nil, nil, fmt.Errorf("%s: %s has no routes", e.Pos, origin)
		}
		host := ""
		if clusterDomain != "" {
			host = name + "-" + namespace + "." + clusterDomain
		}
		var paths []networkingv1.HTTPIngressPath
		for _, r := range e.Rules {
			if !strings.HasPrefix(r.Path, "/") {
				return nil, nil, fmt.Errorf("%s: %s: path %q must start with /", r.Pos, origin, r.Path)
			}
			paths = append(paths, networkingv1.HTTPIngressPath{Path: r.Path, PathType: &prefix,
				Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
					Name: r.Service, Port: networkingv1.ServiceBackendPort{Number: r.Port}}}})
			url := ""
			if host != "" {
				url = translate.EndpointURL(host, o.EndpointPort, r.Path)
			}
			out = append(out, translate.Endpoint{Name: name, URL: url, Host: host, Path: r.Path, Service: r.Service, Port: r.Port})
		}
		var ann map[string]string
		if len(e.Labels) > 0 {
			ann = maps.Clone(e.Labels)
		}
		ing := &networkingv1.Ingress{
			TypeMeta: metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "Ingress"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Annotations: ann,
				Labels: map[string]string{translate.LabelDeployedBy: env, translate.LabelManagedBy: translate.ManagedByValue}},
			Spec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{Host: host,
				IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: paths}}}}},
		}
		if c := o.IngressClass; c != "" {
			ing.Spec.IngressClassName = &c
		}
		objs = append(objs, ing)
	}
	return objs, out, nil
}

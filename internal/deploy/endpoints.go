package deploy

import (
	"context"
	"fmt"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/devtool/devtool/internal/kube"
	"github.com/devtool/devtool/internal/translate"
)

// PublicEndpoint is one URL served by an Ingress of the environment.
type PublicEndpoint struct {
	URL     string `json:"url"`
	Ingress string `json:"ingress"`
	Service string `json:"service"`
	Port    int32  `json:"port"`
}

// Endpoints lists the public endpoints of everything deployed by an environment, read from its
// Ingresses in the cluster (so it covers objects created by deploy commands too). An Ingress
// rule without a host has no public URL and is listed with an empty URL. port is the HTTPS port
// endpoints answer on (0: 443; a platform's ingress on loopback has its own).
func Endpoints(ctx context.Context, cs kubernetes.Interface, ns, env string, port int) ([]PublicEndpoint, error) {
	l, err := cs.NetworkingV1().Ingresses(ns).List(ctx, metav1.ListOptions{LabelSelector: kube.LabelDeployedBy + "=" + env})
	if err != nil {
		return nil, fmt.Errorf("listing ingresses in namespace %s: %w", ns, err)
	}
	var out []PublicEndpoint
	for _, ing := range l.Items {
		for _, r := range ing.Spec.Rules {
			if r.HTTP == nil {
				continue
			}
			for _, p := range r.HTTP.Paths {
				e := PublicEndpoint{Ingress: ing.Name}
				if p.Backend.Service != nil {
					e.Service, e.Port = p.Backend.Service.Name, p.Backend.Service.Port.Number
				}
				if r.Host != "" {
					// Endpoints are HTTPS routes (spec A4); TLS is terminated by the cluster's ingress.
					e.URL = translate.EndpointURL(r.Host, port, p.Path)
				}
				out = append(out, e)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		return strings.Join([]string{out[i].URL, out[i].Ingress, out[i].Service}, " ") < strings.Join([]string{out[j].URL, out[j].Ingress, out[j].Service}, " ")
	})
	return out, nil
}

package ingress

import (
	"errors"
	"fmt"
	"net"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// sliceIndex indexes EndpointSlices by "namespace/service" (their kubernetes.io/service-name label).
const sliceIndex = "service"

func sliceService(obj any) ([]string, error) {
	s, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return nil, nil
	}
	svc := s.Labels[discoveryv1.LabelServiceName]
	if svc == "" {
		return nil, nil
	}
	return []string{s.Namespace + "/" + svc}, nil
}

// errNoEndpoint is a backend with nothing ready to take requests (503, and the Waker's cue).
var errNoEndpoint = errors.New("no ready endpoint")

// resolver turns a Backend into the addresses of its ready endpoints: pod IP and target port, read
// from the Service's EndpointSlices as ingress controllers do. Dialling the Service's cluster IP
// instead fails right after a deploy, until kube-proxy has programmed the new endpoint ("connection
// refused"); headless Services have no cluster IP at all.
type resolver struct {
	services corelisters.ServiceLister
	slices   cache.Indexer
}

// resolve answers the ready endpoints of b, sorted; when none is ready, those still serving while
// they terminate (as kube-proxy does). errNoEndpoint when there are none at all.
func (r *resolver) resolve(b Backend) ([]string, error) {
	if b.Resource != "" {
		return nil, fmt.Errorf("backend %s: resource backends are not served by the devtool ingress", b)
	}
	svc, err := r.services.Services(b.Namespace).Get(b.Service)
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("service %s/%s does not exist", b.Namespace, b.Service)
	} else if err != nil {
		return nil, err
	}
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		return nil, fmt.Errorf("service %s/%s is an ExternalName service: the devtool ingress serves only services with endpoints", b.Namespace, b.Service)
	}
	var sp *corev1.ServicePort
	for i := range svc.Spec.Ports {
		p := &svc.Spec.Ports[i]
		if p.Protocol != "" && p.Protocol != corev1.ProtocolTCP {
			continue
		}
		if b.Port.Name != "" && p.Name == b.Port.Name || b.Port.Name == "" && p.Port == b.Port.Number {
			sp = p
			break
		}
	}
	if sp == nil {
		return nil, fmt.Errorf("service %s/%s has no TCP port %s", b.Namespace, b.Service, portString(b))
	}
	objs, err := r.slices.ByIndex(sliceIndex, b.Namespace+"/"+b.Service)
	if err != nil {
		return nil, err
	}
	var ready, terminating []string
	seen := map[string]bool{}
	for _, o := range objs {
		s := o.(*discoveryv1.EndpointSlice)
		if s.AddressType != discoveryv1.AddressTypeIPv4 && s.AddressType != discoveryv1.AddressTypeIPv6 {
			continue
		}
		port := int32(-1)
		for _, p := range s.Ports {
			if (p.Protocol == nil || *p.Protocol == corev1.ProtocolTCP) && p.Port != nil && ptrString(p.Name) == sp.Name {
				port = *p.Port
				break
			}
		}
		if port < 0 {
			continue
		}
		for _, e := range s.Endpoints {
			if len(e.Addresses) == 0 {
				continue
			}
			addr := net.JoinHostPort(e.Addresses[0], strconv.Itoa(int(port)))
			if seen[addr] {
				continue
			}
			isReady := e.Conditions.Ready == nil || *e.Conditions.Ready
			serving := isReady
			if e.Conditions.Serving != nil {
				serving = *e.Conditions.Serving
			}
			term := e.Conditions.Terminating != nil && *e.Conditions.Terminating
			switch {
			case isReady && !term:
				seen[addr] = true
				ready = append(ready, addr)
			case serving && term:
				seen[addr] = true
				terminating = append(terminating, addr)
			}
		}
	}
	out := ready
	if len(out) == 0 {
		out = terminating
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("service %s/%s port %s: %w", b.Namespace, b.Service, portString(b), errNoEndpoint)
	}
	sort.Strings(out)
	return out, nil
}

func portString(b Backend) string {
	if b.Port.Name != "" {
		return b.Port.Name
	}
	return strconv.Itoa(int(b.Port.Number))
}

func ptrString(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// picker spreads requests over a backend's endpoints (round robin) and keeps away for a while
// from an endpoint whose dial was just refused.
type picker struct {
	next sync.Map // backend string -> *atomic.Uint64
	mu   sync.Mutex
	down map[string]time.Time // address -> until
	now  func() time.Time
}

// downFor is how long an endpoint that refused a connection is skipped (unless all are).
const downFor = 2 * time.Second

func newPicker(now func() time.Time) *picker {
	return &picker{down: map[string]time.Time{}, now: now}
}

// order returns the addresses in the order to try them: round robin from this request's turn,
// endpoints marked down last.
func (p *picker) order(key string, addrs []string) []string {
	v, _ := p.next.LoadOrStore(key, new(atomic.Uint64))
	n := v.(*atomic.Uint64).Add(1)
	start := int(n % uint64(len(addrs)))
	out := make([]string, 0, len(addrs))
	var later []string
	now := p.now()
	p.mu.Lock()
	for i := range addrs {
		a := addrs[(start+i)%len(addrs)]
		if until, ok := p.down[a]; ok && now.Before(until) {
			later = append(later, a)
			continue
		} else if ok {
			delete(p.down, a)
		}
		out = append(out, a)
	}
	p.mu.Unlock()
	return append(out, later...)
}

func (p *picker) markDown(addr string) {
	p.mu.Lock()
	p.down[addr] = p.now().Add(downFor)
	if len(p.down) > 4096 { // bounded: forget the expired ones
		now := p.now()
		for a, until := range p.down {
			if now.After(until) {
				delete(p.down, a)
			}
		}
	}
	p.mu.Unlock()
}

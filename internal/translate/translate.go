package translate

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/devtool/devtool/internal/compose"
)

// translator carries what the steps of one translation share. It lives for one Translate call.
type translator struct {
	p    *compose.Project
	opts Options

	order    []*compose.Service         // dependency order
	kinds    map[string]string          // service -> KindDeployment/KindStatefulSet/KindJob
	services map[string]*serviceNetwork // services that get a Kubernetes Service (have ports)
	known    map[string]bool            // every service name (Project.Service is a linear search)
	volumes  *volumePlan

	warnings []string
}

// Translate turns a loaded Compose project into Kubernetes objects. It is pure: the same input
// always gives the same output, byte for byte once serialised.
func Translate(p *compose.Project, opts Options) (*Result, error) {
	return TranslateContext(context.Background(), p, opts)
}

// TranslateContext is Translate that stops when ctx is cancelled (between services),
// returning ctx's error.
func TranslateContext(ctx context.Context, p *compose.Project, opts Options) (*Result, error) {
	if p == nil {
		return nil, errors.New("translate: no project")
	}
	if err := validateOptions(opts); err != nil {
		return nil, err
	}
	t := &translator{p: p, opts: opts, kinds: map[string]string{}, services: map[string]*serviceNetwork{},
		known: make(map[string]bool, len(p.Services))}
	for _, s := range p.Services {
		if s != nil {
			t.known[s.Name] = true
		}
	}
	if err := t.validateServices(); err != nil {
		return nil, err
	}
	order, err := dependencyOrder(p)
	if err != nil {
		return nil, err
	}
	t.order = order
	t.assignKinds()
	if err := t.validateDependencies(); err != nil {
		return nil, err
	}
	if t.volumes, err = t.planVolumes(); err != nil {
		return nil, err
	}

	res := &Result{}
	var svcObjs, workloads []runtime.Object
	for i, s := range order {
		if i%64 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		net, err := t.network(s)
		if err != nil {
			return nil, err
		}
		if net != nil {
			t.services[s.Name] = net
			svcObjs = append(svcObjs, t.service(s, net))
		}
		w, info, err := t.workload(s)
		if err != nil {
			return nil, err
		}
		workloads = append(workloads, w)
		res.Services = append(res.Services, info)
	}
	ingresses, endpoints, err := t.ingresses()
	if err != nil {
		return nil, err
	}

	files, err := t.fileObjects()
	if err != nil {
		return nil, err
	}
	res.Objects = append(res.Objects, files...)
	res.Objects = append(res.Objects, t.volumes.objects...)
	res.Objects = append(res.Objects, svcObjs...)
	res.Objects = append(res.Objects, workloads...)
	res.Objects = append(res.Objects, ingresses...)
	res.Endpoints = endpoints
	res.Warnings = t.warnings
	return res, nil
}

func (t *translator) warnf(format string, args ...any) {
	t.warnings = append(t.warnings, fmt.Sprintf(format, args...))
}

// validateOptions: the environment name becomes a label value and part of hostnames, the
// namespace goes on every object; both must be DNS labels.
func validateOptions(o Options) error {
	if o.Name == "" {
		return errors.New("translate: the environment name is empty")
	}
	if errs := validation.IsDNS1123Label(o.Name); len(errs) > 0 {
		return fmt.Errorf("environment name %q is not valid for Kubernetes: %s", o.Name, strings.Join(errs, "; "))
	}
	if o.Namespace == "" {
		return errors.New("translate: the namespace is empty")
	}
	if errs := validation.IsDNS1123Label(o.Namespace); len(errs) > 0 {
		return fmt.Errorf("namespace %q is not valid for Kubernetes: %s", o.Namespace, strings.Join(errs, "; "))
	}
	if o.ClusterDomain != "" {
		if errs := validation.IsDNS1123Subdomain(o.ClusterDomain); len(errs) > 0 {
			return fmt.Errorf("cluster domain %q is not a valid DNS name: %s", o.ClusterDomain, strings.Join(errs, "; "))
		}
	}
	return nil
}

// validateServices checks what the loader should already have checked, because a bad value here
// would otherwise surface as a less clear API server error in the middle of a deploy.
func (t *translator) validateServices() error {
	seen := map[string]bool{}
	for _, s := range t.p.Services {
		if s == nil {
			return errors.New("translate: nil service in project")
		}
		// A Service's name must be a DNS-1035 label (it becomes a DNS name and must start with a letter).
		if errs := validation.IsDNS1035Label(s.Name); len(errs) > 0 {
			return errorAt(s.Pos, "service name %q is not valid for Kubernetes: %s", s.Name, strings.Join(errs, "; "))
		}
		if seen[s.Name] {
			return errorAt(s.Pos, "service %q is defined twice", s.Name)
		}
		seen[s.Name] = true
		if s.Image == "" && s.Build == nil {
			return errorAt(s.Pos, "service %q has neither image nor build", s.Name)
		}
		switch s.Restart.Policy {
		case "", compose.RestartAlways, compose.RestartNever, compose.RestartOnFailure:
		default:
			return errorAt(s.Pos, "service %q: unknown restart policy %q (expected %s, %s or %s)", s.Name, s.Restart.Policy,
				compose.RestartAlways, compose.RestartNever, compose.RestartOnFailure)
		}
		if s.Restart.MaxAttempts != nil && *s.Restart.MaxAttempts < 0 {
			return errorAt(s.Pos, "service %q: max_attempts %d is negative", s.Name, *s.Restart.MaxAttempts)
		}
		if s.Scale < 0 {
			return errorAt(s.Pos, "service %q: scale %d is negative", s.Name, s.Scale)
		}
		if k, why := checkAnnotationKeys(s.Labels); k != "" {
			return errorAt(s.Pos, "service %q: label %q cannot become a Kubernetes annotation: %s", s.Name, k, why)
		}
		if k, why := checkAnnotationKeys(s.Annotations); k != "" {
			return errorAt(s.Pos, "service %q: annotation %q is not a valid Kubernetes annotation key: %s", s.Name, k, why)
		}
	}
	return nil
}

// validateDependencies rejects waits that could never end: a service_completed_successfully
// dependency must be a Job, because Deployments and StatefulSets never complete.
func (t *translator) validateDependencies() error {
	for _, s := range t.order {
		for _, d := range s.DependsOn {
			switch d.Condition {
			case "", compose.ConditionStarted, compose.ConditionHealthy:
			case compose.ConditionCompleted:
				if k := t.kinds[d.Service]; k != KindJob {
					return errorAt(d.Pos, "service %q waits for %q to complete successfully, but %q becomes a %s, which never completes: give %q a restart policy of \"no\" or \"on-failure\" so it runs as a Job",
						s.Name, d.Service, d.Service, k, d.Service)
				}
			default:
				return errorAt(d.Pos, "service %q: unknown depends_on condition %q for %q (expected %s, %s or %s)",
					s.Name, d.Condition, d.Service, compose.ConditionStarted, compose.ConditionHealthy, compose.ConditionCompleted)
			}
		}
	}
	return nil
}

// assignKinds picks each service's workload kind (kindOf). A service others wait on with
// service_completed_successfully and no restart policy of its own runs to completion in Docker
// Compose (its default restart is "no"), so it becomes a Job, with a warning; with an explicit
// restart: always it stays what it is and validateDependencies refuses the wait.
func (t *translator) assignKinds() {
	waited := map[string][]string{} // service -> services waiting for it to complete
	for _, s := range t.order {
		for _, d := range s.DependsOn {
			if d.Condition == compose.ConditionCompleted {
				waited[d.Service] = append(waited[d.Service], s.Name)
			}
		}
	}
	for _, s := range t.order {
		k := kindOf(s)
		if k != KindJob && len(waited[s.Name]) > 0 && !s.Restart.Explicit {
			t.warnf("service %q runs as a Job (once, to completion, as in Docker Compose): it sets no restart policy and %s waits for it with service_completed_successfully",
				s.Name, strings.Join(waited[s.Name], ", "))
			k = KindJob
		}
		t.kinds[s.Name] = k
	}
}

// dependencies converts depends_on entries; an empty condition is the spec's default, started.
func dependencies(s *compose.Service) []Dependency {
	var out []Dependency
	for _, d := range s.DependsOn {
		c := d.Condition
		if c == "" {
			c = ConditionStarted
		}
		out = append(out, Dependency{Service: d.Service, Condition: c})
	}
	return out
}

package compose

import (
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/devtool/devtool/internal/yamlsrc"
)

// unifyDeploy reads the fields that have two notations, the Compose v2 one (scale, resources,
// restart) and the v3 deploy one (replicas, resources, restart_policy), and checks that a
// file using both says the same thing in both.
func (l *loader) unifyDeploy(s *Service, field string, scale, resources, deploy, restart *yamlsrc.Entry) {
	var scaleSet, restartSet, resourcesSet bool
	if scale != nil {
		if v, ok := l.Int(scale.Val, yamlsrc.Join(field, "scale")); ok {
			if v < 0 {
				l.Errorf(scale.Val, yamlsrc.Join(field, "scale"), "expected zero or more replicas, found %d", v)
			} else {
				s.Scale, scaleSet = v, true
			}
		}
	}
	if resources != nil {
		s.Resources = l.resources(resources.Val, yamlsrc.Join(field, "resources"), "requests", "cpu")
		resourcesSet = true
	}
	if restart != nil {
		f := yamlsrc.Join(field, "restart")
		if str, ok := l.Str(restart.Val, f); ok && strings.TrimSpace(str) == "" {
			// restart: ${RESTART:-} with the variable unset: Compose reads it as the default.
		} else if ok {
			if r, ok := parseRestart(str); ok {
				r.Explicit = true
				s.Restart, restartSet = r, true
			} else {
				l.Errorf(restart.Val, f, "expected one of always, unless-stopped, any, no, none, never, on-failure or on-failure:<max attempts>, found %q", str)
			}
		}
	}
	if deploy == nil {
		return
	}
	df := yamlsrc.Join(field, "deploy")
	es, _ := l.Mapping(deploy.Val, df)
	for _, e := range es {
		f := yamlsrc.Join(df, e.Key)
		switch e.Key {
		case "replicas":
			v, ok := l.Int(e.Val, f)
			switch {
			case !ok:
			case v < 0:
				l.Errorf(e.Val, f, "expected zero or more replicas, found %d", v)
			case scaleSet && v != s.Scale:
				l.Errorf(e.Val, f, "scale is %d and deploy.replicas is %d; set one of them", s.Scale, v)
			default:
				s.Scale = v
			}
		case "resources":
			r := l.resources(e.Val, f, "reservations", "cpus")
			if resourcesSet && r != s.Resources {
				l.Errorf(e.KeyNode, f, "resources and deploy.resources are both set and differ; set one of them")
			} else {
				s.Resources = r
			}
		case "labels":
			// Swarm's service labels: annotations, like the service's own labels.
			for k, v := range l.StringMap(e.Val, f) {
				if s.Labels == nil {
					s.Labels = map[string]string{}
				}
				if old, ok := s.Labels[k]; ok && old != v {
					l.Errorf(e.Val, f, "label %q is %q in labels and %q in deploy.labels; set one of them", k, old, v)
					continue
				}
				s.Labels[k] = v
			}
		case "endpoint_mode":
			switch m, _ := l.Str(e.Val, f); m {
			case "dnsrr":
				s.Headless = true
			case "vip", "":
			default:
				l.Errorf(e.Val, f, "expected vip or dnsrr, found %q", m)
			}
		case "restart_policy":
			r, ok := l.restartPolicy(e.Val, f)
			if ok && !r.Explicit {
				continue
			}
			if ok && restartSet && !sameRestart(r, s.Restart) {
				l.Errorf(e.KeyNode, f, "restart is %q and deploy.restart_policy says %q; set one of them", s.Restart.Policy, r.Policy)
			} else if ok {
				s.Restart = r
			}
		default:
			if !strings.HasPrefix(e.Key, "x-") {
				l.Ignore(e.KeyNode, f)
			}
		}
	}
}

// resources reads {requests|reservations, limits} each with {cpu|cpus, memory}.
func (l *loader) resources(n *yaml.Node, field, requestsKey, cpuKey string) Resources {
	var r Resources
	es, _ := l.Mapping(n, field)
	short := requestsKey == "requests" // the service's resources field, not deploy.resources
	var shortList []yamlsrc.Entry
	for _, e := range es {
		f := yamlsrc.Join(field, e.Key)
		switch {
		case e.Key == requestsKey:
			r.Requests = l.resourceList(e.Val, f, cpuKey, short)
		case e.Key == "limits":
			r.Limits = l.resourceList(e.Val, f, cpuKey, false)
		case short && (e.Key == "cpu" || e.Key == "memory" || e.Key == "storage"):
			shortList = append(shortList, e)
		default:
			l.Ignore(e.KeyNode, f)
		}
	}
	// The short form resources: {cpu, memory, storage} is what the service asks for:
	// requests (a limit would kill the container at the first spike).
	if len(shortList) > 0 {
		m := &yaml.Node{Kind: yaml.MappingNode}
		for _, e := range shortList {
			m.Content = append(m.Content, e.KeyNode, e.Val)
		}
		req := l.resourceList(m, field, cpuKey, true)
		for _, pair := range []struct {
			dst *string
			v   string
		}{{&r.Requests.CPU, req.CPU}, {&r.Requests.Memory, req.Memory}, {&r.Requests.Storage, req.Storage}, {&r.Requests.StorageClass, req.StorageClass}} {
			if pair.v == "" {
				continue
			}
			if *pair.dst != "" && *pair.dst != pair.v {
				l.Errorf(n, field, "the short form and requests both set a value and differ; set one of them")
				continue
			}
			*pair.dst = pair.v
		}
	}
	return r
}

func (l *loader) resourceList(n *yaml.Node, field, cpuKey string, storage bool) ResourceList {
	var r ResourceList
	es, _ := l.Mapping(n, field)
	for _, e := range es {
		f := yamlsrc.Join(field, e.Key)
		if storage && e.Key == "storage" {
			r.Storage, r.StorageClass = l.storage(e.Val, f)
			continue
		}
		switch e.Key {
		case cpuKey:
			if s, ok := l.Str(e.Val, f); ok {
				q, err := cpuQuantity(s)
				if err != nil {
					l.Errorf(e.Val, f, "%v", err)
				}
				r.CPU = q
			}
		case "memory":
			if s, ok := l.Str(e.Val, f); ok {
				q, err := memoryQuantity(s)
				if err != nil {
					l.Errorf(e.Val, f, "%v", err)
				}
				r.Memory = q
			}
		default:
			l.Ignore(e.KeyNode, f)
		}
	}
	return r
}

// parseRestart normalises the restart values of the spec's table; "on-failure:N" is Docker's
// way of writing a maximum number of attempts.
func parseRestart(s string) (Restart, bool) {
	switch strings.TrimSpace(s) {
	case "always", "unless-stopped", "any":
		return Restart{Policy: RestartAlways}, true
	case "none", "never", "no":
		return Restart{Policy: RestartNever}, true
	case "on-failure":
		return Restart{Policy: RestartOnFailure}, true
	}
	if n, ok := strings.CutPrefix(strings.TrimSpace(s), "on-failure:"); ok {
		if v, err := strconv.Atoi(n); err == nil && v >= 0 {
			return Restart{Policy: RestartOnFailure, MaxAttempts: &v}, true
		}
	}
	return Restart{}, false
}

func (l *loader) restartPolicy(n *yaml.Node, field string) (Restart, bool) {
	r := Restart{Policy: RestartAlways}
	es, ok := l.Mapping(n, field)
	if !ok {
		return r, false
	}
	var maxNode *yaml.Node
	for _, e := range es {
		f := yamlsrc.Join(field, e.Key)
		switch e.Key {
		case "condition":
			s, ok := l.Str(e.Val, f)
			if !ok {
				return r, false
			}
			switch strings.TrimSpace(s) {
			case "":
				// An empty value from an unset variable: the default.
				continue
			case "any":
				r.Policy = RestartAlways
			case "none":
				r.Policy = RestartNever
			case "on-failure":
				r.Policy = RestartOnFailure
			default:
				rr, good := parseRestart(s)
				if !good || rr.MaxAttempts != nil {
					l.Errorf(e.Val, f, "expected none, on-failure or any, found %q", s)
					return r, false
				}
				l.Warnf("%s: %s: %q is a word of restart, not of restart_policy.condition (none, on-failure, any); read as %s", l.Pos(e.Val), f, s, rr.Policy)
				r.Policy = rr.Policy
			}
			r.Explicit = true
		case "max_attempts":
			v, ok := l.Int(e.Val, f)
			if !ok {
				return r, false
			}
			if v < 0 {
				l.Errorf(e.Val, f, "expected zero or more attempts, found %d", v)
				return r, false
			}
			r.MaxAttempts, maxNode = &v, e.KeyNode
		default:
			l.Ignore(e.KeyNode, f)
		}
	}
	if r.MaxAttempts != nil && !r.Explicit {
		// max_attempts alone: Swarm's default condition is any.
		r.Explicit = true
	}
	if r.MaxAttempts != nil && r.Policy != RestartOnFailure {
		l.Warnf("%s: %s.max_attempts applies only to condition on-failure; ignored", l.Pos(maxNode), field)
		r.MaxAttempts = nil
	}
	return r, true
}

func sameRestart(a, b Restart) bool {
	if a.Policy != b.Policy || (a.MaxAttempts == nil) != (b.MaxAttempts == nil) {
		return false
	}
	return a.MaxAttempts == nil || *a.MaxAttempts == *b.MaxAttempts
}

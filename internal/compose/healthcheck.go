package compose

import (
	"strings"

	"gopkg.in/yaml.v3"
)

// healthcheck reads A2. It returns nil when the check is disabled (disable: true or test NONE)
// or has neither test nor http (a warning says so: there would be nothing to probe).
func (l *loader) healthcheck(n *yaml.Node, field string) *Healthcheck {
	h := &Healthcheck{Readiness: true}
	es, ok := l.mapping(n, field)
	if !ok {
		return nil
	}
	disabled := false
	var testNode, httpNode *yaml.Node
	for _, e := range es {
		f := joinField(field, e.key)
		switch e.key {
		case "test":
			testNode = e.keyNode
			exec, none, ok := l.healthTest(e.val, f)
			disabled = disabled || none
			if ok {
				h.Exec = exec
			}
		case "http":
			httpNode = e.keyNode
			h.HTTP = l.httpCheck(e.val, f)
		case "disable":
			if v, ok := l.boolVal(e.val, f); ok && v {
				disabled = true
			}
		case "interval":
			h.Interval, _ = l.duration(e.val, f, false)
		case "timeout":
			h.Timeout, _ = l.duration(e.val, f, false)
		case "start_period":
			h.StartPeriod, _ = l.duration(e.val, f, false)
		case "retries":
			if v, ok := l.intVal(e.val, f); ok {
				if v < 0 {
					l.errorf(e.val, f, "expected zero or more retries, found %d", v)
				}
				h.Retries = v
			}
		case "x-devtool-readiness":
			h.Readiness, _ = l.boolVal(e.val, f)
		case "x-devtool-liveness":
			h.Liveness, _ = l.boolVal(e.val, f)
		default:
			if !strings.HasPrefix(e.key, "x-") {
				l.ignore(e.keyNode, f)
			}
		}
	}
	if disabled {
		return nil
	}
	if h.Exec != nil && h.HTTP != nil {
		l.errorf(httpNode, field, "set either test or http, not both")
		return nil
	}
	if h.Exec == nil && h.HTTP == nil {
		if testNode == nil && httpNode == nil {
			l.warnf("%s: %s has neither test nor http; no probe is created", l.pos(n), field)
		}
		return nil
	}
	return h
}

// healthTest reads test: ["NONE"], ["CMD", args...], ["CMD-SHELL", cmd], or a string (which is
// CMD-SHELL). Shell forms run through sh -c. none reports NONE.
func (l *loader) healthTest(n *yaml.Node, field string) (exec []string, none, ok bool) {
	vals, isString, ok := l.strOrList(n, field)
	if !ok {
		return nil, false, false
	}
	if isString {
		if strings.TrimSpace(vals[0]) == "" {
			l.errorf(n, field, "expected a command, found an empty string")
			return nil, false, false
		}
		return []string{"sh", "-c", vals[0]}, false, true
	}
	if len(vals) == 0 {
		l.errorf(n, field, "expected a list starting with NONE, CMD or CMD-SHELL, found an empty list")
		return nil, false, false
	}
	switch vals[0] {
	case "NONE":
		return nil, true, true
	case "CMD":
		if len(vals) < 2 {
			l.errorf(n, field, "CMD needs a command after it")
			return nil, false, false
		}
		return vals[1:], false, true
	case "CMD-SHELL":
		if len(vals) < 2 {
			l.errorf(n, field, "CMD-SHELL needs a command after it")
			return nil, false, false
		}
		return []string{"sh", "-c", strings.Join(vals[1:], " ")}, false, true
	}
	l.errorf(n, field, "expected a list starting with NONE, CMD or CMD-SHELL, found %q first", vals[0])
	return nil, false, false
}

func (l *loader) httpCheck(n *yaml.Node, field string) *HTTPCheck {
	es, ok := l.mapping(n, field)
	if !ok {
		return nil
	}
	h := &HTTPCheck{}
	var portSet bool
	for _, e := range es {
		f := joinField(field, e.key)
		switch e.key {
		case "path":
			h.Path, _ = l.str(e.val, f)
		case "port":
			if p, ok := l.intVal(e.val, f); ok {
				if p < 1 || p > 65535 {
					l.errorf(e.val, f, "expected a port between 1 and 65535, found %d", p)
				}
				h.Port, portSet = int32(p), true
			}
		default:
			l.ignore(e.keyNode, f)
		}
	}
	if h.Path == "" {
		h.Path = "/"
	}
	if !strings.HasPrefix(h.Path, "/") {
		l.errorf(n, joinField(field, "path"), "expected a path starting with /, found %q", h.Path)
	}
	if !portSet {
		l.errorf(n, field, "port is required")
		return nil
	}
	return h
}

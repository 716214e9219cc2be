package compose

import (
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/devtool/devtool/internal/yamlsrc"
)

// healthcheck reads A2. It returns nil when the check is disabled (disable: true or test NONE)
// or has neither test nor http (a warning says so: there would be nothing to probe).
func (l *loader) healthcheck(n *yaml.Node, field string) *Healthcheck {
	h := &Healthcheck{Readiness: true}
	es, ok := l.Mapping(n, field)
	if !ok {
		return nil
	}
	disabled := false
	var testNode, httpNode *yaml.Node
	for _, e := range es {
		f := yamlsrc.Join(field, e.Key)
		switch e.Key {
		case "test":
			testNode = e.KeyNode
			exec, none, ok := l.healthTest(e.Val, f)
			disabled = disabled || none
			if ok {
				h.Exec = exec
			}
		case "http":
			httpNode = e.KeyNode
			h.HTTP = l.httpCheck(e.Val, f)
		case "disable":
			if v, ok := l.Bool(e.Val, f); ok && v {
				disabled = true
			}
		case "interval":
			h.Interval, _ = l.duration(e.Val, f, false)
		case "timeout":
			h.Timeout, _ = l.duration(e.Val, f, false)
		case "start_period":
			h.StartPeriod, _ = l.duration(e.Val, f, false)
		case "retries":
			if d := yamlsrc.Deref(e.Val); d != nil && d.Kind == yaml.ScalarNode && d.Tag != "!!null" && strings.TrimSpace(d.Value) == "" {
				// retries: ${X:-} with X unset: Compose reads it as unset.
				continue
			}
			if v, ok := l.Int(e.Val, f); ok {
				if v < 0 {
					l.Errorf(e.Val, f, "expected zero or more retries, found %d", v)
				}
				h.Retries = v
			}
		case "x-devtool-readiness":
			h.Readiness, _ = l.Bool(e.Val, f)
		case "x-devtool-liveness":
			h.Liveness, _ = l.Bool(e.Val, f)
		default:
			if !strings.HasPrefix(e.Key, "x-") {
				l.Ignore(e.KeyNode, f)
			}
		}
	}
	if disabled {
		return nil
	}
	if !h.Readiness && !h.Liveness && (h.Exec != nil || h.HTTP != nil) {
		l.Errorf(n, field, "x-devtool-readiness and x-devtool-liveness are both false, so the check would make no probe; remove the healthcheck, set disable: true, or turn one of them on")
		return nil
	}
	if h.Exec != nil && h.HTTP != nil {
		l.Errorf(httpNode, field, "set either test or http, not both")
		return nil
	}
	if h.Exec == nil && h.HTTP == nil {
		if testNode == nil && httpNode == nil {
			l.Warnf("%s: %s has neither test nor http; no probe is created", l.Pos(n), field)
		}
		return nil
	}
	if h.Exec != nil {
		// A test that only curls the container itself is an HTTP probe (Okteto does the
		// same), so an image without curl still gets a probe that works.
		if c := curlCheck(h.Exec); c != nil {
			h.Exec, h.HTTP = nil, c
		}
	}
	return h
}

// healthTest reads test: ["NONE"], ["CMD", args...], ["CMD-SHELL", cmd], or a string (which is
// CMD-SHELL). Shell forms run through sh -c. none reports NONE.
func (l *loader) healthTest(n *yaml.Node, field string) (exec []string, none, ok bool) {
	vals, isString, ok := l.StrOrList(n, field)
	if !ok {
		return nil, false, false
	}
	if isString {
		if strings.TrimSpace(vals[0]) == "" {
			l.Errorf(n, field, "expected a command, found an empty string")
			return nil, false, false
		}
		return []string{"sh", "-c", vals[0]}, false, true
	}
	if len(vals) == 0 {
		l.Errorf(n, field, "expected a list starting with NONE, CMD or CMD-SHELL, found an empty list")
		return nil, false, false
	}
	switch vals[0] {
	case "NONE":
		return nil, true, true
	case "CMD":
		if len(vals) < 2 {
			l.Errorf(n, field, "CMD needs a command after it")
			return nil, false, false
		}
		return vals[1:], false, true
	case "CMD-SHELL":
		if len(vals) < 2 {
			l.Errorf(n, field, "CMD-SHELL needs a command after it")
			return nil, false, false
		}
		return []string{"sh", "-c", strings.Join(vals[1:], " ")}, false, true
	}
	l.Errorf(n, field, "expected a list starting with NONE, CMD or CMD-SHELL, found %q first", vals[0])
	return nil, false, false
}

func (l *loader) httpCheck(n *yaml.Node, field string) *HTTPCheck {
	es, ok := l.Mapping(n, field)
	if !ok {
		return nil
	}
	h := &HTTPCheck{}
	var portSet bool
	for _, e := range es {
		f := yamlsrc.Join(field, e.Key)
		switch e.Key {
		case "path":
			h.Path, _ = l.Str(e.Val, f)
		case "port":
			if p, ok := l.Int(e.Val, f); ok {
				if p < 1 || p > 65535 {
					l.Errorf(e.Val, f, "expected a port between 1 and 65535, found %d", p)
				}
				h.Port, portSet = int32(p), true
			}
		default:
			l.Ignore(e.KeyNode, f)
		}
	}
	if h.Path == "" {
		h.Path = "/"
	}
	if !strings.HasPrefix(h.Path, "/") {
		l.Errorf(n, yamlsrc.Join(field, "path"), "expected a path starting with /, found %q", h.Path)
	}
	if !portSet {
		l.Errorf(n, field, "port is required")
		return nil
	}
	return h
}

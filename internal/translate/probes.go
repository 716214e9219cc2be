package translate

import (
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/devtool/devtool/internal/compose"
)

// probes turns a healthcheck (A2) into a readiness probe (x-devtool-readiness, default true)
// and/or a liveness probe (x-devtool-liveness, default false). Both get the same check.
//
// Timing: interval → periodSeconds, timeout → timeoutSeconds, start_period → initialDelaySeconds,
// retries → failureThreshold. Kubernetes counts whole seconds, so durations round up (a 500ms
// timeout becomes 1s, never 0). Unset values keep the Kubernetes defaults (every 10s, 1s timeout,
// 3 failures), which suit development better than Compose's 30s interval.
func probes(s *compose.Service) (readiness, liveness *corev1.Probe, err error) {
	h := s.Healthcheck
	if h == nil || (!h.Readiness && !h.Liveness) {
		return nil, nil, nil
	}
	var handler corev1.ProbeHandler
	switch {
	case h.HTTP != nil:
		if h.HTTP.Port <= 0 || h.HTTP.Port > 65535 {
			return nil, nil, errorAt(s.Pos, "service %q: healthcheck http port %d is not a port", s.Name, h.HTTP.Port)
		}
		path := h.HTTP.Path
		if path == "" {
			path = "/"
		}
		scheme := corev1.URISchemeHTTP
		switch h.HTTP.Scheme {
		case "", "http":
		case "https":
			// The kubelet does not verify the certificate (like curl -k).
			scheme = corev1.URISchemeHTTPS
		default:
			return nil, nil, errorAt(s.Pos, "service %q: healthcheck http scheme %q is not http or https", s.Name, h.HTTP.Scheme)
		}
		handler.HTTPGet = &corev1.HTTPGetAction{Path: path, Port: intstr.FromInt32(h.HTTP.Port), Scheme: scheme}
	case len(h.Exec) > 0:
		// The loader already turned CMD-SHELL and plain strings into ["sh", "-c", cmd], so the
		// shell sees the command whole (Okteto splits it into words, which breaks pipes and quotes).
		handler.Exec = &corev1.ExecAction{Command: slices.Clone(h.Exec)}
	default:
		return nil, nil, errorAt(s.Pos, "service %q: healthcheck has neither test nor http", s.Name)
	}
	if h.Retries < 0 {
		return nil, nil, errorAt(s.Pos, "service %q: healthcheck retries %d is negative", s.Name, h.Retries)
	}
	probe := func() *corev1.Probe {
		p := &corev1.Probe{
			ProbeHandler:        *handler.DeepCopy(),
			PeriodSeconds:       probeSeconds(h.Interval),
			TimeoutSeconds:      probeSeconds(h.Timeout),
			InitialDelaySeconds: probeSeconds(h.StartPeriod),
			FailureThreshold:    int32(h.Retries),
		}
		return p
	}
	if h.Readiness {
		readiness = probe()
	}
	if h.Liveness {
		liveness = probe()
	}
	return readiness, liveness, nil
}

// probeSeconds rounds up to whole seconds with a minimum of 1 for a set value; 0 means unset.
func probeSeconds(d time.Duration) int32 {
	if d <= 0 {
		return 0
	}
	return int32(max(ceilSeconds(d), 1))
}

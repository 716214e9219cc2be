// Package logs streams the logs of an environment's pods: it selects pods by environment label (or the
// whole namespace), names each pod's service, filters services by prefix regular expressions, follows
// every started container of every matching pod (including pods and container restarts that appear
// later) and writes whole, prefixed lines to a writer the caller gives. It never prints to the terminal.
package logs

import (
	"fmt"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devtool/devtool/internal/kube"
	"github.com/devtool/devtool/internal/translate"
)

// CompilePrefix compiles a service expression matched as a prefix of service names: "api" matches
// "api" and "api-worker", "^api$"-like exactness is written "api$", and ".*db" matches "db" anywhere.
// The serviceName argument and --exclude both use it, so they follow the same rules. "" returns nil
// (no filter).
func CompilePrefix(expr string) (*regexp.Regexp, error) {
	if expr == "" {
		return nil, nil
	}
	if _, err := regexp.Compile(expr); err != nil { // report the user's text, not our wrapper
		return nil, err
	}
	return regexp.Compile("^(?:" + expr + ")")
}

// Filter chooses services by name. A nil Include selects every service; a nil Exclude removes none.
type Filter struct {
	Include *regexp.Regexp
	Exclude *regexp.Regexp
}

// Match reports whether the service is selected.
func (f Filter) Match(service string) bool {
	if f.Include != nil && !f.Include.MatchString(service) {
		return false
	}
	return f.Exclude == nil || !f.Exclude.MatchString(service)
}

// String describes the filter for messages.
func (f Filter) String() string {
	var parts []string
	if f.Include != nil {
		parts = append(parts, fmt.Sprintf("services matching %s", f.Include))
	}
	if f.Exclude != nil {
		parts = append(parts, fmt.Sprintf("excluding %s", f.Exclude))
	}
	return strings.Join(parts, ", ")
}

// Selector is the label selector of an environment's pods ("" for the whole namespace).
func Selector(environment string) string {
	if environment == "" {
		return ""
	}
	return kube.LabelDeployedBy + "=" + environment
}

// ServiceName names the service a pod belongs to: its app.kubernetes.io/name label (set on the pods
// of Compose services), else the name of its controlling workload — a ReplicaSet counts as its
// Deployment, whose name is the ReplicaSet's without the pod-template-hash suffix — else the pod name.
func ServiceName(pod *corev1.Pod) string {
	if n := pod.Labels[translate.LabelName]; n != "" {
		return n
	}
	if ref := metav1.GetControllerOf(pod); ref != nil && ref.Name != "" {
		if ref.Kind == "ReplicaSet" {
			if h := pod.Labels["pod-template-hash"]; h != "" {
				if base, ok := strings.CutSuffix(ref.Name, "-"+h); ok && base != "" {
					return base
				}
			}
		}
		return ref.Name
	}
	return pod.Name
}

// ShortPodName is how lines name a pod: the service name plus the last dash-separated part of the pod
// name ("api-7d9f8b6c5-x2k4p" of service "api" is "api-x2k4p"), so lines of one service's pods stay
// short yet tell the pods apart. Pods not named after their service keep their own name.
func ShortPodName(service, pod string) string {
	rest, ok := strings.CutPrefix(pod, service+"-")
	if !ok || rest == "" {
		return pod
	}
	if i := strings.LastIndexByte(rest, '-'); i >= 0 {
		rest = rest[i+1:]
	}
	return service + "-" + rest
}

package labelproxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"

	"sigs.k8s.io/yaml"
)

// target is what an API request addresses, parsed from its path the way the API server does.
type target struct {
	group       string // "" for the core group
	namespace   string
	resource    string
	name        string
	subresource string // also set for deeper paths (pods/x/proxy/...)
}

// namespaceSubresources are the subresources of the Namespace object itself: /api/v1/namespaces/x/status
// addresses the namespace x, not a resource called "status" in it.
var namespaceSubresources = map[string]bool{"status": true, "finalize": true}

// virtualResources are accepted by POST but never stored (reviews, bindings): nothing to label.
var virtualResources = map[string]bool{
	"bindings":                  true,
	"tokenreviews":              true,
	"subjectaccessreviews":      true,
	"selfsubjectaccessreviews":  true,
	"localsubjectaccessreviews": true,
	"selfsubjectrulesreviews":   true,
	"selfsubjectreviews":        true,
}

// parseTarget reads /api/v1/... and /apis/<group>/<version>/... paths. ok is false for everything
// else (discovery, /version, /openapi, /healthz, legacy /watch paths).
func parseTarget(path string) (t target, ok bool) {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		t.group = parts[1]
		parts = parts[3:]
	default:
		return target{}, false
	}
	if len(parts) == 0 || parts[0] == "" || parts[0] == "watch" {
		return target{}, false
	}
	if parts[0] == "namespaces" && len(parts) > 1 {
		t.namespace = parts[1]
		if len(parts) > 2 && !namespaceSubresources[parts[2]] {
			parts = parts[2:]
		}
	}
	t.resource = parts[0]
	if len(parts) > 1 {
		t.name = parts[1]
	}
	if len(parts) > 2 {
		t.subresource = strings.Join(parts[2:], "/")
	}
	return t, true
}

// op is the kind of write, which decides how much of the body is changed.
type op int

const (
	opCreate op = iota // POST: a whole new object
	opUpdate           // PUT: a whole object replacing the stored one
	opApply            // PATCH application/apply-patch+yaml: the fields the applier owns
	opPatch            // PATCH merge or strategic merge: only what changes
)

// podTemplates says where a workload keeps its pod templates, by group and resource. Selectors are
// never touched: adding a label to a template's metadata keeps every selector matching.
func podTemplates(group, resource string) [][]string {
	switch {
	case group == "apps" && (resource == "deployments" || resource == "statefulsets" ||
		resource == "daemonsets" || resource == "replicasets"):
		return [][]string{{"spec", "template"}}
	case group == "batch" && resource == "jobs":
		return [][]string{{"spec", "template"}}
	case group == "batch" && resource == "cronjobs":
		// The Jobs a CronJob starts, and their pods.
		return [][]string{{"spec", "jobTemplate"}, {"spec", "jobTemplate", "spec", "template"}}
	}
	return nil
}

// clusterScoped reports whether a request addresses a cluster-scoped object: its path names no
// namespace, or it is a Namespace itself (/api/v1/namespaces/x names x as the object).
func clusterScoped(t target) bool {
	return t.namespace == "" || (t.group == "" && t.resource == "namespaces")
}

// labeler adds a fixed set of labels to request bodies.
type labeler struct {
	labels map[string]string
	// cluster are added, besides labels, to the metadata (never the templates) of cluster-scoped
	// objects.
	cluster map[string]string
	// keepSet leaves a label the body already sets to a non-empty value (requests from devtool
	// itself, which labels its own objects); otherwise the proxy's value replaces it.
	keepSet bool
}

// object labels one decoded object (or patch) in place; it reports whether it changed anything.
func (l labeler) object(obj map[string]any, t target, o op) bool {
	if kind, _ := obj["kind"].(string); strings.HasSuffix(kind, "List") {
		if items, ok := obj["items"].([]any); ok && (o == opCreate || o == opUpdate || o == opApply) {
			changed := false
			for _, it := range items {
				if m, ok := it.(map[string]any); ok {
					changed = l.object(m, itemTarget(m, t), opCreate) || changed
				}
			}
			return changed
		}
	}
	changed := l.setLabels(obj, []string{"metadata"}, o == opPatch, l.metadataLabels(t))
	paths := podTemplates(t.group, t.resource)
	// A Job's pod template cannot change after creation: label it only when it is created.
	if t.group == "batch" && t.resource == "jobs" && o != opCreate {
		paths = nil
	}
	for _, p := range paths {
		// Only templates the body already has: a patch or partial apply that does not touch the template
		// must not start a rollout.
		if _, ok := lookup(obj, p).(map[string]any); !ok {
			continue
		}
		changed = l.setLabels(obj, append(append([]string{}, p...), "metadata"), false, l.labels) || changed
	}
	return changed
}

// metadataLabels are the labels of an object's own metadata: labels, and cluster for a cluster-scoped
// object.
func (l labeler) metadataLabels(t target) map[string]string {
	if len(l.cluster) == 0 || !clusterScoped(t) {
		return l.labels
	}
	m := make(map[string]string, len(l.labels)+len(l.cluster))
	for k, v := range l.labels {
		m[k] = v
	}
	for k, v := range l.cluster {
		m[k] = v
	}
	return m
}

// itemTarget derives the target of a List item from its apiVersion and kind; its namespace is the
// item's own, else the one of the request (parent) that carries the list.
func itemTarget(m map[string]any, parent target) target {
	apiVersion, _ := m["apiVersion"].(string)
	kind, _ := m["kind"].(string)
	group := ""
	if i := strings.Index(apiVersion, "/"); i >= 0 {
		group = apiVersion[:i]
	}
	ns := parent.namespace
	if md, ok := m["metadata"].(map[string]any); ok {
		if s, _ := md["namespace"].(string); s != "" {
			ns = s
		}
	}
	return target{group: group, namespace: ns, resource: strings.ToLower(kind) + "s"}
}

// setLabels sets want under obj[path...].labels, creating the maps on the way. In a merge patch a
// null metadata means nothing to us (leave it); a null labels map would delete every label, and
// becomes our labels.
func (l labeler) setLabels(obj map[string]any, path []string, patch bool, want map[string]string) bool {
	cur := obj
	for _, k := range path {
		next, present := cur[k]
		if next == nil && present && patch {
			return false
		}
		m, ok := next.(map[string]any)
		if !ok {
			if next != nil {
				return false // not an object: leave it for the API server to reject
			}
			m = map[string]any{}
			cur[k] = m
		}
		cur = m
	}
	labels, ok := cur["labels"].(map[string]any)
	if !ok {
		if v := cur["labels"]; v != nil {
			return false
		}
		labels = map[string]any{}
		cur["labels"] = labels
	}
	changed := false
	for k, v := range want {
		old, _ := labels[k].(string)
		if l.keepSet && old != "" {
			continue
		}
		if old != v {
			labels[k] = v
			changed = true
		}
	}
	return changed
}

func lookup(obj map[string]any, path []string) any {
	var cur any = obj
	for _, k := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[k]
	}
	return cur
}

// errNotObject means the body is not a single JSON or YAML object; it is forwarded as it came.
var errNotObject = errors.New("body is not a single object")

// decodeJSON decodes one JSON object, keeping numbers exact.
func decodeJSON(body []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var obj map[string]any
	if err := dec.Decode(&obj); err != nil || obj == nil {
		return nil, errNotObject
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errNotObject
	}
	return obj, nil
}

// decodeYAMLOrJSON decodes an apply patch or a YAML create body.
func decodeYAMLOrJSON(body []byte) (map[string]any, error) {
	if trimmed := bytes.TrimSpace(body); len(trimmed) > 0 && trimmed[0] == '{' {
		if obj, err := decodeJSON(trimmed); err == nil {
			return obj, nil
		}
	}
	j, err := yaml.YAMLToJSON(body)
	if err != nil {
		return nil, errNotObject
	}
	return decodeJSON(j)
}

// rewrite labels a write request's body. It returns the new body and content type, or ok=false when
// the request must be forwarded as it came (not a labelled kind of write, protobuf, unparsable: the
// API server then answers as it would without the proxy).
func (l labeler) rewrite(method, mediaType string, t target, body []byte) (out []byte, contentType string, ok bool) {
	var o op
	var decode func([]byte) (map[string]any, error)
	switch {
	case method == http.MethodPost && mediaType == "application/json":
		o, decode, contentType = opCreate, decodeJSON, "application/json"
	case method == http.MethodPost && mediaType == "application/yaml":
		o, decode, contentType = opCreate, decodeYAMLOrJSON, "application/json"
	case method == http.MethodPut && mediaType == "application/json":
		o, decode, contentType = opUpdate, decodeJSON, "application/json"
	case method == http.MethodPut && mediaType == "application/yaml":
		o, decode, contentType = opUpdate, decodeYAMLOrJSON, "application/json"
	case method == http.MethodPatch && mediaType == "application/apply-patch+yaml":
		// JSON is YAML: the labelled body goes back as JSON under the same content type.
		o, decode, contentType = opApply, decodeYAMLOrJSON, mediaType
	case method == http.MethodPatch && (mediaType == "application/merge-patch+json" ||
		mediaType == "application/strategic-merge-patch+json"):
		o, decode, contentType = opPatch, decodeJSON, mediaType
	default:
		// JSON patches (a list of operations on paths that may not exist) and protobuf are forwarded as
		// they came.
		return nil, "", false
	}
	obj, err := decode(body)
	if err != nil {
		return nil, "", false
	}
	if !l.object(obj, t, o) && contentType == mediaType {
		return body, mediaType, true
	}
	out, err = json.Marshal(obj)
	if err != nil {
		return nil, "", false
	}
	return out, contentType, true
}

// labelled reports whether a request is a write of a stored object (not a subresource, not a review).
func labelled(method string, t target) bool {
	if t.subresource != "" || virtualResources[t.resource] {
		return false
	}
	switch method {
	case http.MethodPost:
		return t.name == ""
	case http.MethodPut, http.MethodPatch:
		return t.name != ""
	}
	return false
}

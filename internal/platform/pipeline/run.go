// Package pipeline runs pipelines for the platform server: a run is recorded as a PipelineRun
// custom resource in the platform's namespace and executed as a Kubernetes Job in the target
// namespace, created impersonating the triggering user, whose pod clones the repository and runs
// `devtool deploy` or `destroy` with that user's Kubernetes token — a TokenRequest of the user's
// ServiceAccount sized to the timeout and bound to a Secret of the platform (deleted when the run
// ends, which revokes the token at once). One run at a time per pipeline: runs are numbered, and
// run n+1 is created only after run n is seen finished (AlreadyExists settles a race between two
// replicas). The leader (Controller) records each finished run, deletes its token Secrets, and
// keeps the last KeepRuns runs of each pipeline with their Jobs: the log of a finished run is its
// Job's pod log, kept by the kubelet outside etcd and read back bounded to LogBytes.
//
// The package never prints; the server maps its errors (store's classes) to HTTP statuses.
package pipeline

import (
	"fmt"
	"hash/fnv"
	"sort"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/devtool/devtool/internal/platform/api"
	"github.com/devtool/devtool/internal/platform/store"
)

// RunResource is the PipelineRun custom resource.
var RunResource = schema.GroupVersionResource{Group: store.Group, Version: store.Version, Resource: "pipelineruns"}

// Labels of runs, their Jobs and Secrets.
const (
	LabelPipeline  = "devtool.dev/pipeline"           // the pipeline's name
	LabelNamespace = "devtool.dev/pipeline-namespace" // on a run: the target namespace
	LabelRun       = "devtool.dev/pipeline-run"       // on a Job, its pod and Secrets: the run's number
	LabelPreview   = "devtool.dev/preview"            // on a preview's runs: the preview
	labelJobName   = "batch.kubernetes.io/job-name"
)

// Run is one PipelineRun: the API's view plus what only the platform needs.
type Run struct {
	api.PipelineRun
	Volumes         bool
	Preview         string // the preview it deploys or destroys, if any
	Anchor          string // the Secret in the platform's namespace the run's token is bound to
	ResourceVersion string
}

// ID is the run's object name: <namespace>.<pipeline>.<number> (both names are DNS labels, so the
// dots separate them unambiguously).
func ID(ns, name string, n int) string { return ns + "." + name + "." + strconv.Itoa(n) }

// JobName is the run's Job (and token Secret) in the target namespace: at most 63 characters, as
// the Job's pods carry it in a label.
func JobName(name string, n int) string {
	suffix := "-" + strconv.Itoa(n)
	base := "devtool-run-" + name
	if len(base)+len(suffix) > 63 {
		h := fnv.New32a()
		h.Write([]byte(name))
		tag := fmt.Sprintf("-%08x", h.Sum32())
		base = strings.TrimRight(base[:63-len(suffix)-len(tag)], "-") + tag
	}
	return base + suffix
}

func (r *Run) object(platformNS string) *unstructured.Unstructured {
	spec := map[string]any{
		"namespace": r.Namespace, "pipeline": r.Name, "number": int64(r.Number), "action": r.Action,
		"user": r.User, "repository": r.Repository, "branch": r.Branch, "file": r.File,
		"volumes": r.Volumes, "timeoutSeconds": r.TimeoutSeconds, "job": r.Job, "anchor": r.Anchor,
	}
	if len(r.VarNames) > 0 {
		names := make([]any, len(r.VarNames))
		for i, n := range r.VarNames {
			names[i] = n
		}
		spec["varNames"] = names
	}
	if r.Preview != "" {
		spec["preview"] = r.Preview
	}
	status := map[string]any{"phase": r.Phase}
	setTime := func(k string, t *time.Time) {
		if t != nil {
			status[k] = t.UTC().Format(time.RFC3339)
		}
	}
	setTime("started", r.Started)
	setTime("finished", r.Finished)
	if r.ExitCode != 0 {
		status["exitCode"] = int64(r.ExitCode)
	}
	for k, v := range map[string]string{"failedStep": r.FailedStep, "message": r.Message, "commit": r.Commit} {
		if v != "" {
			status[k] = v
		}
	}
	if r.CloneMillis > 0 {
		status["cloneMillis"] = r.CloneMillis
	}
	labels := map[string]any{LabelPipeline: r.Name, LabelNamespace: r.Namespace, store.LabelUser: r.User}
	if r.Preview != "" {
		labels[LabelPreview] = r.Preview
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": store.Group + "/" + store.Version, "kind": "PipelineRun",
		"metadata": map[string]any{"name": ID(r.Namespace, r.Name, r.Number), "namespace": platformNS, "labels": labels},
		"spec":     spec, "status": status,
	}}
	if r.ResourceVersion != "" {
		u.SetResourceVersion(r.ResourceVersion)
	}
	return u
}

func runFrom(u *unstructured.Unstructured) *Run {
	spec, _, _ := unstructured.NestedMap(u.Object, "spec")
	status, _, _ := unstructured.NestedMap(u.Object, "status")
	str := func(m map[string]any, k string) string { s, _ := m[k].(string); return s }
	num := func(m map[string]any, k string) int64 {
		switch v := m[k].(type) {
		case int64:
			return v
		case float64:
			return int64(v)
		}
		return 0
	}
	tm := func(k string) *time.Time {
		t, err := time.Parse(time.RFC3339, str(status, k))
		if err != nil {
			return nil
		}
		return &t
	}
	r := &Run{ResourceVersion: u.GetResourceVersion()}
	r.Namespace, r.Name, r.Number = str(spec, "namespace"), str(spec, "pipeline"), int(num(spec, "number"))
	r.Action, r.User, r.Repository = str(spec, "action"), str(spec, "user"), str(spec, "repository")
	r.Branch, r.File, r.Job, r.Anchor = str(spec, "branch"), str(spec, "file"), str(spec, "job"), str(spec, "anchor")
	r.Preview = str(spec, "preview")
	r.Volumes, _ = spec["volumes"].(bool)
	r.TimeoutSeconds = num(spec, "timeoutSeconds")
	if names, ok := spec["varNames"].([]any); ok {
		for _, n := range names {
			if s, ok := n.(string); ok {
				r.VarNames = append(r.VarNames, s)
			}
		}
	}
	r.Phase = str(status, "phase")
	r.Started, r.Finished = tm("started"), tm("finished")
	r.ExitCode = int(num(status, "exitCode"))
	r.FailedStep, r.Message, r.Commit = str(status, "failedStep"), str(status, "message"), str(status, "commit")
	r.CloneMillis = num(status, "cloneMillis")
	r.Created = u.GetCreationTimestamp().UTC()
	return r
}

// API is the run as the API answers it.
func (r *Run) API() api.PipelineRun {
	out := r.PipelineRun
	out.VarNames = append([]string(nil), r.VarNames...)
	return out
}

// newestFirst sorts runs by number, newest first.
func newestFirst(rs []*Run) {
	sort.Slice(rs, func(i, j int) bool { return rs[i].Number > rs[j].Number })
}

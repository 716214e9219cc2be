package server

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/devtool/devtool/internal/platform/api"
	"github.com/devtool/devtool/internal/platform/pipeline"
	"github.com/devtool/devtool/internal/platform/store"
)

// pipelineRoutes registers the pipeline routes (api/pipeline.go) when the server has a Manager.
func (s *Server) pipelineRoutes() {
	p := api.Prefix + "/namespaces/{name}/pipelines"
	s.handle("POST "+p, s.startPipeline)
	s.handle("GET "+p, s.listPipelines)
	s.handle("GET "+p+"/{pipeline}", s.getPipeline)
	s.handle("GET "+p+"/{pipeline}/runs/{run}", s.getRun)
	s.handle("GET "+p+"/{pipeline}/runs/{run}/log", s.runLog)
}

// pipelineFail maps the pipeline package's own errors, then the store's classes.
func (s *Server) pipelineFail(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, pipeline.ErrNotConfigured):
		writeError(w, http.StatusServiceUnavailable, "unavailable", err.Error(), "")
	case errors.Is(err, pipeline.ErrLogGone):
		writeError(w, http.StatusNotFound, "not_found", err.Error(), "")
	default:
		s.fail(w, r, err)
	}
}

// unconfigured answers 503 when the manager a route needs (missing: Options.Pipelines or Previews is
// nil) is not set up on this platform.
func unconfigured(w http.ResponseWriter, missing bool) bool {
	if missing {
		writeError(w, http.StatusServiceUnavailable, "unavailable", pipeline.ErrNotConfigured.Error(), "")
	}
	return missing
}

func (s *Server) startPipeline(w http.ResponseWriter, r *http.Request, c caller) {
	if unconfigured(w, s.o.Pipelines == nil) {
		return
	}
	var req api.PipelineRequest
	if !s.read(w, r, &req) {
		return
	}
	ns := r.PathValue("name")
	secrets, err := s.o.Store.ResolveSecrets(r.Context(), c.user, ns)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		s.fail(w, r, err)
		return
	}
	run, err := s.o.Pipelines.Submit(r.Context(), c.user, ns, req, pipeline.SubmitOptions{Secrets: secrets})
	detail := ""
	if run != nil {
		detail = fmt.Sprintf("run #%d of %s (branch %q)", run.Number, run.Repository, run.Branch)
		if run.Skipped {
			detail = "skipped: already deployed"
		}
	}
	action := req.Action
	if action == "" {
		action = api.ActionDeploy
	}
	s.audit(r, c, store.Audit{Action: "pipeline-" + action, Kind: "Pipeline", Name: req.Name, Namespace: auditNS(ns, err == nil), Detail: detail, Err: err})
	if err != nil {
		s.pipelineFail(w, r, err)
		return
	}
	status := http.StatusCreated
	if run.Skipped {
		status = http.StatusOK
	}
	writeJSON(w, status, run.API())
}

func (s *Server) listPipelines(w http.ResponseWriter, r *http.Request, c caller) {
	if unconfigured(w, s.o.Pipelines == nil) {
		return
	}
	list, err := s.o.Pipelines.Pipelines(c.user, r.PathValue("name"))
	if err != nil {
		s.pipelineFail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, api.PipelineList{Items: list})
}

func (s *Server) getPipeline(w http.ResponseWriter, r *http.Request, c caller) {
	if unconfigured(w, s.o.Pipelines == nil) {
		return
	}
	p, err := s.o.Pipelines.Pipeline(c.user, r.PathValue("name"), r.PathValue("pipeline"))
	if err != nil {
		s.pipelineFail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, p)
}

func (s *Server) getRun(w http.ResponseWriter, r *http.Request, c caller) {
	if unconfigured(w, s.o.Pipelines == nil) {
		return
	}
	var wait time.Duration
	if v := r.URL.Query().Get("wait"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 60 {
			writeError(w, http.StatusBadRequest, "bad_request", "wait: seconds between 0 and 60", "wait")
			return
		}
		wait = time.Duration(n) * time.Second
	}
	run, err := s.o.Pipelines.Wait(r.Context(), c.user, r.PathValue("name"), r.PathValue("pipeline"), r.PathValue("run"), wait)
	if err != nil {
		s.pipelineFail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, run.API())
}

// runLog streams a run's log as text/plain. Errors found before the first byte are JSON errors;
// one met while streaming ends the stream with a last line saying so.
func (s *Server) runLog(w http.ResponseWriter, r *http.Request, c caller) {
	if unconfigured(w, s.o.Pipelines == nil) {
		return
	}
	follow := r.URL.Query().Get("follow") == "true"
	lr, err := s.o.Pipelines.OpenLog(r.Context(), c.user, r.PathValue("name"), r.PathValue("pipeline"), r.PathValue("run"))
	if err != nil {
		s.pipelineFail(w, r, err)
		return
	}
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Time{}) // a followed log lasts as long as the run
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Devtool-Run", strconv.Itoa(lr.Run.Number))
	w.WriteHeader(http.StatusOK)
	flush := func() { _ = rc.Flush() }
	flush()
	if err := lr.WriteTo(r.Context(), w, follow, flush); err != nil && r.Context().Err() == nil {
		s.o.Log.Warn("log stream ended", "path", r.URL.Path, "err", err)
		fmt.Fprintf(w, "\n[devtool: the log stream ended: %v]\n", err)
	}
}

package server

import (
	"errors"
	"io"
	"net/http"
	"slices"

	"github.com/devtool/devtool/internal/platform/api"
	"github.com/devtool/devtool/internal/platform/preview"
	"github.com/devtool/devtool/internal/platform/store"
)

// maxWebhookBody bounds a webhook's payload (a pull request's event is well under it).
const maxWebhookBody = 4 << 20

// previewRoutes registers the preview routes (api/preview.go).
func (s *Server) previewRoutes() {
	p := api.Prefix + "/previews"
	s.handle("POST "+p, s.deployPreview)
	s.handle("GET "+p, s.listPreviews)
	s.handle("GET "+p+"/{name}", s.getPreview)
	s.handle("DELETE "+p+"/{name}", s.destroyPreview)
	s.handle("GET "+p+"/{name}/endpoints", s.previewEndpoints)
	s.handle("POST "+p+"/{name}/wake", s.wakePreview)
	s.mux.HandleFunc("POST "+api.Prefix+"/webhooks/{provider}", s.webhook)
	s.mux.HandleFunc("POST "+preview.WakePath+"{namespace}", s.wakeForIngress)
}

// wakeForIngress is the ingress's request to wake a sleeping preview (it has no user: the wake
// key's signature instead). It answers once the preview is scaled back up.
func (s *Server) wakeForIngress(w http.ResponseWriter, r *http.Request) {
	if unconfigured(w, s.o.Previews == nil) {
		return
	}
	ns := r.PathValue("namespace")
	if err := preview.CheckWake(s.o.WakeKey, r.Header.Get(preview.WakeHeader), ns, s.o.Now()); err != nil {
		writeError(w, http.StatusUnauthorized, "unauthorized", err.Error(), "")
		return
	}
	if err := s.o.Previews.WakeRemote(r.Context(), ns); err != nil {
		s.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) deployPreview(w http.ResponseWriter, r *http.Request, c caller) {
	if unconfigured(w, s.o.Previews == nil) {
		return
	}
	var req api.PreviewRequest
	if !s.read(w, r, &req) {
		return
	}
	p, created, err := s.o.Previews.Deploy(r.Context(), c.user, req)
	s.audit(r, c, store.Audit{Action: "preview-deploy", Kind: "Preview", Name: req.Name, Detail: "scope " + req.Scope + ", branch " + req.Branch, Err: err})
	if err != nil {
		s.pipelineFail(w, r, err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	writeJSON(w, status, p)
}

func (s *Server) listPreviews(w http.ResponseWriter, r *http.Request, c caller) {
	if unconfigured(w, s.o.Previews == nil) {
		return
	}
	writeJSON(w, http.StatusOK, api.PreviewList{Items: s.o.Previews.List(c.user)})
}

func (s *Server) getPreview(w http.ResponseWriter, r *http.Request, c caller) {
	if unconfigured(w, s.o.Previews == nil) {
		return
	}
	p, err := s.o.Previews.Get(c.user, r.PathValue("name"))
	if err != nil {
		s.pipelineFail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, p)
}

func (s *Server) destroyPreview(w http.ResponseWriter, r *http.Request, c caller) {
	if unconfigured(w, s.o.Previews == nil) {
		return
	}
	p, err := s.o.Previews.Destroy(r.Context(), c.user, r.PathValue("name"))
	s.audit(r, c, store.Audit{Action: "preview-destroy", Kind: "Preview", Name: r.PathValue("name"), Err: err})
	if err != nil {
		s.pipelineFail(w, r, err)
		return
	}
	writeJSON(w, http.StatusAccepted, p)
}

func (s *Server) previewEndpoints(w http.ResponseWriter, r *http.Request, c caller) {
	if unconfigured(w, s.o.Previews == nil) {
		return
	}
	eps, woke, err := s.o.Previews.Endpoints(r.Context(), c.user, r.PathValue("name"))
	if err != nil {
		s.pipelineFail(w, r, err)
		return
	}
	if woke {
		w.Header().Set("X-Devtool-Woken", "true")
	}
	writeJSON(w, http.StatusOK, api.Endpoints{Items: eps})
}

func (s *Server) wakePreview(w http.ResponseWriter, r *http.Request, c caller) {
	if unconfigured(w, s.o.Previews == nil) {
		return
	}
	p, err := s.o.Previews.WakeByName(r.Context(), c.user, r.PathValue("name"))
	if err != nil {
		s.pipelineFail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, p)
}

// webhook takes a git host's pull-request event: no bearer token, the provider's signature (or
// token) instead; limited per address like every route.
func (s *Server) webhook(w http.ResponseWriter, r *http.Request) {
	if unconfigured(w, s.o.Previews == nil) {
		return
	}
	provider := r.PathValue("provider")
	if !slices.Contains(preview.Providers, provider) {
		writeError(w, http.StatusNotFound, "not_found", "no webhook for "+provider+": github, gitlab or gitea", "")
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxWebhookBody))
	if err != nil {
		writeError(w, http.StatusRequestEntityTooLarge, "too_large", "webhook payload over 4 MiB", "")
		return
	}
	res, err := s.o.Previews.Webhook(r.Context(), provider, r.Header, body)
	switch {
	case errors.Is(err, preview.ErrBadSignature):
		s.o.Log.Warn("webhook refused: bad signature", "provider", provider, "remote", clientAddr(r))
		writeError(w, http.StatusUnauthorized, "unauthorized", err.Error(), "")
	case errors.Is(err, preview.ErrNoWebhookSecret):
		writeError(w, http.StatusServiceUnavailable, "unavailable", err.Error(), "")
	case err != nil:
		s.fail(w, r, err)
	default:
		if len(res.Destroying) > 0 {
			s.o.Log.Info("webhook: previews destroyed", "provider", provider, "previews", res.Destroying)
		}
		writeJSON(w, http.StatusAccepted, res)
	}
}

package server

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/devtool/devtool/internal/platform/analytics"
	"github.com/devtool/devtool/internal/platform/api"
	"github.com/devtool/devtool/internal/platform/store"
)

// The analytics routes (internal/platform/analytics keeps the daily counts; docs/analytics.md).

func (s *Server) analyticsEnabled() bool {
	return s.o.Analytics != nil && s.o.Analytics.Enabled()
}

// postAnalytics counts one event: 204, or 403 when the admin does not allow analytics. The event is
// not logged and not kept: only today's counts change.
func (s *Server) postAnalytics(w http.ResponseWriter, r *http.Request, c caller) {
	if !s.analyticsEnabled() {
		writeError(w, http.StatusForbidden, "forbidden", "this platform does not accept analytics (its admin has not allowed them)", "")
		return
	}
	var ev api.AnalyticsEvent
	if !s.read(w, r, &ev) {
		return
	}
	if err := s.o.Analytics.Record(ev); err != nil {
		s.analyticsError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// analyticsReport is the daily counts (admin only).
func (s *Server) analyticsReport(w http.ResponseWriter, r *http.Request, c caller) {
	if s.o.Analytics == nil {
		writeJSON(w, http.StatusOK, api.AnalyticsReport{Days: []api.AnalyticsDay{}})
		return
	}
	days := 30
	if v := r.URL.Query().Get("days"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			writeError(w, http.StatusBadRequest, "bad_request", "days: expected a whole number of days", "days")
			return
		}
		days = n
	}
	rep, err := s.o.Analytics.Report(days)
	if err != nil {
		s.analyticsError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, rep)
}

func (s *Server) analyticsSettings(w http.ResponseWriter, r *http.Request, c caller) {
	writeJSON(w, http.StatusOK, api.AnalyticsSettings{Enabled: s.analyticsEnabled()})
}

// setAnalyticsSettings stores whether the platform accepts analytics (admin only; audited).
func (s *Server) setAnalyticsSettings(w http.ResponseWriter, r *http.Request, c caller) {
	var req api.AnalyticsSettings
	if !s.read(w, r, &req) {
		return
	}
	if s.o.Analytics == nil {
		writeError(w, http.StatusConflict, "conflict", "this platform runs without analytics (serve has no store for them)", "")
		return
	}
	err := s.o.Analytics.SetEnabled(r.Context(), req.Enabled)
	s.audit(r, c, store.Audit{Action: "set-analytics", Kind: "ConfigMap", Name: analytics.SettingsName, Detail: "enabled=" + strconv.FormatBool(req.Enabled), Err: err})
	if err != nil {
		s.internal(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, req)
}

func (s *Server) analyticsError(w http.ResponseWriter, r *http.Request, err error) {
	var in *analytics.InputError
	if errors.As(err, &in) {
		writeError(w, http.StatusBadRequest, "bad_request", in.Error(), in.Field)
		return
	}
	s.internal(w, r, err)
}

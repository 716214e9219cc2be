// Package analytics sends the CLI's analytics: one api.AnalyticsEvent per command, to the platform
// of the context the command used and nowhere else, only when the user has analytics enabled
// (`devtool analytics`; DO_NOT_TRACK=1 also turns them off) and that platform's admin allows them
// (GET /api/v1/info says so). Nothing is sent on a plain Kubernetes context. What an event holds is
// the struct api.AnalyticsEvent, listed in docs/analytics.md. It never prints and never changes the
// command's outcome: a failure to send is returned for the debug log.
package analytics

import (
	"context"
	"fmt"
	"runtime"
	"time"

	"github.com/devtool/devtool/internal/buildinfo"
	"github.com/devtool/devtool/internal/contexts"
	"github.com/devtool/devtool/internal/platform/api"
)

// DefaultTimeout bounds the whole exchange (the platform's info, then the event).
const DefaultTimeout = 2 * time.Second

// Run is one command that ran.
type Run struct {
	Command     string // the command path without arguments or flags ("namespace create")
	ContextFlag string // its --context value
	Duration    time.Duration
	Success     bool
}

// Sender sends the events.
type Sender struct {
	Resolver *contexts.Resolver
	Getenv   func(string) string
	Timeout  time.Duration // 0: DefaultTimeout
}

// Event is the event of run (installID: the install's random id).
func Event(run Run, installID string) api.AnalyticsEvent {
	return api.AnalyticsEvent{
		Command: run.Command, DurationMs: run.Duration.Milliseconds(), Success: run.Success,
		Version: buildinfo.Get().Version, OS: runtime.GOOS, Arch: runtime.GOARCH, InstallID: installID,
	}
}

// Send sends run's event when everything allows it; sent says whether it was.
func (s *Sender) Send(ctx context.Context, run Run) (sent bool, err error) {
	if run.Command == "" || s.Resolver == nil {
		return false, nil
	}
	if s.Getenv != nil && s.Getenv("DO_NOT_TRACK") != "" && s.Getenv("DO_NOT_TRACK") != "0" {
		return false, nil
	}
	sel, err := s.Resolver.Select(contexts.Flags{Context: run.ContextFlag})
	if err != nil || sel.Context == nil || !sel.Context.IsDevtool || sel.Context.Token == "" {
		return false, nil // not a platform (or none selected): nothing is sent anywhere
	}
	store, err := s.Resolver.Store()
	if err != nil {
		return false, err
	}
	if on, err := store.AnalyticsEnabled(); err != nil || !on {
		return false, err
	}
	timeout := s.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	pc, err := contexts.PlatformClient(sel.Context)
	if err != nil {
		return false, err
	}
	defer pc.Close()
	info, err := pc.Info(ctx)
	if err != nil {
		return false, fmt.Errorf("analytics: %w", err)
	}
	if !info.Analytics {
		return false, nil // the platform's admin does not allow them
	}
	id, err := store.InstallID()
	if err != nil {
		return false, err
	}
	if err := pc.SendAnalytics(ctx, Event(run, id)); err != nil {
		return false, fmt.Errorf("analytics: %w", err)
	}
	return true, nil
}

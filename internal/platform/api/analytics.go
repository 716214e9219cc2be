package api

// AnalyticsEvent is the body of POST /api/v1/analytics: one command the CLI ran, sent only to the
// platform of the context the command used, only when the user has analytics enabled (devtool
// analytics) and the platform's admin allows them (Info.Analytics). These fields are everything
// that is sent: docs/analytics.md lists them, and a test keeps the two the same. Nothing about
// files, names (environments, namespaces, services, images) or values is ever part of an event.
// The server answers 204, or 403 when its admin does not allow analytics, and keeps daily counts
// only, never the events.
type AnalyticsEvent struct {
	// Command is the command path without arguments or flags, as "deploy" or "namespace create".
	Command string `json:"command"`
	// DurationMs is how long the command ran, in milliseconds.
	DurationMs int64 `json:"durationMs"`
	// Success is whether it exited 0.
	Success bool `json:"success"`
	// Version is the CLI's version.
	Version string `json:"version"`
	// OS and Arch are the CLI's GOOS and GOARCH.
	OS   string `json:"os"`
	Arch string `json:"arch"`
	// InstallID is a random UUID made once per HOME (~/.devtool/analytics.json), not derived from
	// the machine or the user: it lets the platform count installations per day.
	InstallID string `json:"installId"`
}

// AnalyticsSettings is GET and PUT /api/v1/analytics/settings (PUT: admin only): whether the platform
// accepts analytics. The install's --analytics flag is the value until an admin sets one.
type AnalyticsSettings struct {
	Enabled bool `json:"enabled"`
}

// AnalyticsReport is GET /api/v1/analytics?days=N (admin only, N from 1 to 90, default 30): the
// daily counts, newest day first. Counts of this replica not yet stored are included; the other
// replicas' reach the store within a minute.
type AnalyticsReport struct {
	Days []AnalyticsDay `json:"days"`
}

// AnalyticsDay is one UTC day's counts.
type AnalyticsDay struct {
	Date string `json:"date"` // YYYY-MM-DD (UTC)
	// Installs estimates how many installations sent an event that day (a HyperLogLog sketch of
	// the install ids: the ids themselves are not kept; about 6% error).
	Installs int64            `json:"installs"`
	Counts   []AnalyticsCount `json:"counts"`
}

// AnalyticsCount is how many times a command ran that day with one CLI version, OS/arch and outcome.
type AnalyticsCount struct {
	Command         string `json:"command"`
	Version         string `json:"version"`
	OS              string `json:"os"`
	Arch            string `json:"arch"`
	Success         bool   `json:"success"`
	Count           int64  `json:"count"`
	TotalDurationMs int64  `json:"totalDurationMs"`
}

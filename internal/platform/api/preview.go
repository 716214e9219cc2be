package api

import "time"

// Previews: an environment of a branch (usually a pull request's) in a namespace of its own that the
// platform owns, deployed by a pipeline run. Personal previews are seen and managed by their creator
// only; global ones are seen by every user (each gets the viewer role) and created or destroyed by
// admins only.
//
//	POST   /api/v1/previews                 deploy (or redeploy) one (PreviewRequest) -> 201/200 Preview with Run
//	GET    /api/v1/previews                 PreviewList: the caller's personal ones and every global one
//	GET    /api/v1/previews/{name}          Preview
//	DELETE /api/v1/previews/{name}          202 Preview: its destroy runs (Run), then its namespace is deleted
//	GET    /api/v1/previews/{name}/endpoints Endpoints (wakes a sleeping preview)
//	POST   /api/v1/previews/{name}/wake     Preview: scaled back up if it was sleeping
//	POST   /api/v1/webhooks/{provider}      github, gitlab or gitea: a closed pull (merge) request destroys
//	                                        its previews. No bearer token: the provider's signature
//	                                        (X-Hub-Signature-256, X-Gitea-Signature) or token
//	                                        (X-Gitlab-Token) made with the platform's webhook secret.

// Preview scopes.
const (
	PreviewPersonal = "personal"
	PreviewGlobal   = "global"
)

// Preview statuses.
const (
	PreviewDeploying  = "Deploying"
	PreviewReady      = "Ready"
	PreviewFailed     = "Failed"
	PreviewSleeping   = "Sleeping"
	PreviewDestroying = "Destroying"
)

// ScopePreview is the stored-secret scope previews read (admins write it): a preview's run sees
// these and its own namespace's secrets, never a user's or the admin-wide ones.
const ScopePreview = "preview"

// PreviewRequest is the body of POST /api/v1/previews.
type PreviewRequest struct {
	Name           string `json:"name"` // a DNS label: it names the preview's namespace too
	Repository     string `json:"repository"`
	Branch         string `json:"branch,omitempty"`
	Scope          string `json:"scope,omitempty"`     // personal (default) or global (admins)
	SourceURL      string `json:"sourceUrl,omitempty"` // the pull or merge request
	File           string `json:"file,omitempty"`
	Vars           []Var  `json:"vars,omitempty"`
	TimeoutSeconds int64  `json:"timeoutSeconds,omitempty"`
	// Public makes its endpoints public; by default they are private (only users who may read the
	// preview's namespace, signed in through the platform).
	Public bool `json:"public,omitempty"`
}

// Preview is one preview environment.
type Preview struct {
	Name         string       `json:"name"`
	Namespace    string       `json:"namespace"`
	Scope        string       `json:"scope"`
	Status       string       `json:"status"`
	Repository   string       `json:"repository"`
	Branch       string       `json:"branch,omitempty"`
	SourceURL    string       `json:"sourceUrl,omitempty"`
	Creator      string       `json:"creator"`
	Created      time.Time    `json:"created"`
	LastActivity time.Time    `json:"lastActivity"`
	Public       bool         `json:"public,omitempty"`
	Run          *PipelineRun `json:"run,omitempty"` // the latest run (deploy or destroy)
}

// PreviewList is GET /api/v1/previews.
type PreviewList struct {
	Items []Preview `json:"items"`
}

// Endpoint is one address of an environment.
type Endpoint struct {
	Name string `json:"name"`
	URL  string `json:"url"`
}

// Endpoints is GET /api/v1/previews/{name}/endpoints.
type Endpoints struct {
	Items []Endpoint `json:"items"`
}

// WebhookResult answers POST /api/v1/webhooks/{provider}.
type WebhookResult struct {
	// Destroying names the previews whose destroy started; empty when the event was not a closed
	// pull request or matched none.
	Destroying []string `json:"destroying"`
	Ignored    string   `json:"ignored,omitempty"` // why nothing was done
}

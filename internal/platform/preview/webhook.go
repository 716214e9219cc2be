package preview

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"

	"github.com/devtool/devtool/internal/platform/api"
	"github.com/devtool/devtool/internal/platform/store"
)

// Webhook errors the server maps to statuses.
var (
	// ErrBadSignature: the payload is not signed with the platform's webhook secret (401).
	ErrBadSignature = errors.New("the webhook's signature or token does not match the platform's webhook secret")
	// ErrNoWebhookSecret: the platform has no webhook secret (503).
	ErrNoWebhookSecret = errors.New("webhooks are not set up on this platform (no webhook secret)")
)

// Providers of pull-request webhooks.
var Providers = []string{"github", "gitlab", "gitea"}

// pullRequest is what a closed pull (merge) request's payload says.
type pullRequest struct {
	closed       bool
	url, branch  string
	repositories []string
}

// Webhook handles a provider's webhook: it checks the signature (GitHub: X-Hub-Signature-256,
// Gitea: X-Gitea-Signature, both HMAC-SHA256 of the body with the webhook secret; GitLab:
// X-Gitlab-Token equal to it), and when the event is a pull (merge) request that was closed or
// merged, destroys the previews made for it: those whose source URL is the request's, or whose
// repository and branch are its head's.
func (m *Manager) Webhook(ctx context.Context, provider string, h http.Header, body []byte) (api.WebhookResult, error) {
	res := api.WebhookResult{Destroying: []string{}}
	if len(m.o.WebhookSecret) == 0 {
		return res, ErrNoWebhookSecret
	}
	if err := checkSignature(provider, m.o.WebhookSecret, h, body); err != nil {
		return res, err
	}
	pr, ignored, err := parse(provider, h, body)
	if err != nil {
		return res, &store.InputError{Field: "body", Reason: err.Error()}
	}
	if ignored != "" {
		res.Ignored = ignored
		return res, nil
	}
	if !pr.closed {
		res.Ignored = "the pull request was not closed"
		return res, nil
	}
	var failed []error
	for _, p := range m.all() {
		if p.Status == api.PreviewDestroying || !matches(p, pr) {
			continue
		}
		if _, err := m.destroy(ctx, p, "pull request closed: "+pr.url, false); err != nil {
			failed = append(failed, fmt.Errorf("destroying preview %s: %w", p.Name, err))
			continue
		}
		res.Destroying = append(res.Destroying, p.Name)
	}
	if len(failed) > 0 {
		return res, errors.Join(failed...)
	}
	if len(res.Destroying) == 0 {
		res.Ignored = "no preview was made for " + pr.url
	}
	sort.Strings(res.Destroying)
	return res, nil
}

func checkSignature(provider string, secret []byte, h http.Header, body []byte) error {
	mac := hmac.New(sha256.New, secret)
	mac.Write(body)
	sum := mac.Sum(nil)
	var got string
	switch provider {
	case "github":
		got, _ = strings.CutPrefix(h.Get("X-Hub-Signature-256"), "sha256=")
	case "gitea":
		got = h.Get("X-Gitea-Signature")
	case "gitlab":
		if t := h.Get("X-Gitlab-Token"); t != "" && subtle.ConstantTimeCompare([]byte(t), secret) == 1 {
			return nil
		}
		return ErrBadSignature
	default:
		return &store.InputError{Field: "provider", Reason: "one of " + strings.Join(Providers, ", ")}
	}
	want := make([]byte, hex.EncodedLen(len(sum)))
	hex.Encode(want, sum)
	if got == "" || subtle.ConstantTimeCompare([]byte(strings.ToLower(got)), want) != 1 {
		return ErrBadSignature
	}
	return nil
}

// parse reads a closed pull request from a payload; ignored says why another event is no concern.
func parse(provider string, h http.Header, body []byte) (*pullRequest, string, error) {
	pr := &pullRequest{}
	switch provider {
	case "github", "gitea":
		event := h.Get("X-GitHub-Event")
		if provider == "gitea" {
			event = h.Get("X-Gitea-Event")
		}
		if event != "pull_request" {
			return nil, "event " + event + " is not a pull request's", nil
		}
		var p struct {
			Action      string `json:"action"`
			PullRequest struct {
				HTMLURL string `json:"html_url"`
				Merged  bool   `json:"merged"`
				Head    struct {
					Ref  string `json:"ref"`
					Repo struct {
						CloneURL string `json:"clone_url"`
						HTMLURL  string `json:"html_url"`
					} `json:"repo"`
				} `json:"head"`
			} `json:"pull_request"`
			Repository struct {
				CloneURL string `json:"clone_url"`
				HTMLURL  string `json:"html_url"`
			} `json:"repository"`
		}
		if err := json.Unmarshal(body, &p); err != nil {
			return nil, "", fmt.Errorf("not a %s pull_request payload: %v", provider, err)
		}
		pr.closed = p.Action == "closed"
		pr.url, pr.branch = p.PullRequest.HTMLURL, p.PullRequest.Head.Ref
		pr.repositories = []string{p.Repository.CloneURL, p.Repository.HTMLURL, p.PullRequest.Head.Repo.CloneURL, p.PullRequest.Head.Repo.HTMLURL}
	case "gitlab":
		if e := h.Get("X-Gitlab-Event"); e != "Merge Request Hook" {
			return nil, "event " + e + " is not a merge request's", nil
		}
		var p struct {
			ObjectAttributes struct {
				Action       string `json:"action"`
				State        string `json:"state"`
				URL          string `json:"url"`
				SourceBranch string `json:"source_branch"`
				Source       struct {
					HTTPURL string `json:"git_http_url"`
					WebURL  string `json:"web_url"`
				} `json:"source"`
			} `json:"object_attributes"`
			Project struct {
				HTTPURL string `json:"git_http_url"`
				WebURL  string `json:"web_url"`
			} `json:"project"`
		}
		if err := json.Unmarshal(body, &p); err != nil {
			return nil, "", fmt.Errorf("not a GitLab merge request payload: %v", err)
		}
		a := p.ObjectAttributes
		pr.closed = a.Action == "close" || a.Action == "merge" || a.State == "closed" || a.State == "merged"
		pr.url, pr.branch = a.URL, a.SourceBranch
		pr.repositories = []string{p.Project.HTTPURL, p.Project.WebURL, a.Source.HTTPURL, a.Source.WebURL}
	default:
		return nil, "", fmt.Errorf("unknown provider %q", provider)
	}
	if pr.url == "" && pr.branch == "" {
		return nil, "", errors.New("the payload names neither the pull request nor its branch")
	}
	return pr, "", nil
}

// matches says whether preview p was made for the pull request.
func matches(p *Preview, pr *pullRequest) bool {
	if p.SourceURL != "" && pr.url != "" {
		return sameURL(p.SourceURL, pr.url)
	}
	if p.Branch == "" || p.Branch != pr.branch {
		return false
	}
	for _, r := range pr.repositories {
		if r != "" && sameURL(p.Repository, r) {
			return true
		}
	}
	return false
}

// sameURL compares repository or page URLs: scheme, case of the host, a trailing slash or ".git"
// do not matter.
func sameURL(a, b string) bool {
	norm := func(s string) string {
		u, err := url.Parse(strings.TrimSpace(s))
		if err != nil {
			return s
		}
		return strings.ToLower(u.Host) + strings.TrimSuffix(strings.TrimSuffix(u.Path, "/"), ".git")
	}
	return norm(a) == norm(b)
}

package runner

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"

	"github.com/devtool/devtool/internal/platform/runspec"
)

// CloneOptions say what to clone where.
type CloneOptions struct {
	URL    string
	Branch string // "" = the remote's default branch (its HEAD)
	Dir    string
	// Depth 0 is 1: a pipeline needs the tip only.
	Depth int
	// CA is trusted besides the system's roots (PEM).
	CA []byte
	// Username and Token are sent as HTTP basic credentials, over https only.
	Username, Token string
	Progress        io.Writer
}

// Cloned is what a clone checked out.
type Cloned struct {
	Commit, Branch string
}

// Clone clones one branch of a repository over https or http with go-git: no git binary, no ssh,
// no prompts, no credential helpers. Its errors say what to do (a token to store, a branch that
// does not exist, a certificate that is not trusted).
func Clone(ctx context.Context, o CloneOptions) (*Cloned, error) {
	u, err := url.Parse(o.URL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") {
		return nil, fmt.Errorf("repository %q: only https:// (and http://) repositories can be cloned here", o.URL)
	}
	depth := o.Depth
	if depth == 0 {
		depth = 1
	}
	co := &git.CloneOptions{URL: o.URL, Depth: depth, SingleBranch: true, Tags: git.NoTags, CABundle: o.CA, Progress: o.Progress}
	if o.Branch != "" {
		co.ReferenceName = plumbing.NewBranchReferenceName(o.Branch)
	}
	if o.Token != "" && u.Scheme == "https" {
		user := o.Username
		if user == "" {
			user = runspec.DefaultGitUsername
		}
		co.Auth = &githttp.BasicAuth{Username: user, Password: o.Token}
	}
	repo, err := git.PlainCloneContext(ctx, o.Dir, false, co)
	if err != nil {
		return nil, cloneError(o, u, err)
	}
	head, err := repo.Head()
	if err != nil {
		return nil, fmt.Errorf("reading the cloned HEAD: %w", err)
	}
	out := &Cloned{Commit: head.Hash().String(), Branch: o.Branch}
	if head.Name().IsBranch() {
		out.Branch = head.Name().Short()
	}
	return out, nil
}

func cloneError(o CloneOptions, u *url.URL, err error) error {
	secret := runspec.GitTokenSecret(u.Host)
	var uerr x509.UnknownAuthorityError
	var herr x509.HostnameError
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return err
	case errors.Is(err, transport.ErrAuthenticationRequired):
		if u.Scheme == "http" {
			return fmt.Errorf("cloning %s: the server asks for credentials, which are never sent over plain HTTP: use its https:// address", o.URL)
		}
		if o.Token == "" {
			return fmt.Errorf("cloning %s: the repository needs credentials: store an HTTPS access token as the secret %s (its user name, when the server needs one, as %s)",
				o.URL, secret, runspec.GitUserSecret(u.Host))
		}
		return fmt.Errorf("cloning %s: the server refused the token of the secret %s: %w", o.URL, secret, err)
	case errors.Is(err, transport.ErrAuthorizationFailed):
		return fmt.Errorf("cloning %s: the server refused the token of the secret %s: %w", o.URL, secret, err)
	case errors.Is(err, transport.ErrRepositoryNotFound):
		hint := ""
		if o.Token == "" && u.Scheme == "https" {
			hint = fmt.Sprintf(" (if it is private, store an HTTPS access token as the secret %s)", secret)
		}
		return fmt.Errorf("cloning %s: repository not found%s", o.URL, hint)
	case errors.Is(err, plumbing.ErrReferenceNotFound), strings.Contains(err.Error(), "couldn't find remote ref"):
		return fmt.Errorf("cloning %s: the branch %q does not exist there", o.URL, o.Branch)
	case errors.As(err, &uerr), errors.As(err, &herr), strings.Contains(err.Error(), "x509:"):
		return fmt.Errorf("cloning %s: the server's certificate is not trusted (the runner trusts the system's roots and the platform's CA): %w", o.URL, err)
	}
	return fmt.Errorf("cloning %s: %w", o.URL, err)
}

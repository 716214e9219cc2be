package runner

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
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
	_, statErr := os.Lstat(o.Dir)
	repo, err := git.PlainCloneContext(ctx, o.Dir, false, co)
	if err != nil {
		return nil, cloneError(o, u, err)
	}
	if err := checkLinks(o.Dir); err != nil {
		if errors.Is(statErr, fs.ErrNotExist) { // as git does with a clone that failed: nothing left to read
			_ = os.RemoveAll(o.Dir)
		}
		return nil, fmt.Errorf("cloning %s: %w", o.URL, err)
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

// ErrLinkOutside is wrapped by Clone's error for a repository with a symbolic link out of the clone.
var ErrLinkOutside = errors.New("a symbolic link leads out of the repository")

// checkLinks walks the checkout at root and fails, wrapping ErrLinkOutside and naming the link,
// at the first symbolic link that leads out of root: the deploy would read through it whatever it
// names (the runner's token, the builder's key, the run's secrets) as if it were the repository's.
// A link is followed where it can be (other links on its way included); one that leads nowhere is
// judged by its text. Links that stay inside root are fine, dangling ones too.
func checkLinks(root string) error {
	real, err := filepath.EvalSymlinks(root)
	if err != nil {
		return err
	}
	return filepath.WalkDir(real, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p == filepath.Join(real, ".git") {
			return filepath.SkipDir
		}
		if d.Type()&fs.ModeSymlink == 0 {
			return nil
		}
		rel, _ := filepath.Rel(real, p)
		target, err := os.Readlink(p)
		if err != nil {
			return err
		}
		to, err := filepath.EvalSymlinks(p)
		if err != nil { // leads nowhere (yet): where its text points
			to = target
			if !filepath.IsAbs(to) {
				to = filepath.Join(filepath.Dir(p), target)
			}
		}
		if !within(real, filepath.Clean(to)) {
			return fmt.Errorf("%w: %s -> %s (links must stay inside the repository)", ErrLinkOutside, filepath.ToSlash(rel), target)
		}
		return nil
	})
}

// within says whether p is root or below it (both clean and absolute).
func within(root, p string) bool {
	return p == root || strings.HasPrefix(p, root+string(filepath.Separator)) || root == string(filepath.Separator)
}

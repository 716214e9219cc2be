// Package gitlocal reads what pipeline and preview commands take from the current folder's git
// checkout when not told: the origin remote (as an https URL) and the branch. git runs without a
// terminal, prompts or pager, under a 10 s deadline.
package gitlocal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os/exec"
	"path"
	"regexp"
	"strings"
	"time"
)

// Timeout bounds one git call.
const Timeout = 10 * time.Second

func git(ctx context.Context, dir string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "git", append([]string{"-C", dir}, args...)...)
	cmd.Env = append(cmd.Environ(), "GIT_TERMINAL_PROMPT=0", "GIT_PAGER=cat", "LC_ALL=C")
	cmd.WaitDelay = time.Second
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		if errors.Is(err, exec.ErrNotFound) {
			return "", errors.New("git is not installed")
		}
		if ctx.Err() != nil {
			return "", fmt.Errorf("git %s: no answer within %s", strings.Join(args, " "), Timeout)
		}
		msg := strings.TrimSpace(errb.String())
		if msg == "" {
			msg = err.Error()
		}
		return "", fmt.Errorf("git %s: %s", strings.Join(args, " "), msg)
	}
	return strings.TrimSpace(out.String()), nil
}

// Origin is the URL of dir's origin remote (as configured: see HTTPS).
func Origin(ctx context.Context, dir string) (string, error) {
	return git(ctx, dir, "remote", "get-url", "origin")
}

// Branch is the branch checked out in dir; a detached HEAD is an error.
func Branch(ctx context.Context, dir string) (string, error) {
	b, err := git(ctx, dir, "rev-parse", "--abbrev-ref", "HEAD")
	if err != nil {
		return "", err
	}
	if b == "HEAD" || b == "" {
		return "", errors.New("the checkout is on a detached HEAD, not a branch")
	}
	return b, nil
}

var scpLike = regexp.MustCompile(`^(?:[A-Za-z0-9._-]+@)?([A-Za-z0-9.-]+):([^/].*)$`)

// HTTPS turns a remote URL into the https URL of the same repository: ssh://[user@]host[:port]/path
// and user@host:path become https://host/path; https and http URLs lose any user name or token.
// changed says it is not the remote as written.
func HTTPS(remote string) (string, bool, error) {
	remote = strings.TrimSpace(remote)
	if m := scpLike.FindStringSubmatch(remote); m != nil && !strings.Contains(remote, "://") {
		return "https://" + m[1] + "/" + strings.TrimPrefix(m[2], "/"), true, nil
	}
	u, err := url.Parse(remote)
	if err != nil {
		return "", false, fmt.Errorf("remote %q is not a URL: %v", remote, err)
	}
	switch u.Scheme {
	case "https", "http":
		if u.User == nil {
			return remote, false, nil
		}
		u.User = nil
		return u.String(), true, nil
	case "ssh", "git":
		return "https://" + u.Hostname() + "/" + strings.TrimPrefix(u.Path, "/"), true, nil
	}
	return "", false, fmt.Errorf("remote %q: only https, http, ssh and user@host:path remotes can be turned into an https URL", remote)
}

// RepoName is the repository's name in a URL: its last path element without ".git".
func RepoName(repoURL string) string {
	p := repoURL
	if u, err := url.Parse(repoURL); err == nil && u.Path != "" {
		p = u.Path
	}
	return strings.TrimSuffix(path.Base(strings.TrimRight(p, "/")), ".git")
}

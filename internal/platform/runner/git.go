package runner

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/go-git/go-git/v5"

	"github.com/devtool/devtool/internal/platform/runspec"
	"github.com/devtool/devtool/internal/safefile"
)

// Git is the runner image's `git`: the two things devtool itself runs git for, done with go-git —
// `rev-parse HEAD` and `rev-parse --abbrev-ref HEAD` (DEVTOOL_GIT_COMMIT and DEVTOOL_GIT_BRANCH of
// deploy commands) and `clone` (a manifest's dependencies, https with the token stored for the host,
// or http). Anything else fails saying so. getenv reads the stored secrets the runner put in the
// environment. It returns the exit code.
func Git(ctx context.Context, args []string, dir string, getenv func(string) string, stdout, stderr io.Writer) int {
	for len(args) > 0 {
		switch {
		case args[0] == "-C" && len(args) > 1:
			if filepath.IsAbs(args[1]) {
				dir = args[1]
			} else {
				dir = filepath.Join(dir, args[1])
			}
			args = args[2:]
		case args[0] == "-c" && len(args) > 1:
			args = args[2:] // configuration has no meaning here
		case strings.HasPrefix(args[0], "--no-pager"), args[0] == "--no-optional-locks":
			args = args[1:]
		default:
			goto command
		}
	}
command:
	if len(args) == 0 {
		fmt.Fprintln(stderr, "usage: git rev-parse [--abbrev-ref] HEAD | git clone [--depth N] [--branch B] [--] <url> <dir>")
		return 1
	}
	switch args[0] {
	case "rev-parse":
		return revParse(args[1:], dir, stdout, stderr)
	case "clone":
		return clone(ctx, args[1:], dir, getenv, stdout, stderr)
	case "version", "--version":
		fmt.Fprintln(stdout, "git version 2.0.0 (devtool pipeline runner: go-git, clone and rev-parse only)")
		return 0
	}
	fmt.Fprintf(stderr, "git %s: not available in devtool's pipeline runner (its git does clone and rev-parse only)\n", args[0])
	return 1
}

func revParse(args []string, dir string, stdout, stderr io.Writer) int {
	abbrev := false
	var rev string
	for _, a := range args {
		switch a {
		case "--abbrev-ref":
			abbrev = true
		case "--verify", "-q", "--quiet":
		default:
			rev = a
		}
	}
	if rev != "HEAD" {
		fmt.Fprintf(stderr, "git rev-parse %s: only HEAD is supported in devtool's pipeline runner\n", rev)
		return 1
	}
	repo, err := git.PlainOpenWithOptions(dir, &git.PlainOpenOptions{DetectDotGit: true})
	if err != nil {
		fmt.Fprintf(stderr, "fatal: not a git repository: %s\n", dir)
		return 128
	}
	head, err := repo.Head()
	if err != nil {
		fmt.Fprintf(stderr, "fatal: %v\n", err)
		return 128
	}
	switch {
	case !abbrev:
		fmt.Fprintln(stdout, head.Hash().String())
	case head.Name().IsBranch():
		fmt.Fprintln(stdout, head.Name().Short())
	default:
		fmt.Fprintln(stdout, "HEAD")
	}
	return 0
}

func clone(ctx context.Context, args []string, dir string, getenv func(string) string, stdout, stderr io.Writer) int {
	o := CloneOptions{Progress: stderr}
	var pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			pos = append(pos, args[i+1:]...)
			i = len(args)
		case a == "--depth" && i+1 < len(args):
			n, err := strconv.Atoi(args[i+1])
			if err != nil || n < 1 {
				fmt.Fprintf(stderr, "git clone: --depth %q: a positive number\n", args[i+1])
				return 129
			}
			o.Depth, i = n, i+1
		case strings.HasPrefix(a, "--depth="):
			n, err := strconv.Atoi(strings.TrimPrefix(a, "--depth="))
			if err != nil || n < 1 {
				fmt.Fprintf(stderr, "git clone: %s: a positive number\n", a)
				return 129
			}
			o.Depth = n
		case (a == "--branch" || a == "-b") && i+1 < len(args):
			o.Branch, i = args[i+1], i+1
		case strings.HasPrefix(a, "--branch="):
			o.Branch = strings.TrimPrefix(a, "--branch=")
		case a == "--progress", a == "--single-branch", a == "-q", a == "--quiet", a == "--no-tags":
		case strings.HasPrefix(a, "-"):
			fmt.Fprintf(stderr, "git clone %s: not supported by devtool's pipeline runner\n", a)
			return 129
		default:
			pos = append(pos, a)
		}
	}
	if len(pos) != 2 {
		fmt.Fprintln(stderr, "usage: git clone [--depth N] [--branch B] [--] <url> <dir>")
		return 129
	}
	o.URL, o.Dir = pos[0], pos[1]
	if !filepath.IsAbs(o.Dir) {
		o.Dir = filepath.Join(dir, o.Dir)
	}
	if u, err := url.Parse(o.URL); err == nil && u.Scheme == "https" {
		o.Token = getenv(runspec.GitTokenSecret(u.Host))
		o.Username = getenv(runspec.GitUserSecret(u.Host))
	}
	if ca := getenv("DEVTOOL_RUNNER_CA_FILE"); ca != "" {
		if b, err := safefile.Read(ca, 1<<20); err == nil {
			o.CA = b
		}
	}
	if u, err := url.Parse(o.URL); err == nil && u.Scheme == "https" {
		if ca := getenv(runspec.GitCASecret(u.Host)); ca != "" {
			o.CA = append(append(o.CA, '\n'), ca...)
		}
	}
	fmt.Fprintf(stderr, "Cloning into '%s'...\n", pos[1])
	if _, err := Clone(ctx, o); err != nil {
		fmt.Fprintf(stderr, "fatal: %v\n", err)
		return 128
	}
	return 0
}

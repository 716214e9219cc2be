package cmdutil

import (
	"errors"
	"fmt"

	"github.com/devtool/devtool/internal/contexts"
	"github.com/devtool/devtool/internal/errs"
	"github.com/devtool/devtool/internal/platform/api"
	"github.com/devtool/devtool/internal/platform/client"
)

// ErrNeedsPlatformLogin says a command needs a login to a devtool platform.
var ErrNeedsPlatformLogin = errors.New("needs a login to a devtool platform")

// Platform is a platform context in use: its selection (namespace included) and an API client.
type Platform struct {
	Selection *contexts.Selection
	Client    *client.Client
}

// Close releases the client's connections.
func (p *Platform) Close() { p.Client.Close() }

// RequirePlatform selects the platform context for a command that needs a login (pipeline and
// preview commands): a plain Kubernetes context, no context at all, or a platform context without
// a token is an errs.AuthError (exit 4) saying how to log in. Only the store and the environment
// are read: nothing is dialled.
func RequirePlatform(getenv func(string) string, k KubeFlags, command string) (*Platform, error) {
	hint := fmt.Sprintf("log in with 'devtool context use https://<platform> --token <token>', or set %s and %s", api.EnvURL, api.EnvToken)
	sel, err := (&contexts.Resolver{Getenv: getenv}).Select(k.Flags())
	if err != nil {
		if errors.Is(err, contexts.ErrNoCurrentContext) {
			return nil, &errs.AuthError{Err: fmt.Errorf("%s %w: no context is selected", command, ErrNeedsPlatformLogin), Hint: hint}
		}
		return nil, err
	}
	c := sel.Context
	if c == nil || !c.IsDevtool {
		return nil, &errs.AuthError{Err: fmt.Errorf("%s %w (it is only available on clusters with the platform installed): the context %s is a plain Kubernetes context",
			command, ErrNeedsPlatformLogin, sel.Name()), Hint: hint}
	}
	if c.Token == "" {
		return nil, &errs.AuthError{Err: fmt.Errorf("%s %w: the platform context %s has no API token", command, ErrNeedsPlatformLogin, c.Name),
			Hint: fmt.Sprintf("run 'devtool context use %s --token <token>', or set %s", c.Name, api.EnvToken)}
	}
	pc, err := contexts.PlatformClient(c)
	if err != nil {
		return nil, err
	}
	return &Platform{Selection: sel, Client: pc}, nil
}

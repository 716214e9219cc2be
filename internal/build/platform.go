package build

import (
	"context"
	"errors"
)

// ErrPlatformUnavailable is returned when the current context is a devtool platform: its hosted
// build service is not part of this build of devtool yet.
var ErrPlatformUnavailable = errors.New("the platform's build service is not available in this build of devtool; " +
	"set BUILDKIT_HOST=HOST:PORT to use a BuildKit daemon, or use a context that is not a platform")

// Platform is the seam for the platform's hosted build service.
type Platform struct{ URL string }

// Name implements Builder.
func (p *Platform) Name() string { return "platform build service " + p.URL }

// Build implements Builder.
func (p *Platform) Build(context.Context, Request) (Result, error) {
	return Result{}, ErrPlatformUnavailable
}

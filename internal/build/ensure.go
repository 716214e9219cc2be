package build

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	"github.com/devtool/devtool/internal/compose"
)

// Image is one image a deploy or `devtool build` needs.
type Image struct {
	Service string
	// Image is the name the manifest gives it; "" derives one (see ImageName) with a content-hash tag.
	Image string
	Build *compose.Build
}

// EnsureOptions say how EnsureImages names, checks and builds images.
type EnsureOptions struct {
	// Builder builds; when nil, NewBuilder is called the first time a build is needed, so a deploy
	// whose images all exist needs no reachable builder.
	Builder    Builder
	NewBuilder func(context.Context) (Builder, error)
	// Registry, Namespace and Name make derived image names: <Registry>/<Namespace>/<Name>-<service>:<hash>.
	Registry, Namespace, Name string
	// Force builds every image, even when the registry has it (deploy --build).
	Force bool
	// OnlyMissing skips images with an explicit name when the registry has them (deploy's automatic
	// builds). Without it explicit names are always built (`devtool build`). Derived names carry a
	// content-hash tag and are skipped whenever the registry has them, unless Force.
	OnlyMissing bool

	NoCache     bool
	Secrets     []Secret
	ExportCache string   // overrides each build's export_cache when set
	CacheFrom   []string // added to each build's cache_from

	Progress     io.Writer
	ProgressMode string

	// Exists checks whether a registry has ref; default RemoteExists.
	Exists func(ctx context.Context, ref string) (bool, error)
	// OnBuild, if set, is told before each image is built (for "Building x" lines).
	OnBuild func(service, ref string, b Builder)
}

// EnsureImages makes sure every image exists in its registry, building and pushing those that must
// be, one after another in the given order. It returns service name → result (Result.Ref is the image
// reference a deploy should use). The first failure stops it.
//
// This is the library entry point for `devtool build` and for `deploy` (automatic and --build builds).
func EnsureImages(ctx context.Context, opts EnsureOptions, images []Image) (map[string]Result, error) {
	exists := opts.Exists
	if exists == nil {
		exists = RemoteExists
	}
	out := make(map[string]Result, len(images))
	for _, img := range images {
		if img.Build == nil {
			return nil, fmt.Errorf("service %s has no build section", img.Service)
		}
		req := Request{
			Context:      img.Build.Context,
			Dockerfile:   img.Build.Dockerfile,
			Target:       img.Build.Target,
			Args:         img.Build.Args,
			Push:         true,
			NoCache:      opts.NoCache,
			Secrets:      opts.Secrets,
			ExportCache:  img.Build.ExportCache,
			CacheFrom:    append(append([]string{}, img.Build.CacheFrom...), opts.CacheFrom...),
			Progress:     opts.Progress,
			ProgressMode: opts.ProgressMode,
		}
		if opts.ExportCache != "" {
			req.ExportCache = opts.ExportCache
		}
		ref := img.Image
		skippable := opts.OnlyMissing
		if ref == "" {
			tag, err := ContentTagContext(ctx, req)
			if err != nil {
				return nil, fmt.Errorf("service %s: %w", img.Service, err)
			}
			if ref, err = ImageName(opts.Registry, opts.Namespace, opts.Name, img.Service, tag); err != nil {
				return nil, err
			}
			skippable = true
		}
		req.Tags = []string{ref}
		if skippable && !opts.Force && !opts.NoCache {
			ok, err := exists(ctx, ref)
			if err != nil {
				return nil, fmt.Errorf("service %s: checking the registry for %s: %w", img.Service, ref, err)
			}
			if ok {
				out[img.Service] = Result{Ref: ref, Skipped: true}
				continue
			}
		}
		if opts.Builder == nil {
			if opts.NewBuilder == nil {
				return nil, errors.New("no builder")
			}
			b, err := opts.NewBuilder(ctx)
			if err != nil {
				return nil, err
			}
			opts.Builder = b
		}
		if opts.OnBuild != nil {
			opts.OnBuild(img.Service, ref, opts.Builder)
		}
		res, err := opts.Builder.Build(ctx, req)
		if err != nil {
			return nil, fmt.Errorf("service %s: %w", img.Service, err)
		}
		out[img.Service] = res
	}
	return out, nil
}

// RemoteExists asks the image's registry (HEAD of the manifest) whether it has ref. Registries on
// loopback are spoken to over plain HTTP; credentials come from the Docker config file.
// Not found is (false, nil); a registry that cannot be reached is an error.
//
// The check has a deadline (registryCheckTimeout) and returns when ctx ends, also while a Docker
// credential helper (run by the keychain without a context) does not answer; the error names the
// registry and the wait.
func RemoteExists(ctx context.Context, ref string) (bool, error) {
	cctx, cancel := context.WithTimeout(ctx, registryCheckTimeout)
	defer cancel()
	type answer struct {
		ok  bool
		err error
	}
	ch := make(chan answer, 1) // buffered: a helper that answers late leaves no goroutine blocked
	go func() {
		ok, err := remoteExists(cctx, ref)
		ch <- answer{ok, err}
	}()
	select {
	case a := <-ch:
		if a.err != nil && ctx.Err() == nil && errors.Is(cctx.Err(), context.DeadlineExceeded) {
			return false, fmt.Errorf("waiting for the registry %s (or its Docker credential helper) for %v: %w", registryOf(ref), registryCheckTimeout, a.err)
		}
		return a.ok, a.err
	case <-cctx.Done():
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		return false, fmt.Errorf("waiting for the registry %s (or its Docker credential helper) for %v: no answer", registryOf(ref), registryCheckTimeout)
	}
}

// registryCheckTimeout bounds RemoteExists.
var registryCheckTimeout = 30 * time.Second

func remoteExists(ctx context.Context, ref string) (bool, error) {
	var nopts []name.Option
	if isLoopbackRegistry(registryOf(ref)) {
		nopts = append(nopts, name.Insecure)
	}
	r, err := name.ParseReference(ref, nopts...)
	if err != nil {
		return false, err
	}
	_, err = remote.Head(r, registryOptions(ctx)...)
	if err == nil {
		return true, nil
	}
	var terr *transport.Error
	if errors.As(err, &terr) && (terr.StatusCode == http.StatusNotFound) {
		return false, nil
	}
	return false, err
}

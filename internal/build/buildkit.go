package build

import (
	"context"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strings"

	dockerconfig "github.com/docker/cli/cli/config"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/moby/buildkit/client"
	"github.com/moby/buildkit/exporter/containerimage/exptypes"
	"github.com/moby/buildkit/session"
	"github.com/moby/buildkit/session/auth/authprovider"
	"github.com/moby/buildkit/session/secrets/secretsprovider"
	"github.com/moby/buildkit/util/progress/progressui"
	"github.com/tonistiigi/fsutil"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
)

// BuildKit builds with a BuildKit daemon through its Go client and the daemon's built-in Dockerfile
// frontend ("dockerfile.v0"). A "# syntax=" line in the Dockerfile is not followed (that would pull a
// frontend image, which fails offline): the built-in frontend always does the work.
type BuildKit struct {
	// Addr is the daemon address with its scheme: tcp://HOST:PORT, unix:///path, ...
	Addr string
	// DialOptions are extra gRPC options (keepalive, see KeepaliveFromEnv).
	DialOptions []grpc.DialOption
	// Hosted, when set, is the platform build service this daemon is: every connection presents
	// the client certificate it gives and checks the daemon against its CA.
	Hosted *HostedService
}

// NormalizeBuildKitHost adds tcp:// to an address written HOST:PORT (as BUILDKIT_HOST is in the spec);
// a URL is kept as given.
func NormalizeBuildKitHost(s string) string {
	s = strings.TrimSpace(s)
	if s == "" || strings.Contains(s, "://") {
		return s
	}
	return "tcp://" + s
}

// Name implements Builder.
func (b *BuildKit) Name() string {
	if b.Hosted != nil {
		return "the build service of " + b.Hosted.Platform + " (BuildKit at " + b.Addr + ")"
	}
	return "BuildKit at " + b.Addr
}

func (b *BuildKit) client(ctx context.Context) (*client.Client, error) {
	opts := make([]client.ClientOpt, 0, len(b.DialOptions)+1)
	for _, o := range b.DialOptions {
		opts = append(opts, client.WithGRPCDialOption(o))
	}
	if b.Hosted != nil {
		cert, key, ca, err := b.Hosted.Credentials(ctx)
		if err != nil {
			return nil, fmt.Errorf("getting a client certificate for the build service of %s: %w", b.Hosted.Platform, err)
		}
		tc, err := TLSCredentials(cert, key, ca)
		if err != nil {
			return nil, err
		}
		// After the client's own (insecure) transport option, so this one wins.
		opts = append(opts, client.WithGRPCDialOption(tc))
	}
	return client.New(ctx, b.Addr, opts...)
}

// Ping checks the daemon answers. A hosted service that cannot be reached with the kept client
// certificate (refused, or its own certificate not of the kept CA) gets one more try with a new one.
func (b *BuildKit) Ping(ctx context.Context) error {
	err := b.ping(ctx)
	if err != nil && b.Hosted != nil && b.Hosted.Forget != nil && ctx.Err() == nil {
		b.Hosted.Forget()
		err = b.ping(ctx)
	}
	return err
}

func (b *BuildKit) ping(ctx context.Context) error {
	c, err := b.client(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.Info(ctx)
	return err
}

// Build implements Builder.
func (b *BuildKit) Build(ctx context.Context, req Request) (Result, error) {
	if err := req.validate(); err != nil {
		return Result{}, err
	}
	c, err := b.client(ctx)
	if err != nil {
		return Result{}, fmt.Errorf("connecting to BuildKit at %s: %w", b.Addr, err)
	}
	defer c.Close()
	opt, err := solveOptions(ctx, req, solveSpec{exporter: client.ExporterImage, push: req.Push})
	if err != nil {
		return Result{}, err
	}
	resp, err := solve(ctx, c, opt, req)
	if err != nil {
		return Result{}, fmt.Errorf("building %s with %s: %w", req.Tags[0], b.Name(), err)
	}
	return Result{Ref: req.Tags[0], Digest: resp.ExporterResponse[exptypes.ExporterImageDigestKey]}, nil
}

// solveSpec is what differs between the builders that share the BuildKit solve (a BuildKit daemon,
// and the BuildKit inside a Docker daemon).
type solveSpec struct {
	// exporter is the exporter type: client.ExporterImage, or "moby" (a Docker daemon's image store).
	exporter string
	// push makes the exporter push the tags itself.
	push bool
	// inlineCache exports the build cache into the image's config (the only cache export of a Docker
	// daemon with its own image store) instead of to the registry at Request.ExportCache.
	inlineCache bool
	// exportAttrs and frontendAttrs are added to the exporter's and the Dockerfile frontend's attributes.
	exportAttrs, frontendAttrs map[string]string
	entitlements               []string
	// ignore, when set, are .dockerignore patterns applied to the context on this side too (daemons whose
	// frontend predates "<Dockerfile>.dockerignore").
	ignore []string
}

// solveOptions makes the solve of a Dockerfile build with the daemon's built-in Dockerfile frontend.
func solveOptions(ctx context.Context, req Request, spec solveSpec) (client.SolveOpt, error) {
	dockerfile := req.dockerfilePath()
	ctxFS, err := fsutil.NewFS(req.Context)
	if err != nil {
		return client.SolveOpt{}, err
	}
	if len(spec.ignore) > 0 {
		if ctxFS, err = fsutil.NewFilterFS(ctxFS, &fsutil.FilterOpt{ExcludePatterns: spec.ignore}); err != nil {
			return client.SolveOpt{}, fmt.Errorf(".dockerignore: %w", err)
		}
	}
	dfFS, err := fsutil.NewFS(filepath.Dir(dockerfile))
	if err != nil {
		return client.SolveOpt{}, err
	}
	attrs := map[string]string{
		"filename": filepath.Base(dockerfile),
		// Present (even empty), "cmdline" tells the Dockerfile frontend it was already forwarded, so a
		// "# syntax=" line does not make it pull another frontend image.
		"cmdline": "",
	}
	if req.Target != "" {
		attrs["target"] = req.Target
	}
	if req.NoCache {
		attrs["no-cache"] = ""
	}
	for k, v := range req.Args {
		if k == "BUILDKIT_SYNTAX" {
			continue // never forward to a frontend image
		}
		attrs["build-arg:"+k] = v
	}
	for k, v := range spec.frontendAttrs {
		attrs[k] = v
	}
	exportAttrs := map[string]string{"name": strings.Join(req.Tags, ",")}
	if spec.push {
		exportAttrs["push"] = "true"
		if allLoopback(append(append([]string{}, req.Tags...), req.ExportCache)) {
			exportAttrs["registry.insecure"] = "true"
		}
	}
	for k, v := range spec.exportAttrs {
		exportAttrs[k] = v
	}
	opt := client.SolveOpt{
		Frontend:            "dockerfile.v0",
		FrontendAttrs:       attrs,
		LocalMounts:         map[string]fsutil.FS{"context": ctxFS, "dockerfile": dfFS},
		Exports:             []client.ExportEntry{{Type: spec.exporter, Attrs: exportAttrs}},
		AllowedEntitlements: spec.entitlements,
		Session: []session.Attachable{withRegistryAuth(ctx, boundAuthProvider(authprovider.NewDockerAuthProvider(authprovider.DockerAuthProviderConfig{
			ConfigFile: dockerconfig.LoadDefaultConfigFile(io.Discard),
		})))},
	}
	if len(req.Secrets) > 0 {
		srcs := make([]secretsprovider.Source, 0, len(req.Secrets))
		for _, s := range req.Secrets {
			srcs = append(srcs, secretsprovider.Source{ID: s.ID, FilePath: s.Src})
		}
		store, err := secretsprovider.NewStore(srcs)
		if err != nil {
			return client.SolveOpt{}, err
		}
		opt.Session = append(opt.Session, secretsprovider.NewSecretProvider(store))
	}
	switch {
	case req.ExportCache != "" && spec.inlineCache:
		opt.CacheExports = append(opt.CacheExports, client.CacheOptionsEntry{Type: "inline", Attrs: map[string]string{}})
	case req.ExportCache != "":
		a := map[string]string{"ref": req.ExportCache, "mode": "max"}
		if allLoopback([]string{req.ExportCache}) {
			a["registry.insecure"] = "true"
		}
		opt.CacheExports = append(opt.CacheExports, client.CacheOptionsEntry{Type: "registry", Attrs: a})
	}
	for _, ref := range req.CacheFrom {
		a := map[string]string{"ref": ref}
		if allLoopback([]string{ref}) {
			a["registry.insecure"] = "true"
		}
		opt.CacheImports = append(opt.CacheImports, client.CacheOptionsEntry{Type: "registry", Attrs: a})
	}
	return opt, nil
}

// solve runs the solve and shows its progress on req.Progress in req.ProgressMode.
func solve(ctx context.Context, c *client.Client, opt client.SolveOpt, req Request) (*client.SolveResponse, error) {
	mode := progressui.DisplayMode(req.ProgressMode)
	if mode == "" {
		mode = progressui.AutoMode
	}
	out := req.Progress
	if out == nil {
		out, mode = io.Discard, progressui.QuietMode
	}
	disp, err := progressui.NewDisplay(out, mode)
	if err != nil {
		return nil, err
	}
	ch := make(chan *client.SolveStatus)
	var resp *client.SolveResponse
	eg, ectx := errgroup.WithContext(ctx)
	eg.Go(func() error {
		var err error
		resp, err = c.Solve(ectx, nil, opt, ch)
		return err
	})
	eg.Go(func() error {
		_, err := disp.UpdateFrom(context.WithoutCancel(ectx), ch)
		return err
	})
	if err := eg.Wait(); err != nil {
		return nil, err
	}
	return resp, nil
}

// allLoopback reports whether every non-empty reference names a registry on this machine
// (localhost, 127.0.0.0/8, ::1): those are reached over plain HTTP, as Docker does by default.
func allLoopback(refs []string) bool {
	seen := false
	for _, r := range refs {
		if r == "" {
			continue
		}
		seen = true
		if !isLoopbackRegistry(registryOf(r)) {
			return false
		}
	}
	return seen
}

func registryOf(ref string) string {
	r, err := name.ParseReference(ref)
	if err != nil {
		return ""
	}
	return r.Context().RegistryStr()
}

func isLoopbackRegistry(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

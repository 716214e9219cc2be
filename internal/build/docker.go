package build

import (
	"archive/tar"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/devtool/devtool/internal/safefile"
	"github.com/docker/docker/api/types"
	dockerbuild "github.com/docker/docker/api/types/build"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/versions"
	dockerclient "github.com/docker/docker/client"
	"github.com/docker/docker/pkg/jsonmessage"
	"github.com/moby/buildkit/client"
	"github.com/moby/buildkit/solver/pb"
	"golang.org/x/term"
	"google.golang.org/grpc"
)

// DefaultDockerHost is the local Docker daemon when DOCKER_HOST is not set.
const DefaultDockerHost = "unix:///var/run/docker.sock"

// Docker builds with a Docker daemon through the Engine API, with the daemon's own BuildKit (the
// BuildKit client over the Engine API's /grpc and /session endpoints, as `docker buildx` does with
// its docker driver), so secrets, targets and cache import and export work as with a BuildKit daemon.
// A daemon without BuildKit (Engine API older than 1.39, a Windows daemon that does not announce it,
// or one whose /grpc does not answer) builds with its classic builder. Images are pushed with the daemon.
type Docker struct {
	// Host is the daemon address: unix:///var/run/docker.sock, tcp://HOST:PORT, ...
	Host string
	// NetworkMode for RUN steps; "" is the daemon's default (tests with a daemon without a bridge use "none").
	// With BuildKit only "", "default", "none" and "host" exist.
	NetworkMode string
	// Classic makes the daemon build with its classic builder even when it has BuildKit (as DOCKER_BUILDKIT=0
	// does). Set it before the first Build.
	Classic bool
	// DialOptions are extra gRPC options for the daemon's BuildKit over /grpc (keepalive, see
	// KeepaliveFromEnv). Set them before the first Build.
	DialOptions []grpc.DialOption

	client *dockerclient.Client

	mu       sync.Mutex
	detected *daemonBuilder // what the daemon builds with, once known
}

// daemonBuilder is what a Docker daemon builds with.
type daemonBuilder struct {
	buildKit bool
	// containerdStore is true when the daemon keeps its images in containerd (its BuildKit can then export
	// the cache to a registry and push by itself).
	containerdStore bool
	// why the classic builder is used, for messages.
	why string
}

// NewDocker makes a Docker builder for host (DefaultDockerHost when empty).
func NewDocker(host string) (*Docker, error) {
	if host == "" {
		host = DefaultDockerHost
	}
	c, err := dockerclient.NewClientWithOpts(dockerclient.WithHost(host), dockerclient.WithAPIVersionNegotiation())
	if err != nil {
		return nil, fmt.Errorf("docker host %s: %w", host, err)
	}
	return &Docker{Host: host, client: c}, nil
}

// Name implements Builder.
func (d *Docker) Name() string { return "Docker daemon at " + d.Host }

// Close releases the client's connections.
func (d *Docker) Close() error { return d.client.Close() }

// Ping checks the daemon answers.
func (d *Docker) Ping(ctx context.Context) error {
	_, err := d.client.Ping(ctx)
	return err
}

// minBuildKitAPI is the Engine API version of Docker 18.09, the first daemon with BuildKit behind /grpc and /session.
const minBuildKitAPI = "1.39"

// builderFromPing decides from the daemon's /_ping answer whether it has BuildKit: it says so with
// "Builder-Version: 2"; otherwise a Linux daemon with Engine API 1.39 or later has it too (BuildKit is
// not its default builder before Docker 23, but is there), while older daemons and Windows daemons
// that do not announce it have only the classic builder.
func builderFromPing(p types.Ping) daemonBuilder {
	switch {
	case p.BuilderVersion == dockerbuild.BuilderBuildKit:
		return daemonBuilder{buildKit: true}
	case strings.EqualFold(p.OSType, "windows"):
		return daemonBuilder{why: "a Windows daemon that does not announce BuildKit"}
	case p.APIVersion != "" && versions.LessThan(p.APIVersion, minBuildKitAPI):
		return daemonBuilder{why: "its Engine API " + p.APIVersion + " is older than " + minBuildKitAPI + " (Docker 18.09), the first with BuildKit"}
	}
	return daemonBuilder{buildKit: true}
}

// buildKitProbeTimeout bounds the question to the daemon's BuildKit (a /grpc that accepts the upgrade
// but never answers would otherwise hang the build).
const buildKitProbeTimeout = 30 * time.Second

// builder finds out (once per Docker value) what the daemon builds with: /_ping, then, when it should
// have BuildKit, the BuildKit workers over /grpc (a daemon whose BuildKit does not answer builds
// with its classic builder).
func (d *Docker) builder(ctx context.Context) (daemonBuilder, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.detected != nil {
		return *d.detected, nil
	}
	var db daemonBuilder
	if d.Classic {
		db.why = "the classic builder was asked for with " + EnvDockerBuildKit + "=0"
	} else {
		p, err := d.client.Ping(ctx)
		if err != nil {
			return daemonBuilder{}, fmt.Errorf("%s: %w", d.Name(), err)
		}
		db = builderFromPing(p)
	}
	if db.buildKit {
		pctx, cancel := context.WithTimeout(ctx, buildKitProbeTimeout)
		c, err := d.buildKitClient(pctx)
		var workers []*client.WorkerInfo
		if err == nil {
			workers, err = c.ListWorkers(pctx)
			c.Close()
		}
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return daemonBuilder{}, ctx.Err()
			}
			db = daemonBuilder{why: "its BuildKit does not answer: " + firstLine(err)}
		}
		for _, w := range workers {
			// what buildx's docker driver looks at: the worker of a daemon with the containerd image store
			if _, ok := w.Labels["org.mobyproject.buildkit.worker.snapshotter"]; ok {
				db.containerdStore = true
			}
		}
	}
	d.detected = &db
	return db, nil
}

// buildKitClient is a BuildKit client of the daemon's own BuildKit: gRPC over the hijacked /grpc
// connection, the session over /session. The connections live as long as ctx.
func (d *Docker) buildKitClient(ctx context.Context) (*client.Client, error) {
	return client.New(ctx, "", d.buildKitClientOpts(ctx)...)
}

// buildKitClientOpts are the options of the daemon's BuildKit client: the hijacked dialers and the
// extra gRPC options (keepalive).
func (d *Docker) buildKitClientOpts(ctx context.Context) []client.ClientOpt {
	opts := []client.ClientOpt{
		client.WithContextDialer(func(context.Context, string) (net.Conn, error) {
			return d.client.DialHijack(ctx, "/grpc", "h2c", nil)
		}),
		client.WithSessionDialer(func(ctx context.Context, proto string, meta map[string][]string) (net.Conn, error) {
			return d.client.DialHijack(ctx, "/session", proto, meta)
		}),
	}
	for _, o := range d.DialOptions {
		opts = append(opts, client.WithGRPCDialOption(o))
	}
	return opts
}

// dockerfileInTar is where the Dockerfile goes when it lies outside the context.
const dockerfileInTar = ".devtool.Dockerfile"

// Build implements Builder.
func (d *Docker) Build(ctx context.Context, req Request) (Result, error) {
	if err := req.validate(); err != nil {
		return Result{}, err
	}
	db, err := d.builder(ctx)
	if err != nil {
		return Result{}, err
	}
	if !db.buildKit {
		return d.buildClassic(ctx, req, db.why)
	}
	return d.buildWithBuildKit(ctx, req, db)
}

// dockerSolveSpec is how a build runs on the BuildKit of a Docker daemon: into its image store
// (exporter "moby"), base images it has preferred to the registry's (as its classic builder does), the
// cache inline in the image unless the daemon keeps its images in containerd, RUN steps on networkMode,
// and the ignore rules applied on this side.
func dockerSolveSpec(db daemonBuilder, networkMode string, ignore []string) (solveSpec, error) {
	spec := solveSpec{
		exporter:      "moby",
		frontendAttrs: map[string]string{"image-resolve-mode": pb.AttrImageResolveModePreferLocal},
		inlineCache:   !db.containerdStore,
		ignore:        ignore,
	}
	if db.containerdStore {
		spec.exportAttrs = map[string]string{"prefer-image-digest": "true"}
	}
	switch networkMode {
	case "", "default":
	case "none":
		spec.frontendAttrs["force-network-mode"] = "none"
	case "host":
		spec.frontendAttrs["force-network-mode"] = "host"
		spec.entitlements = []string{"network.host"}
	default:
		return solveSpec{}, fmt.Errorf("network mode %q: the BuildKit of a Docker daemon only knows default, none and host", networkMode)
	}
	return spec, nil
}

// buildWithBuildKit builds with the daemon's BuildKit into the daemon's image store ("moby" exporter),
// then pushes with the daemon, as buildx's docker driver does.
func (d *Docker) buildWithBuildKit(ctx context.Context, req Request, db daemonBuilder) (Result, error) {
	// The daemon's Dockerfile frontend may predate "<Dockerfile>.dockerignore": apply the rules here.
	ignore, err := ignorePatterns(req.Context, req.dockerfilePath())
	if err != nil {
		return Result{}, err
	}
	spec, err := dockerSolveSpec(db, d.NetworkMode, ignore)
	if err != nil {
		return Result{}, err
	}
	opt, err := solveOptions(ctx, req, spec)
	if err != nil {
		return Result{}, err
	}
	c, err := d.buildKitClient(ctx)
	if err != nil {
		return Result{}, fmt.Errorf("connecting to the BuildKit of %s: %w", d.Name(), err)
	}
	defer c.Close()
	if _, err := solve(ctx, c, opt, req); err != nil {
		return Result{}, fmt.Errorf("building %s with %s: %w", req.Tags[0], d.Name(), err)
	}
	out := req.Progress
	if out == nil {
		out = io.Discard
	}
	fd, isTerm := terminalOf(out, req.ProgressMode)
	res := Result{Ref: req.Tags[0]}
	if req.Push {
		for i, ref := range req.Tags {
			digest, err := d.push(ctx, ref, out, fd, isTerm)
			if err != nil {
				return Result{}, err
			}
			if i == 0 {
				res.Digest = digest
			}
		}
	}
	if req.ExportCache != "" && spec.inlineCache { // the cache is in the image's config: push it as the cache image
		if err := d.client.ImageTag(ctx, req.Tags[0], req.ExportCache); err != nil {
			return Result{}, fmt.Errorf("tagging the cache image %s: %w", req.ExportCache, err)
		}
		if _, err := d.push(ctx, req.ExportCache, out, fd, isTerm); err != nil {
			return Result{}, err
		}
	}
	return res, nil
}

// buildClassic builds with the daemon's classic builder (a daemon without BuildKit; why says so).
func (d *Docker) buildClassic(ctx context.Context, req Request, why string) (Result, error) {
	if len(req.Secrets) > 0 {
		hint := "set BUILDKIT_HOST=HOST:PORT to a BuildKit daemon to use --secret"
		if d.Classic {
			hint = "unset " + EnvDockerBuildKit + ", or " + hint
		}
		return Result{}, fmt.Errorf("build secrets need BuildKit, and %s builds with its classic builder (%s): %s", d.Name(), why, hint)
	}
	dockerfile := req.dockerfilePath()
	patterns, err := ignorePatterns(req.Context, dockerfile)
	if err != nil {
		return Result{}, err
	}
	dfName := dockerfileInTar
	if rel, err := filepath.Rel(req.Context, dockerfile); err == nil && filepath.IsLocal(rel) {
		dfName = filepath.ToSlash(rel)
	}
	out := req.Progress
	if out == nil {
		out = io.Discard
	}
	fd, isTerm := terminalOf(out, req.ProgressMode)

	for _, ref := range req.CacheFrom { // the classic builder uses local images as cache: pull them, if they exist
		if rc, err := d.client.ImagePull(ctx, ref, image.PullOptions{RegistryAuth: emptyAuth}); err == nil {
			_ = jsonmessage.DisplayJSONMessagesStream(rc, io.Discard, 0, false, nil)
			rc.Close()
		}
	}

	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(writeContextTar(pw, req.Context, patterns, dockerfile, dfName)) }()
	args := make(map[string]*string, len(req.Args))
	for k, v := range req.Args {
		args[k] = &v
	}
	resp, err := d.client.ImageBuild(ctx, pr, dockerbuild.ImageBuildOptions{
		Tags:        req.Tags,
		Dockerfile:  dfName,
		BuildArgs:   args,
		Target:      req.Target,
		NoCache:     req.NoCache,
		Remove:      true,
		ForceRemove: true,
		CacheFrom:   req.CacheFrom,
		NetworkMode: d.NetworkMode,
		Version:     dockerbuild.BuilderV1,
	})
	if err != nil {
		pr.CloseWithError(err)
		return Result{}, fmt.Errorf("building %s with %s: %w", req.Tags[0], d.Name(), err)
	}
	err = jsonmessage.DisplayJSONMessagesStream(resp.Body, out, fd, isTerm, nil)
	resp.Body.Close()
	if err != nil {
		return Result{}, fmt.Errorf("building %s with %s: %w", req.Tags[0], d.Name(), err)
	}
	res := Result{Ref: req.Tags[0]}
	if !req.Push {
		return res, nil
	}
	for i, ref := range req.Tags {
		digest, err := d.push(ctx, ref, out, fd, isTerm)
		if err != nil {
			return Result{}, err
		}
		if i == 0 {
			res.Digest = digest
		}
	}
	if req.ExportCache != "" { // the classic builder's cache is the image itself
		if err := d.client.ImageTag(ctx, req.Tags[0], req.ExportCache); err != nil {
			return Result{}, fmt.Errorf("tagging the cache image %s: %w", req.ExportCache, err)
		}
		if _, err := d.push(ctx, req.ExportCache, out, fd, isTerm); err != nil {
			return Result{}, err
		}
	}
	return res, nil
}

// emptyAuth is the X-Registry-Auth header for "no credentials"; the daemon then uses its own.
var emptyAuth = base64.URLEncoding.EncodeToString([]byte("{}"))

func (d *Docker) push(ctx context.Context, ref string, out io.Writer, fd uintptr, isTerm bool) (string, error) {
	ra, err := dockerPushAuth(ctx, ref)
	if err != nil {
		return "", err
	}
	rc, err := d.client.ImagePush(ctx, ref, image.PushOptions{RegistryAuth: ra})
	if err != nil {
		return "", fmt.Errorf("pushing %s: %w", ref, err)
	}
	defer rc.Close()
	var digest string
	err = jsonmessage.DisplayJSONMessagesStream(rc, out, fd, isTerm, func(m jsonmessage.JSONMessage) {
		var aux struct{ Digest string }
		if m.Aux != nil && json.Unmarshal(*m.Aux, &aux) == nil && aux.Digest != "" {
			digest = aux.Digest
		}
	})
	if err != nil {
		return "", fmt.Errorf("pushing %s: %w", ref, err)
	}
	return digest, nil
}

func terminalOf(w io.Writer, mode string) (uintptr, bool) {
	if mode == "plain" || mode == "quiet" {
		return 0, false
	}
	f, _ := w.(*os.File)
	if fw, ok := w.(interface{ File() *os.File }); ok { // a wrapper (secretmask) over a file
		f = fw.File()
	}
	if f == nil || !term.IsTerminal(int(f.Fd())) {
		return 0, false
	}
	return f.Fd(), true
}

// writeContextTar streams the build context as a tar, without what .dockerignore excludes, with the
// Dockerfile always included (at dfName).
func writeContextTar(w io.Writer, dir string, patterns []string, dockerfile, dfName string) error {
	tw := tar.NewWriter(w)
	sawDockerfile := false
	err := walkContext(dir, patterns, func(rel, abs string, de fs.DirEntry) error {
		hdr, info, err := entryHeader(abs, de)
		if hdr == nil || err != nil {
			return err
		}
		hdr.Name = rel
		if hdr.Typeflag == tar.TypeDir {
			hdr.Name += "/"
		}
		if rel == dfName {
			sawDockerfile = true
		}
		return addToTar(tw, hdr, abs, info)
	})
	if err != nil {
		return err
	}
	if !sawDockerfile {
		// The Dockerfile may be outside the context (and a link to one): opened, not walked.
		f, err := safefile.Open(dockerfile)
		if err != nil {
			return err
		}
		info, err := f.Stat()
		f.Close()
		if err != nil {
			return err
		}
		hdr, err := tar.FileInfoHeader(info, "")
		if err != nil {
			return err
		}
		hdr.Name, hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname = dfName, 0, 0, "", ""
		if dir := path.Dir(dfName); dir != "." {
			hdr.Name = dfName // parent folders are implicit in a build context tar
		}
		if err := addToTar(tw, hdr, dockerfile, info); err != nil {
			return err
		}
	}
	return tw.Close()
}

// entryHeader makes the tar header of a walked file, folder or symbolic link at abs, owned by
// root and without a name (the caller sets it), and returns the walk's information about it
// (not following links: a symbolic link in a build context is sent as a link, as Docker does).
// It returns nil and no error for what a tar of files does not hold (sockets, pipes, devices),
// which the caller skips.
func entryHeader(abs string, de fs.DirEntry) (*tar.Header, fs.FileInfo, error) {
	info, err := de.Info()
	if err != nil {
		return nil, nil, err
	}
	link := ""
	if info.Mode()&fs.ModeSymlink != 0 {
		if link, err = os.Readlink(abs); err != nil {
			return nil, nil, err
		}
	} else if !info.Mode().IsRegular() && !info.IsDir() {
		return nil, nil, nil
	}
	hdr, err := tar.FileInfoHeader(info, link)
	if err != nil {
		return nil, nil, err
	}
	hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname = 0, 0, "", ""
	return hdr, info, nil
}

// addToTar writes hdr and, for a regular file, the content of abs. The file is opened through
// safefile (never blocking on a FIFO or device) and must still be the file the walk saw (want,
// same size): one replaced meanwhile, by a FIFO, a device or a link to a file elsewhere, is an
// error, not followed or waited for.
func addToTar(tw *tar.Writer, hdr *tar.Header, abs string, want fs.FileInfo) error {
	if hdr.Typeflag != tar.TypeReg {
		return tw.WriteHeader(hdr)
	}
	f, err := safefile.Open(abs)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if (want != nil && !os.SameFile(want, st)) || st.Size() != hdr.Size {
		return errors.New("file changed while reading: " + abs)
	}
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	n, err := io.Copy(tw, io.LimitReader(f, hdr.Size))
	if err == nil && n != hdr.Size {
		err = errors.New("file changed while reading: " + abs)
	}
	return err
}

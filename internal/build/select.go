package build

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"

	"github.com/devtool/devtool/internal/safefile"
)

// Environment variables read by this package (always through an injected getenv).
const (
	EnvBuildKitHost              = "BUILDKIT_HOST"
	EnvDockerHost                = "DOCKER_HOST"
	EnvRegistry                  = "DEVTOOL_REGISTRY"
	EnvKeepaliveTime             = "DEVTOOL_KEEPALIVE_CLIENT_TIME_MS"
	EnvKeepaliveTimeout          = "DEVTOOL_KEEPALIVE_CLIENT_TIMEOUT_MS"
	EnvKeepalivePermitWithoutRPC = "DEVTOOL_KEEPALIVE_CLIENT_PERMIT_WITHOUT_STREAM"
	// EnvDockerBuildKit set to 0 (false) makes the Docker backend build with the daemon's classic
	// builder, as with the Docker CLI.
	EnvDockerBuildKit = "DOCKER_BUILDKIT"
	// EnvBuildKitCert, EnvBuildKitKey and EnvBuildKitCA name PEM files: a client certificate, its key
	// and the CA of the daemon's certificate, for BUILDKIT_HOST and the context's builder (mTLS, as
	// buildctl's --tlscert, --tlskey, --tlscacert). All three or none.
	EnvBuildKitCert = "DEVTOOL_BUILDKIT_CERT"
	EnvBuildKitKey  = "DEVTOOL_BUILDKIT_KEY"
	EnvBuildKitCA   = "DEVTOOL_BUILDKIT_CA"
)

// maxPEMFile bounds a certificate or key file named by the environment.
const maxPEMFile = 1 << 20

// TLSFromEnv reads DEVTOOL_BUILDKIT_CERT, _KEY and _CA: nil when none is set; an error naming the
// variables when only some are, or when the files are not a usable certificate, key and CA.
func TLSFromEnv(getenv func(string) string) (grpc.DialOption, error) {
	names := []string{EnvBuildKitCert, EnvBuildKitKey, EnvBuildKitCA}
	var paths []string
	for _, n := range names {
		if v := strings.TrimSpace(getenv(n)); v != "" {
			paths = append(paths, v)
		}
	}
	if len(paths) == 0 {
		return nil, nil
	}
	if len(paths) != 3 {
		return nil, fmt.Errorf("%s: set all three (a client certificate, its key, and the CA of the BuildKit daemon's certificate) or none", strings.Join(names, ", "))
	}
	var data [3][]byte
	for i, p := range paths {
		b, err := safefile.Read(p, maxPEMFile)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", names[i], err)
		}
		data[i] = b
	}
	opt, err := TLSCredentials(data[0], data[1], data[2])
	if err != nil {
		return nil, fmt.Errorf("%s: %w", strings.Join(names, ", "), err)
	}
	return opt, nil
}

// DockerClassicFromEnv reads DOCKER_BUILDKIT as the Docker CLI does: unset or empty keeps the
// daemon's BuildKit; a boolean (1, 0, true, false, …) says whether to use it. Anything else is an
// error naming the variable.
func DockerClassicFromEnv(getenv func(string) string) (classic bool, err error) {
	v := strings.TrimSpace(getenv(EnvDockerBuildKit))
	if v == "" {
		return false, nil
	}
	on, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("%s=%q: want 1 (the daemon's BuildKit) or 0 (its classic builder)", EnvDockerBuildKit, v)
	}
	return !on, nil
}

// ClassicBuilderWarning is what the user is told when DOCKER_BUILDKIT=0 selects the classic builder.
func ClassicBuilderWarning(name string) string {
	return fmt.Sprintf("%s=0: %s builds with its classic builder: build secrets (--secret), RUN --mount and other "+
		"BuildKit-only Dockerfile features do not work, and the cache is the image itself; unset %s to use the daemon's BuildKit",
		EnvDockerBuildKit, name, EnvDockerBuildKit)
}

// Keepalive limits from the spec.
const (
	MinKeepaliveTime        = 10 * time.Second
	DefaultKeepaliveTimeout = 20 * time.Second
)

// KeepaliveFromEnv reads the client keepalive variables. It returns nil when keepalive is off
// (DEVTOOL_KEEPALIVE_CLIENT_TIME_MS unset or 0: the default, "infinity"). A time below 10 s is raised
// to 10 s; the timeout defaults to 20 s; pings without active RPCs are off unless the third variable is true.
func KeepaliveFromEnv(getenv func(string) string) (*keepalive.ClientParameters, error) {
	ms := func(name string) (time.Duration, bool, error) {
		v := strings.TrimSpace(getenv(name))
		if v == "" {
			return 0, false, nil
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return 0, false, fmt.Errorf("%s=%q: want a number of milliseconds", name, v)
		}
		return time.Duration(n) * time.Millisecond, true, nil
	}
	t, set, err := ms(EnvKeepaliveTime)
	if err != nil {
		return nil, err
	}
	timeout, timeoutSet, err := ms(EnvKeepaliveTimeout)
	if err != nil {
		return nil, err
	}
	permit := false
	if v := strings.TrimSpace(getenv(EnvKeepalivePermitWithoutRPC)); v != "" {
		if permit, err = strconv.ParseBool(v); err != nil {
			return nil, fmt.Errorf("%s=%q: want true or false", EnvKeepalivePermitWithoutRPC, v)
		}
	}
	if !set || t == 0 {
		return nil, nil
	}
	if t < MinKeepaliveTime {
		t = MinKeepaliveTime
	}
	if !timeoutSet || timeout == 0 {
		timeout = DefaultKeepaliveTimeout
	}
	return &keepalive.ClientParameters{Time: t, Timeout: timeout, PermitWithoutStream: permit}, nil
}

// SelectOptions say where builds may run.
type SelectOptions struct {
	// Hosted is the platform's build service when the context is a platform that has one (and its
	// builder is not set to something else): it comes after BUILDKIT_HOST, before the rest.
	Hosted *HostedService
	// ContextBuilder is the context's builder: a BuildKit address, "docker", or "".
	ContextBuilder string
	Getenv         func(string) string
	Logger         *slog.Logger
	// ProbeTimeout bounds each reachability check (default 5 s).
	ProbeTimeout time.Duration
	// Warn receives what the user should know about the builder chosen (DOCKER_BUILDKIT=0); nil
	// logs it as a warning.
	Warn func(string)
}

// Select picks the builder: BUILDKIT_HOST; else the platform's build service (Hosted); else the
// context's builder address; else the local Docker daemon (DOCKER_HOST or the default socket). Each
// candidate is checked; the first that answers is used. When none does, the error lists every
// address tried and why it failed.
func Select(ctx context.Context, opts SelectOptions) (Builder, error) {
	getenv := opts.Getenv
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	timeout := opts.ProbeTimeout
	if timeout == 0 {
		timeout = 5 * time.Second
	}
	ka, err := KeepaliveFromEnv(getenv)
	if err != nil {
		return nil, err
	}
	var dialOpts []grpc.DialOption
	if ka != nil {
		dialOpts = append(dialOpts, grpc.WithKeepaliveParams(*ka))
	}
	envTLS, err := TLSFromEnv(getenv)
	if err != nil {
		return nil, err
	}
	// mTLS from the environment, for the daemons named by address (never the platform's service,
	// which has its own certificate, nor Docker).
	addrOpts := dialOpts
	if envTLS != nil {
		addrOpts = append(append([]grpc.DialOption(nil), dialOpts...), envTLS)
	}
	classic, err := DockerClassicFromEnv(getenv)
	if err != nil {
		return nil, err
	}
	warn := opts.Warn
	if warn == nil {
		warn = func(s string) { log.Warn(s) }
	}

	type candidate struct {
		source string
		b      interface {
			Builder
			Ping(context.Context) error
		}
	}
	var cands []candidate
	if h := getenv(EnvBuildKitHost); strings.TrimSpace(h) != "" {
		cands = append(cands, candidate{"BUILDKIT_HOST", &BuildKit{Addr: NormalizeBuildKitHost(h), DialOptions: addrOpts}})
	}
	if h := opts.Hosted; h != nil {
		cands = append(cands, candidate{"the platform context", &BuildKit{Addr: NormalizeBuildKitHost(h.Addr), DialOptions: dialOpts, Hosted: h}})
	}
	if cb := strings.TrimSpace(opts.ContextBuilder); cb != "" && cb != "docker" && (opts.Hosted == nil || NormalizeBuildKitHost(cb) != NormalizeBuildKitHost(opts.Hosted.Addr)) {
		cands = append(cands, candidate{"the context's builder", &BuildKit{Addr: NormalizeBuildKitHost(cb), DialOptions: addrOpts}})
	}
	dockerHost := getenv(EnvDockerHost)
	source := "DOCKER_HOST"
	if dockerHost == "" {
		dockerHost, source = DefaultDockerHost, "the local Docker daemon"
	}
	d, err := NewDocker(dockerHost)
	if err != nil {
		return nil, err
	}
	d.Classic, d.DialOptions = classic, dialOpts
	cands = append(cands, candidate{source, d})

	var tried []string
	for _, c := range cands {
		pctx, cancel := context.WithTimeout(ctx, timeout)
		err := c.b.Ping(pctx)
		cancel()
		if err == nil {
			if len(tried) > 0 {
				log.Warn("builder not reachable, using the next one", "tried", strings.Join(tried, "; "), "using", c.b.Name())
			}
			if c.b != d {
				_ = d.Close()
			} else if d.Classic {
				warn(ClassicBuilderWarning(d.Name()))
			}
			return c.b, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		tried = append(tried, fmt.Sprintf("%s (%s): %s", c.b.Name(), c.source, firstLine(err)))
	}
	_ = d.Close()
	return nil, &NoBuilderError{Tried: tried}
}

// NoBuilderError says no builder answered, and what was tried.
type NoBuilderError struct{ Tried []string }

func (e *NoBuilderError) Error() string {
	return "no image builder is reachable; tried:\n  - " + strings.Join(e.Tried, "\n  - ") +
		"\nset BUILDKIT_HOST=HOST:PORT to a BuildKit daemon, or start Docker (DOCKER_HOST selects another daemon)"
}

// ErrNoBuilder matches a *NoBuilderError with errors.Is.
var ErrNoBuilder = errors.New("no image builder is reachable")

// Is makes errors.Is(err, ErrNoBuilder) true.
func (e *NoBuilderError) Is(target error) bool { return target == ErrNoBuilder }

func firstLine(err error) string {
	s := err.Error()
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}

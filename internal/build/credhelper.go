package build

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/moby/buildkit/session"
	"github.com/moby/buildkit/session/auth"
	"google.golang.org/grpc"
)

// Docker credential helpers (docker-credential-desktop, -osxkeychain, -ecr-login, ...) are run by
// the Docker keychain (go-containerregistry) and by BuildKit's session auth provider with
// exec.Command and no context: one that waits for something (a keychain unlock, a login prompt, a
// network call) hangs the command, and Ctrl-C cannot stop it. devtool cannot kill a process it did
// not start, so it stops waiting: the lookup runs aside and the caller gets an error when
// credentialHelperTimeout passes or its context ends (the helper ends on its own later).

// credentialHelperTimeout bounds one credential lookup (config file and credential helper).
var credentialHelperTimeout = 30 * time.Second

// registryResponseTimeout bounds the wait for a registry's answer to one request (its headers,
// not a whole layer transfer: big layers take the time they need).
var registryResponseTimeout = 60 * time.Second

// waitAside runs f in its own goroutine and returns its result, or an error naming what was
// waited for when ctx ends or timeout passes (f's late result is dropped).
func waitAside[T any](ctx context.Context, timeout time.Duration, what string, f func() (T, error)) (T, error) {
	type answer struct {
		v   T
		err error
	}
	ch := make(chan answer, 1) // buffered: a late answer leaves no goroutine blocked
	go func() {
		v, err := f()
		ch <- answer{v, err}
	}()
	t := time.NewTimer(timeout)
	defer t.Stop()
	var zero T
	select {
	case a := <-ch:
		return a.v, a.err
	case <-ctx.Done():
		return zero, fmt.Errorf("waiting for %s: %w", what, ctx.Err())
	case <-t.C:
		return zero, fmt.Errorf("waiting for %s for %v: no answer", what, timeout)
	}
}

// boundedKeychain is a keychain whose lookups return within credentialHelperTimeout or when
// their context ends.
type boundedKeychain struct{ inner authn.Keychain }

// registryKeychain is the Docker keychain with a deadline on its credential helpers, behind the
// platform registry's credentials when ctx carries them (WithRegistryAuth).
func registryKeychain(ctx context.Context) authn.Keychain {
	k := authn.Keychain(boundedKeychain{authn.DefaultKeychain})
	if a := registryAuthFrom(ctx); a != nil {
		k = hostedKeychain{a: a, next: k}
	}
	return k
}

func (k boundedKeychain) Resolve(r authn.Resource) (authn.Authenticator, error) {
	return k.ResolveContext(context.Background(), r)
}

func (k boundedKeychain) ResolveContext(ctx context.Context, r authn.Resource) (authn.Authenticator, error) {
	return waitAside(ctx, credentialHelperTimeout, "the Docker credential helper for "+r.RegistryStr()+
		" (credHelpers or credsStore in the Docker config file)", func() (authn.Authenticator, error) {
		return authn.Resolve(ctx, k.inner, r)
	})
}

// registryOptions are the go-containerregistry options of every registry call: the bounded
// keychain and a transport that gives up on a registry that accepts a request and never answers.
func registryOptions(ctx context.Context) []remote.Option {
	t := remote.DefaultTransport.(*http.Transport).Clone()
	t.ResponseHeaderTimeout = registryResponseTimeout
	return []remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(registryKeychain(ctx)), remote.WithTransport(t)}
}

// boundedAuthProvider wraps BuildKit's session auth provider (which runs the Docker credential
// helpers when the BuildKit daemon asks for registry credentials during a build): each call
// returns within credentialHelperTimeout, or when the build is cancelled, with an error naming
// what it waited for.
type boundedAuthProvider struct {
	auth.UnimplementedAuthServer
	inner auth.AuthServer
}

// boundAuthProvider wraps a, if it is BuildKit's auth server; otherwise it returns a unchanged.
func boundAuthProvider(a session.Attachable) session.Attachable {
	inner, ok := a.(auth.AuthServer)
	if !ok {
		return a
	}
	return &boundedAuthProvider{inner: inner}
}

func (b *boundedAuthProvider) Register(s *grpc.Server) { auth.RegisterAuthServer(s, b) }

const helperWhat = "the Docker credential helper (credHelpers or credsStore in the Docker config file) of "

func (b *boundedAuthProvider) Credentials(ctx context.Context, r *auth.CredentialsRequest) (*auth.CredentialsResponse, error) {
	return waitAside(ctx, credentialHelperTimeout, helperWhat+r.Host, func() (*auth.CredentialsResponse, error) { return b.inner.Credentials(ctx, r) })
}

func (b *boundedAuthProvider) FetchToken(ctx context.Context, r *auth.FetchTokenRequest) (*auth.FetchTokenResponse, error) {
	// FetchToken also asks the registry's token service (with ctx): the credential helper's
	// deadline plus the registry's.
	return waitAside(ctx, credentialHelperTimeout+registryResponseTimeout, helperWhat+r.Host+" or its token service",
		func() (*auth.FetchTokenResponse, error) { return b.inner.FetchToken(ctx, r) })
}

func (b *boundedAuthProvider) GetTokenAuthority(ctx context.Context, r *auth.GetTokenAuthorityRequest) (*auth.GetTokenAuthorityResponse, error) {
	return waitAside(ctx, credentialHelperTimeout, helperWhat+r.Host, func() (*auth.GetTokenAuthorityResponse, error) { return b.inner.GetTokenAuthority(ctx, r) })
}

func (b *boundedAuthProvider) VerifyTokenAuthority(ctx context.Context, r *auth.VerifyTokenAuthorityRequest) (*auth.VerifyTokenAuthorityResponse, error) {
	return waitAside(ctx, credentialHelperTimeout, helperWhat+r.Host, func() (*auth.VerifyTokenAuthorityResponse, error) { return b.inner.VerifyTokenAuthority(ctx, r) })
}

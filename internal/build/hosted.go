package build

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/moby/buildkit/session"
	"github.com/moby/buildkit/session/auth"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

// HostedService is a platform's build service: a BuildKit daemon that takes only clients holding a
// certificate the platform signed (mTLS).
type HostedService struct {
	// Addr is the daemon's address, tcp://HOST:PORT.
	Addr string
	// Platform names the platform in messages (its URL).
	Platform string
	// Credentials returns the client certificate, its key and the CA of the daemon's certificate
	// (PEM), renewing them as needed; called on every connection.
	Credentials func(ctx context.Context) (cert, key, ca []byte, err error)
	// Forget, when set, drops the kept certificate: called once when the daemon cannot be reached
	// with it, before one more try with a new one. (A certificate BuildKit refuses does not always
	// say so: under TLS 1.3 the client sees the connection closed after its handshake.)
	Forget func()
}

// TLSCredentials is the gRPC transport security of a hosted build service connection: the client
// certificate, and the daemon's certificate checked against the CA the platform gave (never the
// system's roots).
func TLSCredentials(cert, key, ca []byte) (grpc.DialOption, error) {
	pair, err := tls.X509KeyPair(cert, key)
	if err != nil {
		return nil, fmt.Errorf("the build service's client certificate: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, errors.New("the build service's CA: no certificate")
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{pair}, RootCAs: pool, MinVersion: tls.VersionTLS12}
	return grpc.WithTransportCredentials(credentials.NewTLS(cfg)), nil
}

// RegistryAuth gives the credentials of one registry the Docker config does not know: the
// platform's registry, whose password is a short-lived Kubernetes token of the user.
type RegistryAuth struct {
	// Host is the registry, host[:port] as in image names.
	Host string
	// Credentials returns the user name and password, renewing them as needed.
	Credentials func(ctx context.Context) (username, password string, err error)
}

type registryAuthKey struct{}

// WithRegistryAuth returns a context whose registry calls (existence checks, derived images, the
// pushes BuildKit and Docker make for a build) authenticate to a.Host with a's credentials; other
// registries keep the Docker config's. nil a returns ctx.
func WithRegistryAuth(ctx context.Context, a *RegistryAuth) context.Context {
	if a == nil || a.Host == "" || a.Credentials == nil {
		return ctx
	}
	return context.WithValue(ctx, registryAuthKey{}, a)
}

func registryAuthFrom(ctx context.Context) *RegistryAuth {
	a, _ := ctx.Value(registryAuthKey{}).(*RegistryAuth)
	return a
}

// hostedKeychain answers for the platform's registry, and asks the next keychain for the others.
type hostedKeychain struct {
	a    *RegistryAuth
	next authn.Keychain
}

func (k hostedKeychain) Resolve(r authn.Resource) (authn.Authenticator, error) {
	return k.ResolveContext(context.Background(), r)
}

func (k hostedKeychain) ResolveContext(ctx context.Context, r authn.Resource) (authn.Authenticator, error) {
	if r.RegistryStr() == k.a.Host {
		user, pass, err := k.a.Credentials(ctx)
		if err != nil {
			return nil, fmt.Errorf("credentials for the platform's registry %s: %w", k.a.Host, err)
		}
		return authn.FromConfig(authn.AuthConfig{Username: user, Password: pass}), nil
	}
	return authn.Resolve(ctx, k.next, r)
}

// hostedAuthProvider answers BuildKit's credential requests for the platform's registry, and hands
// the others to the Docker config's provider.
type hostedAuthProvider struct {
	auth.UnimplementedAuthServer
	a    *RegistryAuth
	next auth.AuthServer
}

// withRegistryAuth wraps the session's auth provider when ctx carries a RegistryAuth.
func withRegistryAuth(ctx context.Context, a session.Attachable) session.Attachable {
	ra := registryAuthFrom(ctx)
	inner, ok := a.(auth.AuthServer)
	if ra == nil || !ok {
		return a
	}
	return &hostedAuthProvider{a: ra, next: inner}
}

func (p *hostedAuthProvider) Register(s *grpc.Server) { auth.RegisterAuthServer(s, p) }

func (p *hostedAuthProvider) Credentials(ctx context.Context, r *auth.CredentialsRequest) (*auth.CredentialsResponse, error) {
	if r.Host == p.a.Host {
		user, pass, err := p.a.Credentials(ctx)
		if err != nil {
			return nil, fmt.Errorf("credentials for the platform's registry %s: %w", p.a.Host, err)
		}
		return &auth.CredentialsResponse{Username: user, Secret: pass}, nil
	}
	return p.next.Credentials(ctx, r)
}

func (p *hostedAuthProvider) FetchToken(ctx context.Context, r *auth.FetchTokenRequest) (*auth.FetchTokenResponse, error) {
	return p.next.FetchToken(ctx, r)
}

func (p *hostedAuthProvider) GetTokenAuthority(ctx context.Context, r *auth.GetTokenAuthorityRequest) (*auth.GetTokenAuthorityResponse, error) {
	return p.next.GetTokenAuthority(ctx, r)
}

func (p *hostedAuthProvider) VerifyTokenAuthority(ctx context.Context, r *auth.VerifyTokenAuthorityRequest) (*auth.VerifyTokenAuthorityResponse, error) {
	return p.next.VerifyTokenAuthority(ctx, r)
}

// dockerPushAuth is the X-Registry-Auth header of a Docker daemon push of ref: the platform
// registry's credentials when ref is in it, else none (the daemon uses its own).
func dockerPushAuth(ctx context.Context, ref string) (string, error) {
	a := registryAuthFrom(ctx)
	if a == nil || registryOf(ref) != a.Host {
		return emptyAuth, nil
	}
	user, pass, err := a.Credentials(ctx)
	if err != nil {
		return "", fmt.Errorf("credentials for the platform's registry %s: %w", a.Host, err)
	}
	b, err := json.Marshal(map[string]string{"username": user, "password": pass, "serveraddress": a.Host})
	if err != nil {
		return "", err
	}
	return base64.URLEncoding.EncodeToString(b), nil
}

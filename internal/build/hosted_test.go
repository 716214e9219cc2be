package build

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/moby/buildkit/session"
	"github.com/moby/buildkit/session/auth"
	"google.golang.org/grpc"

	"github.com/devtool/devtool/internal/platform/pki"
)

type recordingAuth struct {
	auth.UnimplementedAuthServer
	hosts []string
}

func (r *recordingAuth) Register(s *grpc.Server) { auth.RegisterAuthServer(s, r) }

func (r *recordingAuth) Credentials(_ context.Context, req *auth.CredentialsRequest) (*auth.CredentialsResponse, error) {
	r.hosts = append(r.hosts, req.Host)
	return &auth.CredentialsResponse{Username: "from-docker-config"}, nil
}

// The platform registry's credentials go to that registry only, in every path a build takes: the
// keychain (existence checks, derived images), BuildKit's session, and a Docker daemon's push.
func TestRegistryAuthOnlyForItsHost(t *testing.T) {
	calls := 0
	ra := &RegistryAuth{Host: "127.0.0.1:31500", Credentials: func(context.Context) (string, string, error) {
		calls++
		return "alice", "kube-token", nil
	}}
	ctx := WithRegistryAuth(context.Background(), ra)
	if WithRegistryAuth(context.Background(), nil) != context.Background() {
		t.Error("nil auth changed the context")
	}

	kc := registryKeychain(ctx)
	repo, _ := name.NewRepository("127.0.0.1:31500/alice/app")
	a, err := authn.Resolve(ctx, kc, repo)
	if err != nil {
		t.Fatal(err)
	}
	cfg, _ := a.Authorization()
	if cfg.Username != "alice" || cfg.Password != "kube-token" {
		t.Errorf("keychain for the platform registry: %+v", cfg)
	}
	other, _ := name.NewRepository("127.0.0.1:25000/alice/app")
	a, err = authn.Resolve(ctx, kc, other)
	if err != nil {
		t.Fatal(err)
	}
	if cfg, _ := a.Authorization(); cfg.Password == "kube-token" {
		t.Error("the platform's token went to another registry")
	}

	inner := &recordingAuth{}
	p := withRegistryAuth(ctx, inner).(auth.AuthServer)
	resp, err := p.Credentials(ctx, &auth.CredentialsRequest{Host: "127.0.0.1:31500"})
	if err != nil || resp.Username != "alice" || resp.Secret != "kube-token" {
		t.Errorf("session credentials: %+v %v", resp, err)
	}
	resp, _ = p.Credentials(ctx, &auth.CredentialsRequest{Host: "registry.example.com"})
	if resp.Username != "from-docker-config" || len(inner.hosts) != 1 {
		t.Errorf("another host was not asked of the Docker config: %+v %v", resp, inner.hosts)
	}
	if withRegistryAuth(context.Background(), inner) != session.Attachable(inner) {
		t.Error("without a RegistryAuth the provider is not the Docker config's")
	}

	h, err := dockerPushAuth(ctx, "127.0.0.1:31500/alice/app:1")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := base64.URLEncoding.DecodeString(h)
	var m map[string]string
	if json.Unmarshal(b, &m) != nil || m["username"] != "alice" || m["password"] != "kube-token" || m["serveraddress"] != "127.0.0.1:31500" {
		t.Errorf("docker push auth: %s", b)
	}
	if h, _ := dockerPushAuth(ctx, "127.0.0.1:25000/alice/app:1"); h != emptyAuth {
		t.Error("the platform's token in a push to another registry")
	}
	if calls != 3 {
		t.Errorf("credentials asked %d times, want 3", calls)
	}

	// A failure to get credentials names the registry.
	bad := WithRegistryAuth(context.Background(), &RegistryAuth{Host: "127.0.0.1:31500", Credentials: func(context.Context) (string, string, error) {
		return "", "", errors.New("token revoked")
	}})
	if _, err := authn.Resolve(bad, registryKeychain(bad), repo); err == nil || !strings.Contains(err.Error(), "127.0.0.1:31500") || !strings.Contains(err.Error(), "token revoked") {
		t.Errorf("failure: %v", err)
	}
}

func TestTLSFromEnv(t *testing.T) {
	dir := t.TempDir()
	ca, _, err := pki.NewCA("ca", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	key, csr, _ := pki.NewClientKey("x")
	cert, _, err := ca.SignClient(csr, "x", time.Now(), 0)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	certF, keyF, caF := write("tls.crt", cert), write("tls.key", key), write("ca.crt", ca.CertPEM)
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	if o, err := TLSFromEnv(env(nil)); o != nil || err != nil {
		t.Errorf("none set: %v %v", o, err)
	}
	if o, err := TLSFromEnv(env(map[string]string{EnvBuildKitCert: certF, EnvBuildKitKey: keyF, EnvBuildKitCA: caF})); o == nil || err != nil {
		t.Errorf("all three: %v", err)
	}
	if _, err := TLSFromEnv(env(map[string]string{EnvBuildKitCert: certF})); err == nil || !strings.Contains(err.Error(), EnvBuildKitCA) {
		t.Errorf("one of three: %v", err)
	}
	if _, err := TLSFromEnv(env(map[string]string{EnvBuildKitCert: certF, EnvBuildKitKey: caF, EnvBuildKitCA: caF})); err == nil {
		t.Error("a CA as the key")
	}
	if _, err := TLSFromEnv(env(map[string]string{EnvBuildKitCert: certF, EnvBuildKitKey: keyF, EnvBuildKitCA: filepath.Join(dir, "none")})); err == nil || !strings.Contains(err.Error(), EnvBuildKitCA) {
		t.Errorf("a missing file: %v", err)
	}
	// Select refuses the half-set variables before asking any daemon.
	if _, err := Select(context.Background(), SelectOptions{Getenv: env(map[string]string{EnvBuildKitKey: keyF})}); err == nil || !strings.Contains(err.Error(), EnvBuildKitCert) {
		t.Errorf("Select: %v", err)
	}
}

//go:build unix

package build

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dockerconfig "github.com/docker/cli/cli/config/configfile"
	"github.com/moby/buildkit/session/auth"
	"github.com/moby/buildkit/session/auth/authprovider"
)

// sleepyHelper puts a Docker credential helper that never answers (within the test) on PATH
// and a Docker config naming it for registry; it returns the config file.
func sleepyHelper(t *testing.T, registry string) string {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	// 3 s: long past the test's deadline, short enough to end on its own soon after.
	if err := os.WriteFile(filepath.Join(bin, "docker-credential-devtoolsleepy"), []byte("#!/bin/sh\nexec sleep 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "config.json")
	if err := os.WriteFile(cfg, []byte(`{"credHelpers":{"`+registry+`":"devtoolsleepy"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	t.Setenv("DOCKER_CONFIG", dir)
	return cfg
}

func shortHelperTimeout(t *testing.T) {
	old := credentialHelperTimeout
	credentialHelperTimeout = 300 * time.Millisecond
	t.Cleanup(func() { credentialHelperTimeout = old })
}

// TestDerivedImageCredentialHelperDeadline: reading a base image whose registry's credential
// helper never answers fails at the helper's deadline, saying what it waited for; a cancelled
// command returns at once.
func TestDerivedImageCredentialHelperDeadline(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	reg := ln.Addr().String()
	sleepyHelper(t, reg)
	shortHelperTimeout(t)
	folder := t.TempDir()

	start := time.Now()
	_, err = DerivedImage(context.Background(), reg+"/ns/base:1", reg+"/ns/app", []HostFolder{{Source: folder, Target: "/data"}})
	t.Logf("after %v: %v", time.Since(start).Round(time.Millisecond), err)
	if err == nil || !strings.Contains(err.Error(), "waiting for the Docker credential helper for "+reg) || !strings.Contains(err.Error(), "for 300ms") {
		t.Fatalf("err = %v", err)
	}
	if time.Since(start) > 20*time.Second {
		t.Fatal("the deadline was not applied")
	}

	credentialHelperTimeout = time.Minute
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start = time.Now()
	_, err = DerivedImage(ctx, reg+"/ns/base:1", reg+"/ns/app", []HostFolder{{Source: folder, Target: "/data"}})
	if err == nil || !strings.Contains(err.Error(), "context deadline exceeded") || time.Since(start) > 20*time.Second {
		t.Fatalf("cancelled: after %v: %v", time.Since(start), err)
	}
}

// TestBuildKitAuthProviderDeadline: when the BuildKit daemon asks the build session for registry
// credentials and the Docker credential helper never answers, the session answers with an error
// at the deadline (or when the build is cancelled) instead of holding the build forever.
func TestBuildKitAuthProviderDeadline(t *testing.T) {
	reg := "127.0.0.1:1"
	cfgFile := sleepyHelper(t, reg)
	shortHelperTimeout(t)
	cf := dockerconfig.New(cfgFile)
	cf.CredentialHelpers = map[string]string{reg: "devtoolsleepy"}
	a, ok := boundAuthProvider(authprovider.NewDockerAuthProvider(authprovider.DockerAuthProviderConfig{ConfigFile: cf})).(auth.AuthServer)
	if !ok {
		t.Fatal("not an auth server")
	}
	if _, ok := a.(*boundedAuthProvider); !ok {
		t.Fatalf("BuildKit's auth provider was not wrapped: %T", a)
	}
	start := time.Now()
	_, err := a.Credentials(context.Background(), &auth.CredentialsRequest{Host: reg})
	t.Logf("after %v: %v", time.Since(start).Round(time.Millisecond), err)
	if err == nil || !strings.Contains(err.Error(), "Docker credential helper") || !strings.Contains(err.Error(), reg+" for 300ms") {
		t.Fatalf("err = %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := a.GetTokenAuthority(ctx, &auth.GetTokenAuthorityRequest{Host: reg}); err == nil || !strings.Contains(err.Error(), "context canceled") {
		t.Fatalf("cancelled: %v", err)
	}
}

// Package agentbin carries the devtool-agent binaries (linux/amd64, linux/arm64) inside
// the CLI. `make build` cross-builds them gzip'd into bin/ before compiling the CLI; a
// plain `go build` has only bin/README.md and For says how to get them.
package agentbin

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

//go:embed bin
var files embed.FS

// EnvBinary names an environment variable that, when set, points at an agent binary
// used for every architecture instead of the embedded ones (tests, development).
const EnvBinary = "DEVTOOL_AGENT_BINARY"

// ErrMissing is returned (wrapped) when this build carries no agent for an architecture.
var ErrMissing = errors.New("agent binary missing")

// For returns the agent binary for linux/goarch and its sha256 in hex. The
// DEVTOOL_AGENT_BINARY environment variable, when set, wins.
func For(goarch string) (data []byte, sha string, err error) {
	return ForEnv(goarch, os.Getenv)
}

// ForEnv is For with the environment passed in.
func ForEnv(goarch string, getenv func(string) string) ([]byte, string, error) {
	if p := getenv(EnvBinary); p != "" {
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, "", fmt.Errorf("%s=%s: %w", EnvBinary, p, err)
		}
		return data, digest(data), nil
	}
	switch goarch {
	case "amd64", "arm64":
	default:
		return nil, "", fmt.Errorf("%w: no agent for linux/%s (devtool carries linux/amd64 and linux/arm64)", ErrMissing, goarch)
	}
	name := "bin/devtool-agent-linux-" + goarch + ".gz"
	gz, err := files.ReadFile(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, "", fmt.Errorf("%w: this devtool was built without the agent for linux/%s; build it with 'make build', or set %s to a devtool-agent binary", ErrMissing, goarch, EnvBinary)
	}
	if err != nil {
		return nil, "", err
	}
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", name, err)
	}
	data, err := io.ReadAll(zr)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", name, err)
	}
	return data, digest(data), nil
}

func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

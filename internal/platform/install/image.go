package install

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// PushImage makes the platform's image — the static binary at binPath as /devtool-platform on an
// empty base, run as nobody — and pushes it as <repo>:<hash of the binary> unless the registry has
// it. No builder is needed. A registry on loopback is spoken to over plain HTTP.
func PushImage(ctx context.Context, binPath, repo string) (string, error) {
	bin, err := os.ReadFile(binPath)
	if err != nil {
		return "", fmt.Errorf("reading the platform binary: %w", err)
	}
	sum := sha256.Sum256(bin)
	ref := repo + ":" + hex.EncodeToString(sum[:])[:24]
	var opts []name.Option
	if loopbackRegistry(repo) {
		opts = append(opts, name.Insecure)
	}
	tag, err := name.ParseReference(ref, opts...)
	if err != nil {
		return "", fmt.Errorf("image name %s: %w", ref, err)
	}
	if _, err := remote.Head(tag, remote.WithContext(ctx)); err == nil {
		return ref, nil
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: "devtool-platform", Mode: 0o755, Size: int64(len(bin)), Typeflag: tar.TypeReg}); err != nil {
		return "", err
	}
	if _, err := tw.Write(bin); err != nil {
		return "", err
	}
	if err := tw.Close(); err != nil {
		return "", err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf.Bytes())), nil })
	if err != nil {
		return "", err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return "", err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return "", err
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS = runtime.GOARCH, "linux"
	cf.Config = v1.Config{Entrypoint: []string{"/devtool-platform"}, Cmd: []string{"serve"}, User: "65534:65534"}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return "", err
	}
	if err := remote.Write(tag, img, remote.WithContext(ctx)); err != nil {
		return "", fmt.Errorf("pushing %s: %w", ref, err)
	}
	return ref, nil
}

func loopbackRegistry(repo string) bool {
	host, _, _ := strings.Cut(repo, "/")
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

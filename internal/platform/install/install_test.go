package install

import (
	"archive/tar"
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

func TestCertsServeTheHost(t *testing.T) {
	c, err := NewCerts([]string{"devtool.localhost", "*.devtool.localhost", "127.0.0.1"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(c.Cert, c.Key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := x509.ParseCertificate(pair.Certificate[0])
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(c.CA)
	for _, h := range []string{"devtool.localhost", "api.devtool.localhost", "127.0.0.1"} {
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: h}); err != nil {
			t.Errorf("%s: %v", h, err)
		}
	}
	if !certCovers(c.Cert, "devtool.localhost") || certCovers(c.Cert, "other.localhost") {
		t.Error("certCovers")
	}
}

func TestLoopbackRegistry(t *testing.T) {
	for repo, want := range map[string]bool{"127.0.0.1:25000/x/y": true, "localhost:5000/a": true, "[::1]:5000/a": true, "registry.example.com/a": false} {
		if got := loopbackRegistry(repo); got != want {
			t.Errorf("%s: %v", repo, got)
		}
	}
}

func TestPushImage(t *testing.T) {
	reg := httptest.NewServer(registry.New())
	defer reg.Close()
	bin := filepath.Join(t.TempDir(), "devtool-platform")
	if err := os.WriteFile(bin, []byte("#!binary"), 0o755); err != nil {
		t.Fatal(err)
	}
	repo := strings.TrimPrefix(reg.URL, "http://") + "/devtool-system/devtool-platform"
	ref, err := PushImage(context.Background(), bin, repo)
	if err != nil {
		t.Fatal(err)
	}
	again, err := PushImage(context.Background(), bin, repo)
	if err != nil || again != ref {
		t.Fatalf("second push: %q %v, want %q", again, err, ref)
	}
	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	img, err := remote.Image(r)
	if err != nil {
		t.Fatal(err)
	}
	cf, _ := img.ConfigFile()
	if cf.OS != "linux" || len(cf.Config.Entrypoint) != 1 || cf.Config.Entrypoint[0] != "/devtool-platform" || cf.Config.User != "65534:65534" {
		t.Fatalf("config: %+v", cf.Config)
	}
	ls, _ := img.Layers()
	rc, _ := ls[0].Uncompressed()
	defer rc.Close()
	tr := tar.NewReader(rc)
	h, err := tr.Next()
	if err != nil || h.Name != "devtool-platform" || h.Mode != 0o755 {
		t.Fatalf("layer: %+v %v", h, err)
	}
	if b, _ := io.ReadAll(tr); string(b) != "#!binary" {
		t.Fatalf("layer content %q", b)
	}
}

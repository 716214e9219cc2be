package install

import (
	"crypto/tls"
	"crypto/x509"
	"testing"
	"time"
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

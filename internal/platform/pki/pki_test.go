package pki

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"strings"
	"testing"
	"time"
)

func csrFor(t *testing.T, key any, cn string, dns ...string) []byte {
	t.Helper()
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: cn}, DNSNames: dns}, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

func TestSignClient(t *testing.T) {
	now := time.Now()
	ca, keyPEM, err := NewCA("test CA", now)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := ParseCA(ca.CertPEM, keyPEM); err != nil || !again.Cert.Equal(ca.Cert) {
		t.Fatalf("ParseCA: %v", err)
	}
	_, csr, err := NewClientKey("mallory")
	if err != nil {
		t.Fatal(err)
	}
	certPEM, exp, err := ca.SignClient(csr, "alice", now, 0)
	if err != nil {
		t.Fatal(err)
	}
	c, err := ParseCertificate(certPEM)
	if err != nil {
		t.Fatal(err)
	}
	// The platform names the caller, whatever the request asked for; client use only; one hour.
	if c.Subject.CommonName != "alice" || len(c.DNSNames) != 0 || len(c.ExtKeyUsage) != 1 || c.ExtKeyUsage[0] != x509.ExtKeyUsageClientAuth || c.IsCA {
		t.Fatalf("certificate: CN %q DNS %v usages %v CA %v", c.Subject.CommonName, c.DNSNames, c.ExtKeyUsage, c.IsCA)
	}
	if !c.NotAfter.Equal(exp) || exp.Sub(now) > DefaultClientLifetime || exp.Sub(now) < DefaultClientLifetime-time.Second {
		t.Fatalf("expiry %v (now %v)", exp, now)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	if _, err := c.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, CurrentTime: now}); err != nil {
		t.Fatalf("does not verify as a client: %v", err)
	}
	if _, err := c.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, CurrentTime: now}); err == nil {
		t.Fatal("a client certificate verifies as a server's")
	}
	// Lifetimes are clamped.
	if _, exp, _ := ca.SignClient(csr, "alice", now, 30*24*time.Hour); exp.Sub(now) > MaxClientLifetime {
		t.Errorf("lifetime not capped: %v", exp.Sub(now))
	}
	if _, exp, _ := ca.SignClient(csr, "alice", now, time.Second); exp.Sub(now) < MinClientLifetime-time.Second {
		t.Errorf("lifetime not raised: %v", exp.Sub(now))
	}
	// Keys accepted and refused; malformed requests.
	ed, edKey, _ := ed25519.GenerateKey(rand.Reader)
	_ = ed
	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	p224, _ := ecdsa.GenerateKey(elliptic.P224(), rand.Reader)
	rsa1024, _ := rsa.GenerateKey(rand.Reader, 1024)
	for name, tc := range map[string]struct {
		csr  []byte
		want string
	}{
		"ed25519":       {csrFor(t, edKey, "x"), ""},
		"P-384":         {csrFor(t, p384, "x"), ""},
		"P-224":         {csrFor(t, p224, "x"), "P-256 or P-384"},
		"RSA 1024":      {csrFor(t, rsa1024, "x"), "2048"},
		"not PEM":       {[]byte("hello"), "PEM CERTIFICATE REQUEST"},
		"a certificate": {ca.CertPEM, "PEM CERTIFICATE REQUEST"},
		"too large":     {[]byte(strings.Repeat("x", MaxCSRBytes+1)), "over"},
		"bad signature": {tamper(csrFor(t, p384, "x")), "csr"},
	} {
		_, _, err := ca.SignClient(tc.csr, "alice", now, 0)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: got %v, want %q", name, err, tc.want)
		}
	}
}

// tamper flips a byte of the request's signature.
func tamper(csrPEM []byte) []byte {
	blk, _ := pem.Decode(csrPEM)
	b := append([]byte(nil), blk.Bytes...)
	b[len(b)-3] ^= 0xff
	return pem.EncodeToMemory(&pem.Block{Type: blk.Type, Bytes: b})
}

func TestServerCertCovers(t *testing.T) {
	now := time.Now()
	ca, _, _ := NewCA("ca", now)
	other, _, _ := NewCA("other", now)
	cert, _, err := ca.ServerCert([]string{"127.0.0.1", "devtool-buildkit.ns.svc"}, now)
	if err != nil {
		t.Fatal(err)
	}
	for host, want := range map[string]bool{"127.0.0.1": true, "devtool-buildkit.ns.svc": true, "example.com": false} {
		if got := ca.Covers(cert, host, now, 24*time.Hour); got != want {
			t.Errorf("%s: %v", host, got)
		}
	}
	if other.Covers(cert, "127.0.0.1", now, 0) {
		t.Error("covered under another CA")
	}
	if ca.Covers(cert, "127.0.0.1", now, 3*365*24*time.Hour) {
		t.Error("a two-year certificate covers three years")
	}
}

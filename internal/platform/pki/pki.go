// Package pki is the certificate authority of the platform's hosted build service: the CA that
// BuildKit trusts for its clients, the BuildKit server certificate it signs at install, and the
// short-lived client certificates the API signs for users (POST /api/v1/builder/credentials).
// Clients make their own key and send a certificate request: a private key never leaves the
// machine that uses it.
package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"time"
)

// CA is a certificate authority: its certificate and key.
type CA struct {
	Cert *x509.Certificate
	Key  crypto.Signer
	// CertPEM is Cert, PEM-encoded: what clients and BuildKit trust.
	CertPEM []byte
}

// NewCA makes a CA valid for ten years.
func NewCA(commonName string, now time.Time) (*CA, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: commonName},
		NotBefore: now.Add(-time.Hour), NotAfter: now.AddDate(10, 0, 0),
		IsCA: true, BasicConstraintsValid: true, MaxPathLenZero: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, err
	}
	keyPEM, err := encodeKey(key)
	if err != nil {
		return nil, nil, err
	}
	return &CA{Cert: cert, Key: key, CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, keyPEM, nil
}

// ParseCA reads a CA from its PEM certificate and key (EC or PKCS#8).
func ParseCA(certPEM, keyPEM []byte) (*CA, error) {
	cert, err := ParseCertificate(certPEM)
	if err != nil {
		return nil, fmt.Errorf("the CA certificate: %w", err)
	}
	if !cert.IsCA {
		return nil, errors.New("the CA certificate is not a CA")
	}
	blk, _ := pem.Decode(keyPEM)
	if blk == nil {
		return nil, errors.New("the CA key: no PEM block")
	}
	var key any
	switch blk.Type {
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(blk.Bytes)
	default:
		key, err = x509.ParsePKCS8PrivateKey(blk.Bytes)
	}
	if err != nil {
		return nil, fmt.Errorf("the CA key: %w", err)
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, errors.New("the CA key cannot sign")
	}
	return &CA{Cert: cert, Key: signer, CertPEM: certPEM}, nil
}

// ParseCertificate reads the first certificate of a PEM block.
func ParseCertificate(certPEM []byte) (*x509.Certificate, error) {
	blk, _ := pem.Decode(certPEM)
	if blk == nil || blk.Type != "CERTIFICATE" {
		return nil, errors.New("no PEM certificate")
	}
	return x509.ParseCertificate(blk.Bytes)
}

// ServerCert issues a serving certificate (two years) for hosts (DNS names or IP addresses) and
// returns it and its key, PEM-encoded.
func (ca *CA) ServerCert(hosts []string, now time.Time) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: hosts[0]},
		NotBefore: now.Add(-time.Hour), NotAfter: now.AddDate(2, 0, 0),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		return nil, nil, err
	}
	keyPEM, err = encodeKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), keyPEM, nil
}

// Covers reports whether certPEM is a certificate of this CA valid for host and for at least
// minLeft after now.
func (ca *CA) Covers(certPEM []byte, host string, now time.Time, minLeft time.Duration) bool {
	c, err := ParseCertificate(certPEM)
	if err != nil {
		return false
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	_, err = c.Verify(x509.VerifyOptions{Roots: pool, DNSName: host, CurrentTime: now,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	return err == nil && now.Add(minLeft).Before(c.NotAfter)
}

// Client certificate lifetimes: what a request gets by default, and the most it may ask for.
const (
	DefaultClientLifetime = time.Hour
	MaxClientLifetime     = 24 * time.Hour
	MinClientLifetime     = 10 * time.Minute
)

// MaxCSRBytes bounds a certificate request.
const MaxCSRBytes = 16 << 10

// SignClient checks a PEM certificate request (its signature; an ECDSA P-256/P-384, Ed25519 or
// RSA ≥ 2048 key) and issues a client certificate for user, valid from now for lifetime. Whatever
// names the request asks for are ignored: the certificate names user only and can only
// authenticate a client.
func (ca *CA) SignClient(csrPEM []byte, user string, now time.Time, lifetime time.Duration) ([]byte, time.Time, error) {
	if len(csrPEM) > MaxCSRBytes {
		return nil, time.Time{}, fmt.Errorf("the certificate request is over %d bytes", MaxCSRBytes)
	}
	blk, _ := pem.Decode(csrPEM)
	if blk == nil || blk.Type != "CERTIFICATE REQUEST" {
		return nil, time.Time{}, errors.New("csr: expected a PEM CERTIFICATE REQUEST")
	}
	csr, err := x509.ParseCertificateRequest(blk.Bytes)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("csr: %w", err)
	}
	if err := csr.CheckSignature(); err != nil {
		return nil, time.Time{}, fmt.Errorf("csr: bad signature: %w", err)
	}
	if err := checkKey(csr.PublicKey); err != nil {
		return nil, time.Time{}, fmt.Errorf("csr: %w", err)
	}
	if lifetime <= 0 {
		lifetime = DefaultClientLifetime
	}
	lifetime = min(max(lifetime, MinClientLifetime), MaxClientLifetime)
	notAfter := now.Add(lifetime).Truncate(time.Second) // what the certificate can hold
	if notAfter.After(ca.Cert.NotAfter) {
		notAfter = ca.Cert.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: user, Organization: []string{"devtool platform users"}},
		// A little back-dating absorbs a client clock running behind.
		NotBefore: now.Add(-5 * time.Minute), NotAfter: notAfter,
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, csr.PublicKey, ca.Key)
	if err != nil {
		return nil, time.Time{}, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), notAfter, nil
}

func checkKey(pub any) error {
	switch k := pub.(type) {
	case *ecdsa.PublicKey:
		if k.Curve != elliptic.P256() && k.Curve != elliptic.P384() {
			return errors.New("ECDSA keys must use P-256 or P-384")
		}
	case *rsa.PublicKey:
		if k.Size() < 256 {
			return errors.New("RSA keys must have at least 2048 bits")
		}
	case ed25519.PublicKey:
	default:
		return fmt.Errorf("unsupported key type %T", pub)
	}
	return nil
}

// NewClientKey makes a client key and a certificate request for it (the CLI's side of
// SignClient): the key and the request, PEM-encoded.
func NewClientKey(commonName string) (keyPEM, csrPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: commonName}}, key)
	if err != nil {
		return nil, nil, err
	}
	if keyPEM, err = encodeKey(key); err != nil {
		return nil, nil, err
	}
	return keyPEM, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}), nil
}

func encodeKey(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	return n
}

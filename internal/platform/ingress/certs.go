package ingress

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"sync/atomic"
	"time"
)

// certSource holds the certificate served to every host; the controller replaces it when the TLS
// Secret changes, so a renewed certificate is served without a restart.
type certSource struct {
	cur atomic.Pointer[tls.Certificate]
}

func (c *certSource) set(certPEM, keyPEM []byte) error {
	if len(certPEM) == 0 || len(keyPEM) == 0 {
		return errors.New("the Secret has no tls.crt or tls.key")
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return err
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		return err
	}
	if time.Now().After(leaf.NotAfter) {
		return fmt.Errorf("the certificate expired on %s", leaf.NotAfter.Format(time.RFC3339))
	}
	cert.Leaf = leaf
	c.cur.Store(&cert)
	return nil
}

func (c *certSource) get() *tls.Certificate { return c.cur.Load() }

func (c *certSource) getOrErr() (*tls.Certificate, error) {
	if cert := c.cur.Load(); cert != nil {
		return cert, nil
	}
	return nil, errors.New("no certificate loaded yet")
}

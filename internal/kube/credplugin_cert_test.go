//go:build unix

package kube

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// testCA signs client certificates for a loopback TLS server that requires them.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testCA{cert: cert, key: key, pool: pool}
}

// client returns a PEM certificate and key for the user cn.
func (ca *testCA) client(t *testing.T, cn string, serial int64) (string, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
		string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}))
}

// TestCredentialPluginCertificate: a plugin answering with a client certificate (and key) gets
// the deadline like any other, and the API server (a loopback TLS server that requires a client
// certificate signed by its CA) sees that certificate. Without an expiry the plugin runs once for
// several requests; with an expiry in the past it runs again and new connections present the
// new certificate.
func TestCredentialPluginCertificate(t *testing.T) {
	ca := newTestCA(t)
	dir := t.TempDir()
	count := filepath.Join(dir, "count")
	answer := filepath.Join(dir, "answer.json")
	plugin := filepath.Join(dir, "plugin")
	script := "#!/bin/sh\necho x >> " + count + "\ncat " + answer + "\n"
	if err := os.WriteFile(plugin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	writeAnswer := func(t *testing.T, cn string, serial int64, expired bool) {
		t.Helper()
		crt, key := ca.client(t, cn, serial)
		st := map[string]any{"clientCertificateData": crt, "clientKeyData": key}
		if expired {
			st["expirationTimestamp"] = "2000-01-01T00:00:00Z"
		}
		b, _ := json.Marshal(map[string]any{"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential", "status": st})
		if err := os.WriteFile(answer, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	runs := func() int {
		b, _ := os.ReadFile(count)
		return strings.Count(string(b), "\n")
	}

	var mu sync.Mutex
	var seen []string
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		cn := ""
		if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
			cn = r.TLS.PeerCertificates[0].Subject.CommonName
		}
		seen = append(seen, cn+"|"+r.Header.Get("Authorization"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"NamespaceList","apiVersion":"v1","items":[]}`))
	}))
	// Certificates optional (a token client shares the server), HTTP/2 as an API server.
	srv.TLS = &tls.Config{ClientAuth: tls.VerifyClientCertIfGiven, ClientCAs: ca.pool}
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})

	newClient := func(t *testing.T) kubernetes.Interface {
		t.Helper()
		cfg := &rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{CAData: caPEM},
			ExecProvider: &clientcmdapi.ExecConfig{APIVersion: "client.authentication.k8s.io/v1", Command: plugin,
				InteractiveMode: clientcmdapi.NeverExecInteractiveMode}}
		if err := BoundCredentialPlugin(cfg, "me", 10*time.Second); err != nil {
			t.Fatal(err)
		}
		if cfg.ExecProvider != nil {
			t.Fatal("client-go still runs the plugin")
		}
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return cs
	}
	list := func(t *testing.T, cs kubernetes.Interface) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	reset := func() {
		os.Remove(count)
		mu.Lock()
		seen = nil
		mu.Unlock()
	}

	t.Run("certificate used, plugin run once", func(t *testing.T) {
		reset()
		writeAnswer(t, "alice", 2, false)
		cs := newClient(t)
		for range 3 {
			list(t, cs)
		}
		mu.Lock()
		defer mu.Unlock()
		if strings.Join(seen, ",") != "alice|,alice|,alice|" {
			t.Fatalf("requests seen as %q", seen)
		}
		if n := runs(); n != 1 {
			t.Fatalf("the plugin ran %d times, want 1", n)
		}
	})
	t.Run("an expired certificate is replaced", func(t *testing.T) {
		reset()
		writeAnswer(t, "bob", 3, true)
		cs := newClient(t)
		list(t, cs)
		writeAnswer(t, "carol", 4, true)
		list(t, cs)
		mu.Lock()
		defer mu.Unlock()
		if len(seen) != 2 || seen[0] != "bob|" || seen[1] != "carol|" {
			t.Fatalf("requests seen as %q, want bob then carol", seen)
		}
	})
	t.Run("connections not shared with a token client", func(t *testing.T) {
		// Both clients get client-go's cached transport (same server and CA); the certificate's
		// HTTP/2 connection must not carry the token client's requests.
		reset()
		writeAnswer(t, "erin", 6, false)
		list(t, newClient(t))
		tokenPlugin := filepath.Join(dir, "token-plugin")
		if err := os.WriteFile(tokenPlugin, []byte("#!/bin/sh\necho '{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\",\"status\":{\"token\":\"tok\"}}'\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		cfg := &rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{CAData: caPEM},
			ExecProvider: &clientcmdapi.ExecConfig{APIVersion: "client.authentication.k8s.io/v1", Command: tokenPlugin,
				InteractiveMode: clientcmdapi.NeverExecInteractiveMode}}
		if err := BoundCredentialPlugin(cfg, "other", 10*time.Second); err != nil {
			t.Fatal(err)
		}
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		list(t, cs)
		list(t, cs)
		mu.Lock()
		defer mu.Unlock()
		if strings.Join(seen, ",") != "erin|,|Bearer tok,|Bearer tok" {
			t.Fatalf("requests seen as %q: the token client used the certificate's connection", seen)
		}
	})
	t.Run("a certificate without its key", func(t *testing.T) {
		reset()
		crt, _ := ca.client(t, "dave", 5)
		b, _ := json.Marshal(map[string]any{"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",
			"status": map[string]any{"clientCertificateData": crt}})
		if err := os.WriteFile(answer, b, 0o600); err != nil {
			t.Fatal(err)
		}
		cs := newClient(t)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		if err == nil || !strings.Contains(err.Error(), "without its key") || strings.Contains(err.Error(), "BEGIN CERTIFICATE") {
			t.Fatalf("err = %v", err)
		}
	})
}

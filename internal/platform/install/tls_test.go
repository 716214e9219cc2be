package install

import (
	"context"
	"crypto/tls"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kfake "k8s.io/client-go/kubernetes/fake"

	"github.com/devtool/devtool/internal/platform/store"
)

// TestTLSSecretHoldsTheChain: the serving certificate file is the chain (certificate, then CA), so
// the server sends the CA and a client pins the CA, which outlives renewals of the certificate; a
// Secret made before (certificate alone) gets its CA appended.
func TestTLSSecretHoldsTheChain(t *testing.T) {
	ctx := context.Background()
	kc := kfake.NewClientset()
	st := &store.Store{Namespace: "ns", Kube: kc}
	ca, err := ensureTLS(ctx, st, "ns", "devtool.localhost", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	sec, err := kc.CoreV1().Secrets("ns").Get(ctx, TLSSecret, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(sec.Data["tls.crt"], sec.Data["tls.key"])
	if err != nil || len(pair.Certificate) != 2 {
		t.Fatalf("tls.crt: %d certificates (%v), want the certificate and its CA", len(pair.Certificate), err)
	}
	if string(sec.Data["ca.crt"]) != string(ca) || !chained(sec.Data["tls.crt"]) {
		t.Fatal("ca.crt is not the returned CA, or tls.crt is not chained")
	}

	// An older install's Secret: the certificate alone.
	c, err := NewCerts([]string{"devtool.localhost", "*.devtool.localhost"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	old := &corev1.Secret{ObjectMeta: meta(TLSSecret, "old"), Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{"ca.crt": c.CA, "tls.crt": c.Cert, "tls.key": c.Key}}
	if _, err := kc.CoreV1().Secrets("old").Create(ctx, old, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := ensureTLS(ctx, st, "old", "devtool.localhost", time.Now())
	if err != nil || string(got) != string(c.CA) {
		t.Fatalf("the old Secret's CA was not kept: %v", err)
	}
	sec, _ = kc.CoreV1().Secrets("old").Get(ctx, TLSSecret, metav1.GetOptions{})
	if pair, err := tls.X509KeyPair(sec.Data["tls.crt"], sec.Data["tls.key"]); err != nil || len(pair.Certificate) != 2 {
		t.Fatalf("the old Secret's tls.crt was not chained: %d %v", len(pair.Certificate), err)
	}
}

package contexts

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/devtool/devtool/internal/build"
	"github.com/devtool/devtool/internal/platform/client/clienttest"
	"github.com/devtool/devtool/internal/platform/pki"
)

func newBuilderCA(t *testing.T) *pki.CA {
	t.Helper()
	ca, _, err := pki.NewCA("test builder CA", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

// The client certificate of the hosted BuildKit: fetched for a key made here, kept 0600 with the
// key and the CA, reused until 80% of its life is spent, renewed after, and renewed when the file
// holds one that has expired (a laptop that slept). Another token never shares it.
func TestBuilderCertsKeptAndRenewed(t *testing.T) {
	f := clienttest.New(t)
	ca := newBuilderCA(t)
	f.SetBuilderCA(ca, "tcp://127.0.0.1:1234", "127.0.0.1:5000")
	alice := f.AddUser("alice", false)
	now := time.Now()
	f.Now = func() time.Time { return now }
	certs := &BuilderCerts{Store: NewStore(t.TempDir()), Now: func() time.Time { return now }}
	c := &Context{Name: f.URL(), Token: alice, Certificate: string(f.CAPEM), IsDevtool: true, Username: "alice"}
	ctx := context.Background()

	first, err := certs.Get(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	leaf := parseLeaf(t, first.Certificate)
	if leaf.Subject.CommonName != "alice" || leaf.ExtKeyUsage[0] != x509.ExtKeyUsageClientAuth || len(leaf.ExtKeyUsage) != 1 {
		t.Fatalf("certificate: CN %q, usages %v", leaf.Subject.CommonName, leaf.ExtKeyUsage)
	}
	if _, err := build.TLSCredentials(first.Certificate, first.Key, first.CA); err != nil {
		t.Fatalf("not usable: %v", err)
	}
	if first.Builder != "tcp://127.0.0.1:1234" || first.Registry != "127.0.0.1:5000" || !first.Expires.Equal(leaf.NotAfter) {
		t.Fatalf("answer: builder %q registry %q expires %v (certificate %v)", first.Builder, first.Registry, first.Expires, leaf.NotAfter)
	}
	fi, err := os.Stat(certs.Path(c))
	if err != nil {
		t.Fatal(err)
	}
	if runtime.GOOS != "windows" && fi.Mode().Perm() != 0o600 {
		t.Errorf("certificate file mode %v, want 0600", fi.Mode().Perm())
	}
	data, _ := os.ReadFile(certs.Path(c))
	var rec builderCertRecord
	if err := json.Unmarshal(data, &rec); err != nil || !strings.Contains(rec.Key, "PRIVATE KEY") || rec.URL != f.URL() {
		t.Fatalf("file: %v %+v", err, rec.URL)
	}

	now = now.Add(47 * time.Minute) // 78% of an hour
	if again, _ := certs.Get(ctx, c); string(again.Certificate) != string(first.Certificate) || f.BuilderCertsSigned() != 1 {
		t.Fatalf("at 78%%: renewed (%d signed)", f.BuilderCertsSigned())
	}
	now = now.Add(2 * time.Minute) // 82%
	second, err := certs.Get(ctx, c)
	if err != nil || string(second.Certificate) == string(first.Certificate) || f.BuilderCertsSigned() != 2 {
		t.Fatalf("at 82%%: %v (%d signed)", err, f.BuilderCertsSigned())
	}
	if string(second.Key) == string(first.Key) {
		t.Error("a renewal reuses the old key")
	}

	// Expired in the file: renewed, never handed out.
	now = now.Add(5 * time.Hour)
	third, err := certs.Get(ctx, c)
	if err != nil || f.BuilderCertsSigned() != 3 || !parseLeaf(t, third.Certificate).NotAfter.After(now) {
		t.Fatalf("after expiry: %v (%d signed)", err, f.BuilderCertsSigned())
	}

	// Another API token never reads alice's file.
	bob := f.AddUser("bob", false)
	cb := &Context{Name: f.URL(), Token: bob, Certificate: string(f.CAPEM), IsDevtool: true, Username: "bob"}
	if certs.Path(cb) == certs.Path(c) {
		t.Fatal("one file for two tokens")
	}
	b, err := certs.Get(ctx, cb)
	if err != nil || parseLeaf(t, b.Certificate).Subject.CommonName != "bob" {
		t.Fatalf("bob: %v", err)
	}
}

// A platform without a build service answers 404; the error says so.
func TestBuilderCertsNoBuildService(t *testing.T) {
	f := clienttest.New(t)
	alice := f.AddUser("alice", false)
	certs := &BuilderCerts{Store: NewStore(t.TempDir())}
	_, err := certs.Get(context.Background(), &Context{Name: f.URL(), Token: alice, Certificate: string(f.CAPEM), IsDevtool: true})
	if err == nil || !strings.Contains(err.Error(), "no hosted build service") {
		t.Fatalf("want the platform's 404, got %v", err)
	}
}

// hostedBuild: the build service only while the context's builder is empty or the platform's, the
// registry's password a kube token of the user.
func TestHostedBuildFromContext(t *testing.T) {
	f := clienttest.New(t)
	alice := f.AddUser("alice", false)
	store := NewStore(t.TempDir())
	c := &Context{Name: f.URL(), Token: alice, Certificate: string(f.CAPEM), IsDevtool: true, Username: "alice",
		Builder: "tcp://127.0.0.1:1234", BuildService: "tcp://127.0.0.1:1234", Registry: "127.0.0.1:5000"}
	hs, ra := hostedBuild(store, c)
	if hs == nil || hs.Addr != "tcp://127.0.0.1:1234" || ra == nil || ra.Host != "127.0.0.1:5000" {
		t.Fatalf("hosted %+v, registry %+v", hs, ra)
	}
	user, pass, err := ra.Credentials(context.Background())
	if err != nil || user != "alice" || !strings.HasPrefix(pass, "kube-alice-") {
		t.Fatalf("registry credentials %q %q %v", user, pass, err)
	}
	for _, b := range []string{"docker", "tcp://10.0.0.1:1234"} {
		cp := *c
		cp.Builder = b
		if hs, _ := hostedBuild(store, &cp); hs != nil {
			t.Errorf("builder %q: still the hosted service", b)
		}
	}
	cp := *c
	cp.BuildService, cp.Registry = "", ""
	if hs, ra := hostedBuild(store, &cp); hs != nil || ra != nil {
		t.Error("a platform without a build service or registry got one")
	}
}

func parseLeaf(t *testing.T, certPEM []byte) *x509.Certificate {
	t.Helper()
	c, err := pki.ParseCertificate(certPEM)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

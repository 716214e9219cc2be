package contexts

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/devtool/devtool/internal/atomicfile"
	"github.com/devtool/devtool/internal/build"
	"github.com/devtool/devtool/internal/platform/api"
	"github.com/devtool/devtool/internal/platform/client"
	"github.com/devtool/devtool/internal/platform/pki"
	"github.com/devtool/devtool/internal/safefile"
)

// builderCertRecord is the hosted BuildKit's client certificate of one platform user, with the
// key it was made for and the CA of BuildKit's certificate: the spec's "certificate information"
// saved with the context.
type builderCertRecord struct {
	URL         string    `json:"url"`
	Issued      time.Time `json:"issued"`
	Expires     time.Time `json:"expires"`
	Certificate string    `json:"certificate"`
	Key         string    `json:"key"`
	CA          string    `json:"ca"`
	Builder     string    `json:"builder"`
	Registry    string    `json:"registry"`
	TokenID     string    `json:"apiTokenId,omitempty"`
}

// BuilderCerts gets client certificates for a platform's hosted BuildKit
// (POST /api/v1/builder/credentials, for a key made here that never leaves this machine) and keeps
// them under <home>/.devtool/builder/ (0600, written atomically) until 80% of their life is spent.
// Like KubeTokens, the file is keyed by platform URL and API token.
type BuilderCerts struct {
	Store *Store
	// Now is the clock (tests); nil is time.Now.
	Now func() time.Time
	// Lifetime asked for (0: the platform's default, one hour).
	Lifetime time.Duration

	mu sync.Mutex
}

func (b *BuilderCerts) now() time.Time {
	if b.Now != nil {
		return b.Now()
	}
	return time.Now()
}

// Path is the file holding c's certificate.
func (b *BuilderCerts) Path(c *Context) string {
	sum := sha256.Sum256([]byte(c.Name + "\n" + c.Token))
	return filepath.Join(b.Store.Dir, "builder", hex.EncodeToString(sum[:12])+".json")
}

// BuilderCredentials are a client certificate for a hosted BuildKit, its key, and the CA its
// serving certificate is checked against (PEM).
type BuilderCredentials struct {
	Certificate, Key, CA []byte
	Expires              time.Time
	Builder, Registry    string
}

// Get returns a certificate with at least 20% of its life left, from the file or the platform.
func (b *BuilderCerts) Get(ctx context.Context, c *Context) (*BuilderCredentials, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := needToken(c); err != nil {
		return nil, err
	}
	p := b.Path(c)
	if data, err := safefile.Read(p, 1<<20); err == nil {
		var rec builderCertRecord
		if json.Unmarshal(data, &rec) == nil && rec.URL == c.Name && rec.Certificate != "" && rec.Key != "" &&
			b.now().Before(renewAt(rec.Issued, rec.Expires)) {
			return rec.credentials(), nil
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("reading the build service's client certificate: %w", err)
	}
	rec, err := b.renew(ctx, c)
	if err != nil {
		return nil, err
	}
	return rec.credentials(), nil
}

func (r *builderCertRecord) credentials() *BuilderCredentials {
	return &BuilderCredentials{Certificate: []byte(r.Certificate), Key: []byte(r.Key), CA: []byte(r.CA),
		Expires: r.Expires, Builder: r.Builder, Registry: r.Registry}
}

func (b *BuilderCerts) renew(ctx context.Context, c *Context) (*builderCertRecord, error) {
	key, csr, err := pki.NewClientKey(firstNonEmpty(c.Username, "devtool"))
	if err != nil {
		return nil, err
	}
	pc, err := PlatformClient(c)
	if err != nil {
		return nil, err
	}
	defer pc.Close()
	issued := b.now()
	bc, err := pc.BuilderCredentials(ctx, csr, int64(b.Lifetime/time.Second))
	if err != nil {
		return nil, err
	}
	// The answer is checked before it is kept: a certificate for our key, and a CA.
	if _, err := build.TLSCredentials([]byte(bc.Certificate), key, []byte(bc.CA)); err != nil {
		return nil, fmt.Errorf("the platform's answer to %s: %w", api.Prefix+"/builder/credentials", err)
	}
	if !bc.Expires.After(issued) {
		return nil, fmt.Errorf("the platform gave a build service certificate that has expired (%s); check this machine's clock", bc.Expires.Format(time.RFC3339))
	}
	id, _ := client.TokenID(c.Token)
	rec := &builderCertRecord{URL: c.Name, Issued: issued, Expires: bc.Expires, Certificate: bc.Certificate, Key: string(key),
		CA: bc.CA, Builder: bc.Builder, Registry: bc.Registry, TokenID: id}
	data, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := b.Store.ensureDir(b.Store.Dir); err != nil {
		return nil, err
	}
	if err := b.Store.ensureDir(filepath.Dir(b.Path(c))); err != nil {
		return nil, err
	}
	if err := atomicfile.WriteChecked(b.Path(c), append(data, '\n'), 0o600, nil); err != nil {
		return nil, err
	}
	return rec, nil
}

// Forget removes c's certificate (after the build service refused it).
func (b *BuilderCerts) Forget(c *Context) { _ = os.Remove(b.Path(c)) }

// hostedBuild is the platform's build service and registry credentials of a platform context: the
// build service when the platform has one and the context's builder is not set to another; the
// registry's credentials (the user's name and a Kubernetes token of theirs, KubeTokens) when the
// platform has a registry.
func hostedBuild(store *Store, c *Context) (*build.HostedService, *build.RegistryAuth) {
	var hs *build.HostedService
	if c.BuildService != "" && (c.Builder == "" || c.Builder == c.BuildService) {
		certs := &BuilderCerts{Store: store}
		cp := *c
		hs = &build.HostedService{Addr: c.BuildService, Platform: c.Name, Credentials: func(ctx context.Context) ([]byte, []byte, []byte, error) {
			bc, err := certs.Get(ctx, &cp)
			if err != nil {
				return nil, nil, nil, err
			}
			return bc.Certificate, bc.Key, bc.CA, nil
		}, Forget: func() { certs.Forget(&cp) }}
	}
	var ra *build.RegistryAuth
	if c.Registry != "" && c.Registry != "-" {
		tokens := &KubeTokens{Store: store}
		cp := *c
		ra = &build.RegistryAuth{Host: c.Registry, Credentials: func(ctx context.Context) (string, string, error) {
			kt, err := tokens.Get(ctx, &cp)
			if err != nil {
				return "", "", err
			}
			return firstNonEmpty(cp.Username, "devtool"), kt.Token, nil
		}}
	}
	return hs, ra
}
